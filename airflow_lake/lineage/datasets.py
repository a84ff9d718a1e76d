"""Which datasets a lake task read and wrote, from its rendered fields, its metrics and table metadata only.

The operation's table is an output of every operation that changes its rows or its schema (create, write, upsert,
delete, alter, restore, clustering, bucket rewrite, compaction) and an input of those that read its rows (clustering,
bucket rewrite, compaction, a copy-on-write delete, restore). Upkeep that changes no row (scheduling a clustering,
clean, orphan removal, rolling back pending instants) reads the table only: a lineage graph must not draw it as a
producer of the data. Sources are inputs: a write's or upsert's `source_path` or the lake tables of its `query` (its
`tables` and its `incremental` upstreams), and the key source of a versioned delete.

A table that committed is described as of its commit (the spec after it, the entry's statistics); a task that
committed nothing (a no-op, a failure) still names what it read and would have written, without commit facts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.table_metadata import TableMetadata
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lineage.naming import dataset_id, source_id

log = logging.getLogger(__name__)

# operations whose job reads the rows (files) of its own table
READS_ROWS = frozenset({"bucket_rewrite", "execute_clustering", "compact_upserts", "restore", "delete"})
# upkeep: reads the table's log and files, changes no row
UPKEEP = frozenset({"schedule_clustering", "clean", "remove_orphan_files", "rollback_pending"})


@dataclass(frozen=True)
class Commit:
    """The log entry a task committed (the last one, when it committed several)."""

    seq: int
    instant: str
    operation: str
    action: str
    request_id: str | None = None
    completed_at: float | None = None
    already_committed: bool = False  # a retry that found its first try's commit


@dataclass(frozen=True)
class Statistics:
    """What a commit wrote: rows, bytes and files it added."""

    rows: int | None
    bytes: int | None
    files: int | None


@dataclass(frozen=True)
class LakeDataset:
    """One dataset a task read or wrote."""

    namespace: str
    name: str
    url: str
    lake_table: bool  # a lake table (else source files)
    columns: tuple[tuple[str, str], ...] | None = None  # (name, Spark SQL type); None: not known
    version: int | None = None  # the table's log sequence number that was read or written
    commit: Commit | None = None
    statistics: Statistics | None = None
    lifecycle: str | None = None  # CREATE, ALTER, OVERWRITE
    file_format: str | None = None


@dataclass
class TaskDatasets:
    """The datasets of one task, each listed once."""

    inputs: list[LakeDataset] = field(default_factory=list)
    outputs: list[LakeDataset] = field(default_factory=list)

    def add(self, which: list[LakeDataset], dataset: LakeDataset) -> None:
        """Add `dataset` to `which` unless a dataset of the same name is there."""
        if all((d.namespace, d.name) != (dataset.namespace, dataset.name) for d in which):
            which.append(dataset)


def task_datasets(operation: str, table: str, fields: Mapping[str, Any],
                  metrics: Mapping[str, Any] | None) -> TaskDatasets:
    """The datasets of a task that ran `operation` on `table`.

    `fields` are the operator's rendered fields (`source_path`, `source_format`, `query`, `tables`, `keys`,
    `mode`); `metrics` what it returned (None: nothing, e.g. the task failed)."""
    metrics = metrics or {}
    out = TaskDatasets()
    for source in _sources(operation, fields):
        out.add(out.inputs, source)
    commit = commit_of(metrics)
    meta = _metadata(table)
    if operation == "create_table" and commit is not None and not metrics.get("created"):
        # a create that found the table committed nothing; its metrics name log entry 0, and reporting the table as
        # that entry made it would tell a lineage backend that the schema went back to its first one
        own = _current_dataset(table, meta)
        out.add(out.outputs, own)
        return out
    own = _table_dataset(table, meta, commit)
    if operation in UPKEEP:
        out.add(out.inputs, own)
        return out
    if operation in READS_ROWS and not (operation == "delete" and fields.get("keys") is not None):
        out.add(out.inputs, _read_of_own_table(own, meta, operation, commit, metrics))
    if commit is not None and not metrics.get("noop"):
        own = replace(own, statistics=_statistics(metrics), lifecycle=_lifecycle(operation, fields, metrics))
    out.add(out.outputs, own)
    return out


def watched_datasets(table: str) -> TaskDatasets:
    """The datasets of a sensor that watched `table`'s timeline: the table is its one input (with its schema), as
    a downstream task that waits on it reads it; a sensor writes nothing."""
    out = TaskDatasets()
    out.add(out.inputs, _input_table(table, None))
    return out


def commit_of(metrics: Mapping[str, Any]) -> Commit | None:
    """The commit the metrics report (a task running several plans reports their last), if any."""
    last = metrics
    plans = metrics.get("plans")
    if isinstance(plans, list) and plans and isinstance(plans[-1], Mapping):
        last = {**metrics, **plans[-1]}
    seq, instant = last.get("seq"), last.get("instant")
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(instant, str):
        return None
    return Commit(seq=seq, instant=instant, operation=str(metrics.get("operation") or ""),
                  action=str(last.get("action") or ""), request_id=last.get("request_id"),
                  already_committed=bool(last.get("already_committed")))


def _metadata(url: str) -> TableMetadata | None:
    """The table's metadata, or None where there is no table (yet) to describe."""
    try:
        meta = TableMetadata(url)
        return meta if meta.commit_log.head() >= 0 else None
    except (LakeError, OSError, ImportError) as err:  # e.g. a store whose fsspec package this worker lacks
        log.warning("lineage: no metadata of %s (%s): its dataset is named without facets", url, err)
        return None


