"""Which live files another engine may see: every file of a plain table; a primary-key table's base files only.

A primary-key table's rows are a merge of base files (written by `compact_upserts`) and the delta files of the
upserts since. Other engines cannot merge, so they see the table as of its last compaction, as Paimon's Iceberg
compatibility does: base files only, and of those only the ones that hold no delete tombstone (a key compaction
keeps as deleted: its row stamp `__lake_v` is NULL, `upsert/physical.py`). Compaction writes tombstones into files of
their own, so a base file is wholly visible or wholly not. The format's own columns (`__lake_*`) are never in the
published schema, so no engine shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.operation_names import same_operation
from airflow_lake.lake.spec.table_spec import TableSpec

COMPACTION = "compact_upserts"  # upsert/compact.py OPERATION (`same_operation` also takes its old name)
ROW_STAMP = "__lake_v"  # upsert/physical.py NEWEST: NULL in a tombstone row


def is_base(operation: str) -> bool:
    """Whether files added by `operation` are a primary-key table's base files."""
    return same_operation(operation, COMPACTION)


def tombstones(data_file: DataFile) -> int:
    """How many of a base file's rows are delete tombstones (0 when its stats do not say: files written before
    versioned deletes had none)."""
    stamp = data_file.stats.get(ROW_STAMP)
    return 0 if stamp is None else int(stamp.null_count)


def visible(data_file: DataFile, spec: TableSpec, operation_of: Callable[[DataFile], str | None]) -> bool:
    """Whether other engines see `data_file`; `operation_of` names the operation that wrote it (None: unknown)."""
    if not spec.primary_key:
        return True
    operation = operation_of(data_file)
    return operation is not None and is_base(operation) and tombstones(data_file) == 0


def hidden_reason(data_file: DataFile, spec: TableSpec, operation: str | None) -> str:
    """Why a primary-key table's file is not published (for logs and `airflow-lake ls`)."""
    if operation is None:
        return "the entry that wrote it has expired from the log"
    if not is_base(operation):
        return "an upsert's delta file, published by the next compact_upserts"
    rows = tombstones(data_file)
    return f"holds {rows} delete tombstone(s)" if rows else "visible"


def visible_files(files: Mapping[str, DataFile], spec: TableSpec,
                  operation_of: Callable[[DataFile], str | None]) -> dict[str, DataFile]:
    """The files of `files` other engines see."""
    return {path: f for path, f in files.items() if visible(f, spec, operation_of)}
