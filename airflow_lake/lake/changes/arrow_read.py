"""The changes of a window read with pyarrow, without Spark: `airflow-lake changes` and the Lake page's change
counts (small tables; `LakeTable.changes` is the Spark read, with the same rows).

- A plain table: per data-changing commit, the rows of the files it added minus the rows of the files it
  removed are inserts, and the other way round deletes, as multisets over whole rows (before `columns` are
  picked): rows a copy-on-write rewrite carried over cancel out. A window from the empty table (`start` -1)
  reads the files live at its end, all inserts.
- A primary-key table: the merged state (`upsert.arrow_merge`) before and after the window, of the partitions
  the window touched only, compared key by key: insert, delete, or update_preimage + update_postimage; a key
  whose merged row did not change (a late lower version, a compaction) gives nothing.

Rows are compared as Python values: NaN equals NaN here (as in Spark's set operations), which `==` would not say.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.changes.window import ChangeWindow
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.pyarrow_read import arrow_type, read_files
from airflow_lake.lake.format.table_metadata import TableMetadata
from airflow_lake.lake.upsert.arrow_merge import read_merged_arrow

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lake.lake.format.data_files import DataFile

CHANGE_TYPE, COMMIT_SEQ, COMMIT_TIME = "_change_type", "_commit_seq", "_commit_time"
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_SEQ, COMMIT_TIME)  # the names `spark_read` gives them too
INSERT, DELETE, PREIMAGE, POSTIMAGE = "insert", "delete", "update_preimage", "update_postimage"
# what `change_counts` counts of each change type (an update is one pre- and one post-image: counted once)
COUNTED = {INSERT: "inserted", DELETE: "deleted", POSTIMAGE: "updated"}
Row = dict[str, Any]


class _NaN:
    """Stands for every NaN in a row's comparison key (NaN != NaN as Python floats)."""

    def __repr__(self) -> str:
        return "NaN"


_NAN = _NaN()


@dataclass(frozen=True)
class ReadPlan:
    """The files a window's Arrow read opens: for a plain table the commits' removed and added files (or the
    files live at the end); for a primary-key table the live files before and after the window in the
    partitions it touched, and the files the window's commits added or removed (their keys say which commit a
    key's change is credited to)."""

    before: tuple[DataFile, ...]
    after: tuple[DataFile, ...]
    credits: tuple[DataFile, ...] = ()

    @property
    def bytes(self) -> int:
        """Bytes of the files read, each once (what a caller bounds)."""
        return sum({f.path: f.bytes for f in (*self.before, *self.after, *self.credits)}.values())


def read_plan(table: TableMetadata, window: ChangeWindow) -> ReadPlan:
    """What `changes_arrow(table, window)` reads (without reading it): callers bound a read by its `bytes`."""
    if not window.spec.primary_key:
        removed = tuple(f for c in window.commits for f in c.removed)
        return ReadPlan(removed, (*window.initial, *(f for c in window.commits for f in c.added)))
    if window.empty:
        return ReadPlan((), ())
    if window.start < 0:
        return ReadPlan((), window.initial)
    touched = {_partition_key(p) for p in window.partitions()}
    return ReadPlan(_live_in(table, window.start, touched), _live_in(table, window.end, touched),
                    tuple(f for c in window.commits for f in (*c.removed, *c.added)))