def _table_dataset(url: str, meta: TableMetadata | None, commit: Commit | None) -> LakeDataset:
    """The operation's table as of `commit` (or its latest state), with its schema."""
    namespace, name = dataset_id(url if meta is None else meta.url)
    dataset = LakeDataset(namespace, name, url if meta is None else meta.url, lake_table=True, file_format="parquet")
    if meta is None:
        return dataset
    try:
        if commit is None:
            return replace(dataset, columns=_columns(meta.spec))
        entry = meta.commit_log.read(commit.seq)
        spec = stored_spec(meta.state(commit.seq).spec)
    except LakeError as err:  # e.g. the log was cleaned meanwhile: name the table, leave out what is gone
        log.warning("lineage of %s: no metadata of log entry %s (%s)", meta.url, commit and commit.seq, err)
        return dataset
    return replace(dataset, columns=_columns(spec), version=commit.seq,
                   commit=replace(commit, completed_at=entry.completed_at, operation=entry.operation,
                                  action=entry.action))


def _current_dataset(url: str, meta: TableMetadata | None) -> LakeDataset:
    """The table as it is now: its latest snapshot's schema and version (what a task that changed nothing saw)."""
    dataset = _table_dataset(url, meta, None)
    if meta is None:
        return dataset
    try:
        state = meta.state()
        return replace(dataset, columns=_columns(stored_spec(state.spec)), version=state.seq)
    except LakeError as err:
        log.warning("lineage of %s: no latest state (%s)", meta.url, err)
        return dataset


def _read_of_own_table(own: LakeDataset, meta: TableMetadata | None, operation: str, commit: Commit | None,
                       metrics: Mapping[str, Any]) -> LakeDataset:
    """The operation's table as its job read it: the snapshot it started from (a restore: the one it restored)."""
    read = replace(own, commit=None, version=None)
    if meta is None or commit is None:
        return read
    try:
        seq = metrics.get("restored_to_seq") if operation == "restore" else meta.commit_log.read(commit.seq).base_seq
        if isinstance(seq, bool) or not isinstance(seq, int):
            return read
        return replace(read, version=seq, columns=_columns(stored_spec(meta.state(seq).spec)))
    except LakeError:
        return read


