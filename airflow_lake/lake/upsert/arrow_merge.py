"""The merged read of a primary-key table with pyarrow, without Spark: `LakeTable.to_arrow` (small tables).

The same rules as the Spark merged read (`merge_read.py`, rules in `physical.py`), applied in Python to the rows
of the snapshot's live files: a key's rows are grouped by its partition and key columns; a last-wins column takes
the value with the highest order stamp (whether it qualifies, its version, its row order within the upsert)
among the versions the key's delete watermark left; a commutative column (`sum`, `max`, `min`) folds the values
of rows newer than the watermark; a key whose data a delete removed is left out. A commutative operator from a
plugin has only a Spark form: such a table is read with `read(spark)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.format.pyarrow_read import arrow_type, read_files
from airflow_lake.lake.upsert.physical import (
    DELETED,
    NEWEST,
    OLDEST,
    SEQ,
    UNKNOWN_OLDEST,
    oldest_of,
    operator_of,
    physical_spec,
    qualified_of,
    value_columns,
    version_of,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lake.lake.format.data_files import DataFile
    from airflow_lake.lake.format.storage import Storage
    from airflow_lake.lake.spec.table_spec import TableSpec

Row = dict[str, Any]
_FOLDS: dict[str, Callable[[list[Any]], Any]] = {"sum": sum, "max": max, "min": min}


def read_merged_arrow(storage: Storage, spec: TableSpec, files: Sequence[DataFile],
                      columns: Sequence[str] | None = None) -> pa.Table:
    """One row per key of the primary-key table `spec`, merged over `files` (a snapshot's live files), as an
    Arrow table in the table's column order (or `columns`), sorted by partition and key."""
    import pyarrow as pa

    for name in value_columns(spec):
        op = operator_of(spec, name)
        if not op.stamped and op.name not in _FOLDS:
            raise LakeSpecError("table", f"column {name!r} is merged by the plugin operator {op.name!r}, which "
                                "has only a Spark form.", "Read the table with `read(spark)`.")
    keys = [*spec.partition_columns, *[k for k in spec.primary_key if k not in spec.partition_columns]]
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in read_files(storage, physical_spec(spec), files).to_pylist():  # in file order, file by file
        groups.setdefault(tuple(row[k] for k in keys), []).append(_with_row_stamps(row, spec))
    merged = [out for rows in groups.values() if (out := _merge(rows, spec, keys)) is not None]
    merged.sort(key=lambda row: [(row[k] is not None, row[k]) for k in keys])
    wanted = [spec.column(c).name for c in columns] if columns else spec.column_names
    schema = pa.schema([(name, arrow_type(spec.column(name).type)) for name in wanted])
    return pa.Table.from_pylist([{name: row[name] for name in wanted} for row in merged], schema=schema)


def _with_row_stamps(row: Row, spec: TableSpec) -> Row:
    """`physical.with_row_stamps` for one row: the row stamps of rows written before versioned deletes."""
    if row.get(NEWEST) is not None or row.get(DELETED) is not None:
        return row
    stamps = [row.get(version_of(c)) for c in value_columns(spec) if operator_of(spec, c).stamped]
    derived = max((s for s in stamps if s is not None), default=None)
    exact = row.get(SEQ) not in (0, None) and derived is not None  # (Spark: NULL != 0 is not true)
    return {**row, NEWEST: derived, OLDEST: derived if exact else UNKNOWN_OLDEST}


def _merge(rows: list[Row], spec: TableSpec, keys: Sequence[str]) -> Row | None:
    """A key's rows merged (`physical.merge_aggregates`); None if a delete removed the key."""
    watermark = _max(r.get(DELETED) for r in rows)

    def newer(version: Any) -> bool:  # a version the key's watermark did not remove
        return version is not None and (watermark is None or version > watermark)

    out: Row = {k: rows[0][k] for k in keys}
    for name in value_columns(spec):
        op = operator_of(spec, name)
        if not op.stamped:
            alive = []
            for row in rows:
                value = row.get(name)
                low = row.get(oldest_of(name)) if row.get(oldest_of(name)) is not None else row.get(OLDEST)
                high = row.get(version_of(name)) if row.get(version_of(name)) is not None else row.get(NEWEST)
                if value is None:
                    continue
                if watermark is not None and low is not None and high is not None and low <= watermark < high:
                    raise LakeError(f"key {out!r}: column {name!r} folds versions {low}..{high} across the delete "
                                    f"watermark {watermark}; the delete should have been refused. Report this.")
                if watermark is None or (low is not None and low > watermark):
                    alive.append(value)
            out[name] = _FOLDS[op.name](alive) if alive else None
            continue
        best: tuple[Any, ...] | None = None
        for row in rows:
            version = row.get(version_of(name))
            if not newer(version):
                continue  # not set by this row, or deleted: never wins
            # Spark orders a struct field by field, NULL first: (qualifies, version, row order)
            qualifies = row.get(qualified_of(name)) if op.qualified else None
            order = ((qualifies is not None, qualifies), version, row.get(SEQ)) if op.qualified else \
                (version, row.get(SEQ))
            if best is None or _after(order, best[0]):
                best = (order, row.get(name))
        out[name] = None if best is None else best[1]
    if watermark is not None and not any(newer(row.get(NEWEST)) for row in rows):
        return None  # deleted, and nothing newer
    return out


def _after(order: tuple[Any, ...], than: tuple[Any, ...]) -> bool:
    """Whether `order` sorts after `than` (a later row wins a tie, as the last row of a version does)."""
    return _key(order) >= _key(than)


def _key(order: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((item is not None, item) if not isinstance(item, tuple) else item for item in order)


def _max(values: Iterable[Any]) -> Any:
    return max((v for v in values if v is not None), default=None)