def changes_arrow(table: TableMetadata, window: ChangeWindow, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows `window` changed (`changes.window.change_window`) as an Arrow table: the end spec's columns (or
    `columns`) plus `_change_type` (insert | delete | update_preimage | update_postimage), `_commit_seq` and
    `_commit_time` (UTC), oldest commit first. Read with pyarrow on this machine: for small tables."""
    import datetime as dt

    import pyarrow as pa

    spec = window.spec
    wanted = [spec.column(c).name for c in columns] if columns else list(spec.column_names)
    schema = pa.schema([*((name, arrow_type(spec.column(name).type)) for name in wanted),
                        (CHANGE_TYPE, pa.string()), (COMMIT_SEQ, pa.int64()),
                        (COMMIT_TIME, arrow_type("timestamp"))])
    out = []
    # whole microseconds rounded as `spark_read` rounds them (`fromtimestamp` may round the other way)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    for row, kind, seq, when in _changes(table, window):
        out.append({**{name: row[name] for name in wanted}, CHANGE_TYPE: kind, COMMIT_SEQ: seq,
                    COMMIT_TIME: epoch + dt.timedelta(microseconds=round(when * 1_000_000))})
    return pa.Table.from_pylist(out, schema=schema)


def change_counts(table: TableMetadata, window: ChangeWindow) -> dict[int, dict[str, int]]:
    """Per data-changing commit of `window` (by seq, oldest first): rows inserted, deleted and updated (keys of a
    primary-key table; plain tables have no updates). A commit whose changes cancel out counts zeros; data-free
    commits (`window.skipped`) are not listed. A window from the empty table counts its inserts at its end.
    Counts the log already tells (`counts_from_metadata`) read no file."""
    known = counts_from_metadata(window)
    if known is not None:
        return known
    return _counted(window, ((kind, seq) for _, kind, seq, _ in _changes(table, window)))


def counts_from_metadata(window: ChangeWindow) -> dict[int, dict[str, int]] | None:
    """`change_counts` without reading a file, where the log tells them: a plain table whose commits each only
    added files (every row an insert: an append) or only removed files (every row a delete: a partition or table
    dropped whole), counted from the files' row counts. None when some commit both removed and added files (a
    rewrite keeps rows: only reading tells which) or the table has a primary key (an upsert's row may update)."""
    if window.spec.primary_key:
        return None
    counts: dict[int, dict[str, int]] = {}
    for commit in window.commits:
        if commit.removed and commit.added:
            return None
        counts[commit.seq] = {"inserted": sum(f.rows for f in commit.added),
                              "deleted": sum(f.rows for f in commit.removed), "updated": 0}
    if window.initial:
        counts.setdefault(window.end, {"inserted": 0, "deleted": 0, "updated": 0})["inserted"] += \
            sum(f.rows for f in window.initial)
    return dict(sorted(counts.items()))


def counts_of(window: ChangeWindow, changes: pa.Table) -> dict[int, dict[str, int]]:
    """`change_counts` of rows `changes_arrow(table, window)` already read (without reading them again)."""
    return _counted(window, zip(changes.column(CHANGE_TYPE).to_pylist(), changes.column(COMMIT_SEQ).to_pylist(),
                                strict=True))


def _counted(window: ChangeWindow, changes: Iterable[tuple[str, int]]) -> dict[int, dict[str, int]]:
    counts = {c.seq: {"inserted": 0, "deleted": 0, "updated": 0} for c in window.commits}
    if window.initial:
        counts.setdefault(window.end, {"inserted": 0, "deleted": 0, "updated": 0})
    for kind, seq in changes:
        if kind in COUNTED:
            counts.setdefault(seq, {"inserted": 0, "deleted": 0, "updated": 0})[COUNTED[kind]] += 1
    return dict(sorted(counts.items()))


def _changes(table: TableMetadata, window: ChangeWindow) -> Iterable[tuple[Row, str, int, float]]:
    """(row in the end spec's columns, change type, commit seq, commit time) of every change, in output order."""
    clash = [c for c in window.spec.column_names if c.lower() in CHANGE_COLUMNS]
    if clash:
        raise LakeSpecError("columns", f"the table has a column named {clash[0]!r}, which the changes add "
                            f"({', '.join(CHANGE_COLUMNS)}).",
                            f"Rename it (alter_table [{{'rename': {clash[0]!r}, 'to': ...}}]).")
    if window.empty:
        return []
    if window.spec.primary_key:
        return _keyed_changes(table, window)
    return _plain_changes(table, window)


def _plain_changes(table: TableMetadata, window: ChangeWindow) -> list[tuple[Row, str, int, float]]:
    out: list[tuple[Row, str, int, float]] = []
    if window.initial:
        out += [(row, INSERT, window.end, window.end_completed_at) for row in _rows(table, window, window.initial)]
    for commit in window.commits:
        removed, added = _rows(table, window, commit.removed), _rows(table, window, commit.added)
        # multiset difference both ways: a row carried over (in both) is no change
        gone = Counter(_key(r) for r in removed) - Counter(_key(r) for r in added)
        came = Counter(_key(r) for r in added) - Counter(_key(r) for r in removed)
        out += [(r, DELETE, commit.seq, commit.completed_at) for r in _take(removed, gone)]
        out += [(r, INSERT, commit.seq, commit.completed_at) for r in _take(added, came)]
    return out


def _keyed_changes(table: TableMetadata, window: ChangeWindow) -> list[tuple[Row, str, int, float]]:
    """Net changes per key between the merged states before and after the window."""
    spec = window.spec
    plan = read_plan(table, window)
    keys = [*spec.partition_columns, *[k for k in spec.primary_key if k not in spec.partition_columns]]
    if window.initial:  # from the empty table: the merged snapshot at the end, every key an insert
        return [(row, INSERT, window.end, window.end_completed_at) for row in _merged(table, window, plan.after)]
    before = {tuple(_value(r[k]) for k in keys): r for r in _merged(table, window, plan.before)}
    after = {tuple(_value(r[k]) for k in keys): r for r in _merged(table, window, plan.after)}
    # a key's change is the last data commit of the window that touched it: whose added or removed files hold the
    # key (an upsert's deltas, a versioned delete's tombstones, a restore's files), as `spark_read` credits it
    touched: dict[tuple[Any, ...], tuple[int, float]] = {}
    for commit in window.commits:
        files = (*commit.removed, *commit.added)
        for row in read_files(table.storage, spec, files, keys).to_pylist() if files else []:
            touched[tuple(_value(row[k]) for k in keys)] = (commit.seq, commit.completed_at)
    last = (window.commits[-1].seq, window.commits[-1].completed_at)

    def credit(row: Row) -> tuple[int, float]:
        # (a key no file of the window holds cannot have changed: the fallback is never used but for safety)
        return touched.get(tuple(_value(row[k]) for k in keys), last)

    out: list[tuple[Row, str, int, float]] = []
    for key in _sorted({*before, *after}):
        old, new = before.get(key), after.get(key)
        if new is None and old is not None:
            out.append((old, DELETE, *credit(old)))
        elif old is None and new is not None:
            out.append((new, INSERT, *credit(new)))
        elif old is not None and new is not None and _key(old) != _key(new):
            seq, when = credit(new)
            out += [(old, PREIMAGE, seq, when), (new, POSTIMAGE, seq, when)]
    return out


def _rows(table: TableMetadata, window: ChangeWindow, files: Sequence[DataFile]) -> list[Row]:
    """The rows of `files` in the end spec's columns (a column added later reads NULL, a renamed one by the name
    it had when the file was written)."""
    if not files:
        return []
    rows: list[Row] = read_files(table.storage, window.spec, files).to_pylist()
    return rows


def _merged(table: TableMetadata, window: ChangeWindow, files: Sequence[DataFile]) -> list[Row]:
    if not files:
        return []
    rows: list[Row] = read_merged_arrow(table.storage, window.spec, files).to_pylist()
    return rows


def _live_in(table: TableMetadata, seq: int, partitions: set[tuple[tuple[str, str | None], ...]]
             ) -> tuple[DataFile, ...]:
    return tuple(f for f in table.state(seq).files.values() if _partition_key(f.partition) in partitions)


def _take(rows: Sequence[Row], wanted: Counter[tuple[Any, ...]]) -> list[Row]:
    """The rows of `rows` (in their order) that `wanted` counts, each as often as counted."""
    left = Counter(wanted)
    out = []
    for row in rows:
        key = _key(row)
        if left[key] > 0:
            left[key] -= 1
            out.append(row)
    return out


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(_value(v) for v in row.values())


def _value(value: Any) -> Any:
    return _NAN if isinstance(value, float) and math.isnan(value) else value


def _sorted(keys: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Keys in partition and key order, NULL first (by their text if values of one column do not compare)."""
    try:
        return sorted(keys, key=lambda key: [(v is not None, v) for v in key])
    except TypeError:
        return sorted(keys, key=lambda key: [(v is not None, str(v)) for v in key])


def _partition_key(partition: Mapping[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(partition.items()))