def _sources(operation: str, fields: Mapping[str, Any]) -> list[LakeDataset]:
    """The source files or lake tables a write, an upsert or a versioned delete read."""
    if operation == "delete":
        keys = _parsed(fields.get("keys"))
        if not isinstance(keys, Mapping):  # literal keys: no dataset
            return []
        return _source_datasets(keys.get("path"), str(keys.get("format") or "parquet"), keys.get("tables"))
    if fields.get("query") is not None:
        return _source_datasets(None, "", fields.get("tables")) + _upstream_datasets(fields.get("incremental"))
    return _source_datasets(fields.get("source_path"), str(fields.get("source_format") or "parquet"), None)


def _source_datasets(path: Any, file_format: str, tables: Any) -> list[LakeDataset]:
    if isinstance(path, str) and path.strip():
        namespace, name = source_id(path.strip())
        return [LakeDataset(namespace, name, path.strip(), lake_table=False, file_format=file_format)]
    refs = _parsed(tables)
    out: list[LakeDataset] = []
    for ref in refs.values() if isinstance(refs, Mapping) else ():
        url = ref if isinstance(ref, str) else ref.get("path") if isinstance(ref, Mapping) else None
        if not isinstance(url, str) or not url.strip():
            continue
        as_of = ref.get("as_of") if isinstance(ref, Mapping) else None
        out.append(_input_table(url.strip(), as_of))
    return out


def _upstream_datasets(incremental: Any) -> list[LakeDataset]:
    """The upstream lake tables whose changes an incremental query read."""
    value = _parsed(incremental)
    if isinstance(value, str) and value.strip()[:1] == "[":
        try:
            value = json.loads(value)
        except ValueError:
            return []
    items = [value] if isinstance(value, Mapping) else value if isinstance(value, list) else []
    urls = [item.get("table") for item in items if isinstance(item, Mapping)]
    return [_input_table(url.strip(), None) for url in urls if isinstance(url, str) and url.strip()]


def _input_table(url: str, as_of: Any) -> LakeDataset:
    """A lake table a query read, with its schema (at `as_of` for a time-travel read, else the latest)."""
    meta = _metadata(url)
    namespace, name = dataset_id(url if meta is None else meta.url)
    dataset = LakeDataset(namespace, name, url if meta is None else meta.url, lake_table=True, file_format="parquet")
    if meta is None:
        return dataset
    try:
        if as_of is None:
            return replace(dataset, columns=_columns(meta.spec))
        seq = meta.resolve(as_of)
        return replace(dataset, version=seq, columns=_columns(stored_spec(meta.state(seq).spec)))
    except LakeError:
        return dataset


def _columns(spec: TableSpec) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, c.type) for c in spec.columns)


def _statistics(metrics: Mapping[str, Any]) -> Statistics:
    """Rows, bytes and files the task's commit(s) added."""
    plans = metrics.get("plans")
    parts = [p for p in plans if isinstance(p, Mapping)] if isinstance(plans, list) and plans else [metrics]

    def total(key: str) -> int | None:
        values = [p.get(key) for p in parts]
        numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        return sum(numbers) if numbers else None

    return Statistics(rows=total("rows_added"), bytes=total("bytes_added"), files=total("files_added"))


def _lifecycle(operation: str, fields: Mapping[str, Any], metrics: Mapping[str, Any]) -> str | None:
    if operation == "create_table":
        return "CREATE" if metrics.get("created") else None
    if operation == "alter_table":
        return "ALTER"
    if operation == "write" and str(fields.get("mode") or "").strip().lower() == "overwrite":
        return "OVERWRITE"
    return None


def _parsed(value: Any) -> Any:
    """A templated mapping that rendered as JSON text, read back (anything else as it is)."""
    if isinstance(value, str) and value.strip()[:1] == "{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def operator_fields(operator: Any, names: Sequence[str] = ("source_path", "source_format", "query", "tables",
                                                            "incremental", "keys", "mode")) -> dict[str, Any]:
    """The fields `task_datasets` reads, from an operator (those it lacks are left out)."""
    return {name: getattr(operator, name) for name in names if hasattr(operator, name)}
