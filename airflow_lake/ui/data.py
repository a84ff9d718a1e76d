"""What the Lake page shows, from table metadata (the log, checkpoints, pending instants; never Spark): a summary
per table, and one table's schema, partitions, clustering, primary-key state, health, charts over its timeline,
timeline and layout. The one thing read from data files is a commit's change counts (rows inserted, deleted and
updated: `commit_changes`) where the log cannot tell them (a rewrite, an upsert: appends and drops are counted from
the files' row counts), with pyarrow, for the newest few data-changing commits of a timeline, each only if it
touched at most `[lake] change_counts_max_mb` and never on an object store, and kept per commit for the process's
life (history does not change).

Everything of one request comes from one open of the table: its latest state is resolved once (a checkpoint and
the entries after it), and the newest log entries are read once. A table with 10,000 instants renders in well
under 300 ms (`benchmarks/bench_lake_page.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_lake import health, reports
from airflow_lake.cli_format import fmt_bytes, partition_label
from airflow_lake.lake.changes.arrow_read import change_counts, counts_from_metadata, read_plan
from airflow_lake.lake.changes.window import ChangeWindow, change_window, changes_data
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.lake.errors import LakeChangesUnavailable, LakeError
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.format.log import LogEntry, LogEntryExpired
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.spec.partitions import partition_order_key
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lake.table import LakeTable
from airflow_lake.ui.roots import TableRef

TIMELINE_PAGE = 100
MAX_TIMELINE_PAGE = 1000  # a page renders every entry it shows: more belongs to `airflow-lake timeline`
MAX_PARTITION_ROWS = 500  # the per-partition table shows the newest this many (the JSON has them all)
AIRFLOW_KEY = "airflow"  # log entry metadata: the task instance whose operator made the commit
# data files are named part-<instant>-...: a removed file's adding entry is found from its name
_FILE_INSTANT = re.compile(r"(?:^|/)part-(\d{17})-")
CHANGE_COUNT_COMMITS = 10  # a timeline's newest data-changing commits whose rows are counted (older ones: n/a)
CHANGE_COUNTS_MAX_MB = 256.0  # default of `[lake] change_counts_max_mb`: a commit touching more is not counted
_COUNTS_KEPT = 4096  # commits whose counts a process keeps
_counts_cache: OrderedDict[tuple[str, int, str], dict[str, Any]] = OrderedDict()
_counts_lock = threading.Lock()
log = logging.getLogger(__name__)


PartitionKey = tuple[tuple[str, str | None], ...]


def group_by_partition(files: Iterable[DataFile]) -> dict[PartitionKey, list[DataFile]]:
    """`files` by partition. Files read from one checkpoint share one partition mapping per partition: grouping
    by that object first builds each partition's key once, not once per file (10,000s of files)."""
    by_object: dict[int, tuple[Mapping[str, str | None], list[DataFile]]] = {}
    for data_file in files:
        by_object.setdefault(id(data_file.partition), (data_file.partition, []))[1].append(data_file)
    out: dict[PartitionKey, list[DataFile]] = {}
    for partition, members in by_object.values():
        out.setdefault(tuple(sorted(partition.items())), []).extend(members)
    return out


@dataclasses.dataclass
class Opened:
    """One table as one request reads it: its latest state (resolved once) and the log entries read so far."""

    ref: TableRef
    table: LakeTable
    state: TableState
    spec: TableSpec
    entries: dict[int, LogEntry] = dataclasses.field(default_factory=dict)
    _groups: dict[PartitionKey, list[DataFile]] | None = None

    @classmethod
    def of(cls, ref: TableRef) -> Opened:
        """Open the table under `ref` and resolve its latest state."""
        table = LakeTable.open(ref.path)
        state = table.state()
        return cls(ref, table, state, stored_spec(state.spec))

    def entry(self, seq: int) -> LogEntry:
        """Log entry `seq`, read once per request."""
        if seq not in self.entries:
            self.entries[seq] = self.table.commit_log.read(seq)
        return self.entries[seq]

    def groups(self) -> dict[PartitionKey, list[DataFile]]:
        """The live files by partition."""
        if self._groups is None:
            self._groups = group_by_partition(self.state.files.values())
        return self._groups

    def newest(self, count: int) -> list[LogEntry]:
        """The newest `count` log entries the log holds (`clean` expires old ones: `log.retain.hours`), oldest
        first."""
        head = self.state.seq
        first = max(0, head - count + 1, self.table.commit_log.start())
        return [self.entry(seq) for seq in range(first, head + 1)]


# -- the list ----------------------------------------------------------------------------------------------------
def table_summary(ref: TableRef, opened: Opened | None = None) -> dict[str, Any]:
    """One row of the table list (and the head of a table's page): `reports.summary_data` (kind, totals, layout,
    last commit, pending instants, clustering, primary-key state, publishing) with the table's health warnings."""
    opened = opened or Opened.of(ref)
    report = reports.summary_data(opened.table)
    spec, totals, clustering = opened.spec, report["totals"], report["clustering"]
    summary = {
        "ref": ref.ref, "name": ref.relative, "path": ref.path, "seq": report["seq"], "instant": report["instant"],
        "completed_at": report["completed_at"], "kind": report["kind"], "kind_text": report["kind_text"],
        "rows": totals["rows"], "files": totals["files"], "bytes": totals["bytes"],
        "partitions": totals["partitions"],
        # what a reader sees: rows, or for a primary-key table its merged keys (exact, or an upper bound)
        "visible_rows": report["rows"],
        "bucket": spec.bucket.to_dict() if spec.bucket else None, "partition_by": list(spec.partition_columns),
        "primary_key": list(spec.primary_key) or None, "primary_key_state": report["primary_key"],
        "layout": report["layout"], "last_commit": report["last_commit"],
        "pending": len(report["pending"]), "pending_instants": report["pending"],
        "pending_plans": clustering["pending_plans"], "clustering": clustering,
        # None for a table never clustered and without a plan: there is nothing to count since
        "commits_since_last_clustering": clustering["commits_since"],
        # where publishing for other engines stands: the published Delta seq against ours, for a primary-key table
        # the files and commits other engines see only after the next compaction (`publication.published_data`)
        "published": report["published"],
    }
    summary["health"] = health.table_health(opened.table, report)
    return summary


# -- one table ---------------------------------------------------------------------------------------------------
def table_detail(ref: TableRef, limit: int = TIMELINE_PAGE, opened: Opened | None = None) -> dict[str, Any]:
    """A table's page: summary, schema, partitions, clustering and plans, primary-key state, health, charts over
    the newest `limit` commits, the newest `limit` instants (newest first) and the sequence number of the last
    clustering (the layout "before" picture). `opened`: the table as this request read it."""
    opened = opened or Opened.of(ref)
    entries = opened.newest(limit)
    summary = table_summary(ref, opened)
    clustering = clustering_detail(opened, summary)
    instants = [item.to_dict() for item in opened.table.timeline(limit)]
    instants.reverse()
    counted = commit_changes(opened, [i["seq"] for i in instants if i["state"] == "completed"])
    for item in instants:
        if item["state"] == "completed" and item["seq"] in counted:
            item["changes"] = counted[item["seq"]]
    return {
        "summary": summary, "schema": schema_data(opened.spec), "partitions": partitions_data(opened, entries),
        "plans": clustering, "charts": charts_data(opened, entries, small_file_bytes(opened.spec)),
        "health": summary["health"], "instants": instants, "limit": limit,
        "total_instants": opened.state.seq + 1, "clustered_at": clustering["last_clustering_seq"],
    }


def schema_data(spec: TableSpec) -> list[dict[str, Any]]:
    """The columns in schema order: name, type, nullability, roles, and the name in the files if renamed."""
    bucket = spec.bucket
    out = []
    for column in spec.columns:
        roles = []
        if column.name in spec.primary_key:
            roles.append(f"key {spec.primary_key.index(column.name) + 1}")
        if column.name in spec.partition_columns:
            roles.append(f"partition {spec.partition_columns.index(column.name) + 1}")
        if bucket is not None and column.name in bucket.columns:
            roles.append(f"bucket {bucket.columns.index(column.name) + 1}")
        if bucket is not None and column.name in bucket.sort_columns:
            roles.append(f"sort {bucket.sort_columns.index(column.name) + 1}")
        if column.name == spec.version_column:
            roles.append("version")
        if column.name in spec.merge_operators:
            roles.append(f"merged by {spec.merge_operators[column.name]}")
        out.append({"name": column.name, "type": column.type, "nullable": column.nullable, "roles": roles,
                    "physical": column.physical if column.physical != column.name else None})
    return out


def _partition_sort_key(spec: TableSpec, partition: Mapping[str, str | None]) -> tuple[Any, ...]:
    try:
        typed = partition_order_key(spec, partition)
    except (LakeError, ValueError, TypeError):
        typed = None
    text = tuple(partition.get(c) or "" for c in spec.partition_columns)
    return (typed is None, typed or (), text)


def partitions_data(opened: Opened, entries: Sequence[LogEntry]) -> list[dict[str, Any]]:
    """Per partition of the latest snapshot, in partition order: files, rows, bytes, bucket count(s) and the
    buckets that hold files, plain files, the smallest and largest file, and its last commit: the newest of
    `entries` (the newest log entries) that added or removed a file of it, else the one that added its newest
    live file."""
    spec, state = opened.spec, opened.state
    touched: dict[PartitionKey, LogEntry] = {}
    known = {f.path: f for entry in entries for f in entry.added}
    for entry in reversed(entries):
        changed = [f.partition for f in entry.added]
        changed += [f.partition for path in entry.removed if (f := _removed_file(opened, path, known)) is not None]
        for partition in changed:
            touched.setdefault(tuple(sorted(partition.items())), entry)
    counts_of: dict[str | None, int] = {}
    out = []
    for key, files in sorted(opened.groups().items(), key=lambda item: _partition_sort_key(spec, dict(item[0]))):
        partition = dict(key)
        counts = set()
        for data_file in files:
            if data_file.bucket is not None:
                if data_file.bucketing not in counts_of:
                    bucketing = file_bucketing(data_file, spec)
                    counts_of[data_file.bucketing] = bucketing.count if bucketing is not None else 0
                counts.add(counts_of[data_file.bucketing])
        sizes = [f.bytes for f in files]
        change = touched.get(key)
        if change is not None:
            last = {"seq": change.seq, "instant": change.instant, "operation": change.operation,
                    "completed_at": change.completed_at}
        else:
            newest = max(files, key=lambda f: (state.instants.get(f.instant, -1), f.instant))
            last = {"seq": state.instants.get(newest.instant), "instant": newest.instant or None,
                    "operation": None, "completed_at": None}
        out.append({
            "partition": partition, "name": partition_label(partition, spec.partition_columns),
            "files": len(files), "rows": sum(f.rows for f in files), "bytes": sum(sizes),
            "bucket_counts": sorted(counts),
            "buckets_with_files": len({f.bucket for f in files if f.bucket is not None}),
            "plain_files": sum(1 for f in files if f.bucket is None),
            "smallest_bytes": min(sizes), "largest_bytes": max(sizes), "last_commit": last,
        })
    return out


def layout(ref: TableRef, as_of: str | None, opened: Opened | None = None) -> dict[str, Any]:
    """The live files of a snapshot per partition, and per bucket (or per file of a plain partition) their
    count, rows and bytes — what the layout pictures draw. `opened`: the table as this request read it."""
    opened = opened or Opened.of(ref)
    if as_of is None:
        seq, spec, groups = opened.state.seq, opened.spec, opened.groups()
    else:
        snap = opened.table.snapshot(as_of)
        seq, spec, groups = snap.seq, snap.spec, group_by_partition(snap.files)
    partitions = []
    for key in sorted(groups, key=lambda k: _partition_sort_key(spec, dict(k))):
        files = groups[key]
        buckets: dict[int, list[DataFile]] = {}
        for data_file in files:
            if data_file.bucket is not None:
                buckets.setdefault(data_file.bucket, []).append(data_file)
        plain = sorted((f for f in files if f.bucket is None), key=lambda f: -f.bytes)
        partitions.append({
            "partition": dict(key), "name": partition_label(dict(key), spec.partition_columns),
            "buckets": [{"bucket": b, "files": len(fs), "rows": sum(f.rows for f in fs),
                         "bytes": sum(f.bytes for f in fs)} for b, fs in sorted(buckets.items())],
            "plain_files": [{"name": f.path.rsplit("/", 1)[-1], "rows": f.rows, "bytes": f.bytes} for f in plain],
        })
    return {"seq": seq, "partitions": partitions}


# -- clustering --------------------------------------------------------------------------------------------------
def clustering_detail(opened: Opened, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The clustering state of `summary` (`reports.clustering_data`: counted only for tables with clustering),
    and the pending plans with the partitions they cover and their groups."""
    clustering = summary["clustering"]
    return {
        "clustered": clustering["clustered"], "last_clustering": clustering["last_clustering"],
        "last_clustering_seq": clustering["last_clustering_seq"],
        "commits_since_last_clustering": clustering["commits_since"],
        "plans": [_plan_data(opened.spec, item.to_dict(), item.plan) for item in pending_plans(opened.table)],
    }


def _plan_data(spec: TableSpec, item: dict[str, Any], plan: Any) -> dict[str, Any]:
    if plan is None:
        return {**item, "partitions": [], "groups_detail": []}
    groups = []
    names: dict[str, None] = {}
    for group in plan.groups:
        name = partition_label(group.partition, spec.partition_columns)
        names[name] = None
        groups.append({"partition": dict(group.partition), "partition_name": name, "files": len(group.files),
                       "rows": group.rows, "bytes": group.bytes, "output_files": group.output_files,
                       "buckets": list(group.buckets)})
    return {**item, "partitions": list(names), "groups_detail": groups}


# -- charts over the timeline ------------------------------------------------------------------------------------
def small_file_bytes(spec: TableSpec) -> int:
    """Below this size a live file counts as small (the health check's threshold for the table)."""
    return int(health.small_file_bytes(spec))


def charts_data(opened: Opened, entries: Sequence[LogEntry], small_bytes: int) -> dict[str, Any]:
    """Live files, bytes, rows and small files after each of `entries` (the newest log entries, oldest first).

    Walked back from the latest state: undoing an entry takes away the files it added and puts back the ones it
    removed. A removed file added before the window is found through its name (part-<instant>-...) and the entry
    of that instant; if it cannot be found, the series starts after that entry (`complete` False).
    """
    state = opened.state
    files, rows, size = len(state.files), 0, 0
    small = 0
    for data_file in state.files.values():
        rows += data_file.rows
        size += data_file.bytes
        small += data_file.bytes < small_bytes
    known = {f.path: f for entry in entries for f in entry.added}
    points: list[dict[str, Any]] = []
    complete = True
    for entry in reversed(entries):
        points.append({"seq": entry.seq, "instant": entry.instant, "operation": entry.operation,
                       "completed_at": entry.completed_at, "files": files, "bytes": size, "rows": rows,
                       "small_files": small})
        for data_file in entry.added:
            files, rows, size = files - 1, rows - data_file.rows, size - data_file.bytes
            small -= data_file.bytes < small_bytes
        removed = [f for path in entry.removed if (f := _removed_file(opened, path, known)) is not None]
        if len(removed) < len(entry.removed):
            complete = False
            break
        for data_file in removed:
            files, rows, size = files + 1, rows + data_file.rows, size + data_file.bytes
            small += data_file.bytes < small_bytes
    points.reverse()
    return {"small_file_bytes": small_bytes, "points": points, "complete": complete}


def _removed_file(opened: Opened, path: str, known: dict[str, DataFile]) -> DataFile | None:
    if path in known:
        return known[path]
    match = _FILE_INSTANT.search(path)
    seq = opened.state.instants.get(match.group(1)) if match else None
    if seq is None:
        return None
    try:
        entry = opened.entry(seq)
    except LogEntryExpired:  # added before the log's start: the chart stops there
        return None
    for data_file in entry.added:
        known.setdefault(data_file.path, data_file)
    return known.get(path)


# -- a commit's change counts ------------------------------------------------------------------------------------
def change_counts_max_bytes() -> int:
    """A commit whose change count would read more bytes than this is not counted: `[lake] change_counts_max_mb`
    (env AIRFLOW__LAKE__CHANGE_COUNTS_MAX_MB), default 256 MB; 0 counts none."""
    raw = os.environ.get("AIRFLOW__LAKE__CHANGE_COUNTS_MAX_MB")
    # Airflow's configuration as the api-server loaded it; never imported here (seconds, for a page's data
    # computed outside the api-server: the default then)
    configuration = sys.modules.get("airflow.configuration")
    if raw is None and configuration is not None:
        try:
            raw = configuration.conf.get("lake", "change_counts_max_mb", fallback=None)
        except Exception:  # a configuration that cannot answer: the default
            raw = None
    try:
        megabytes = float(raw) if raw not in (None, "") else CHANGE_COUNTS_MAX_MB
    except ValueError:
        log.warning("[lake] change_counts_max_mb = %r is no number: using %g", raw, CHANGE_COUNTS_MAX_MB)
        megabytes = CHANGE_COUNTS_MAX_MB
    return max(0, int(megabytes * 1024 * 1024))


def commit_changes(opened: Opened, seqs: Sequence[int], max_bytes: int | None = None,
                   commits: int = CHANGE_COUNT_COMMITS) -> dict[int, dict[str, Any]]:
    """Per log entry `seqs` (newest first): what it changed, as {"state": "counted", "inserted", "deleted",
    "updated"} (rows; keys of a primary-key table), {"state": "data_free"} (it changed no row: create, alter,
    clean, rollback, clustering, bucket rewrite, compaction) or {"state": "not_counted", "reason"} — beyond the
    newest `commits` data-changing ones, reading more than `max_bytes` (default `change_counts_max_bytes`), or
    files that cannot be read (cleaned, damaged). The counts are `changes.arrow_read.change_counts` of the window
    (seq - 1, seq)."""
    limit = change_counts_max_bytes() if max_bytes is None else max_bytes
    identity = opened.table.identity(opened.state)
    out: dict[int, dict[str, Any]] = {}
    todo: dict[int, tuple[str, int, str]] = {}  # seq -> its key in the kept counts
    counted = 0
    for seq in seqs:
        try:
            entry = opened.entry(seq)
        except LakeError as err:  # an entry `clean` expired, or a damaged one: the timeline says what it can
            out[seq] = {"state": "not_counted", "reason": str(err)}
            continue
        if not changes_data(entry):
            out[seq] = {"state": "data_free"}
            continue
        counted += 1
        if counted > commits:
            out[seq] = {"state": "not_counted", "reason": f"only the newest {commits} data-changing commits of a "
                        f"page are counted: airflow-lake changes PATH --from {seq - 1} --to {seq}"}
            continue
        key = (identity, seq, entry.instant)
        with _counts_lock:
            known = _counts_cache.get(key)
            if known is not None:
                _counts_cache.move_to_end(key)
        if known is not None:
            out[seq] = known
        else:
            todo[seq] = key
    for seq, window in _single_windows(opened, sorted(todo)).items():
        out[seq] = _count(opened, seq, window, todo[seq], limit)
    return out


def _single_windows(opened: Opened, seqs: Sequence[int]) -> dict[int, ChangeWindow | BaseException]:
    """The window (seq - 1, seq] of each of `seqs` (data-changing commits, oldest first), or why there is none.
    Cut from one window over them all: its start's state is resolved once, not once per commit (a checkpoint and
    the entries after it), which on a long timeline costs more than counting a small commit."""
    if not seqs:
        return {}
    try:
        span = change_window(opened.table, seqs[0] - 1, seqs[-1])
    except Exception:  # e.g. the oldest one's start was cleaned: each on its own, to say so for those alone
        return {seq: _window_or_error(opened, seq) for seq in seqs}
    by_seq = {c.seq: c for c in span.commits}
    return {seq: dataclasses.replace(span, start=seq - 1, end=seq, commits=(by_seq[seq],), skipped=(),
                                     end_completed_at=by_seq[seq].completed_at)
            if seq in by_seq else _window_or_error(opened, seq) for seq in seqs}


def _window_or_error(opened: Opened, seq: int) -> ChangeWindow | BaseException:
    try:
        return change_window(opened.table, seq - 1, seq)
    except Exception as err:
        return err


def _count(opened: Opened, seq: int, window: ChangeWindow | BaseException, key: tuple[str, int, str],
           limit: int) -> dict[str, Any]:
    """One commit's change counts (kept when they are final: counted, or its history cleaned)."""
    try:
        if isinstance(window, BaseException):
            raise window
        known = counts_from_metadata(window)  # an append, a drop: the log tells, no file is read
        if known is not None:
            return _keep(key, {"state": "counted", **known.get(seq, {"inserted": 0, "deleted": 0, "updated": 0})})
        if not opened.table.storage.local:  # the page of a table on a store reads no data file (requests cost)
            return {"state": "not_counted", "reason": "counting a rewrite on an object store reads its data files: "
                    f"airflow-lake changes PATH --from {seq - 1} --to {seq}"}
        size = read_plan(opened.table, window).bytes
        if size > limit:
            return {"state": "not_counted", "bytes": size,
                    "reason": f"counting would read {fmt_bytes(size)}, more than [lake] change_counts_max_mb "
                              f"({fmt_bytes(limit)}): airflow-lake changes PATH --from {seq - 1} --to {seq}"}
        counts = change_counts(opened.table, window).get(seq, {"inserted": 0, "deleted": 0, "updated": 0})
        result: dict[str, Any] = {"state": "counted", **counts}
    except LakeChangesUnavailable as err:
        result = {"state": "not_counted", "reason": str(err)}
    except Exception as err:  # a missing or damaged data file: the page goes on without this commit's counts
        log.info("Lake page: the changes of %s at %d cannot be counted: %s", opened.table.url, seq, err)
        return {"state": "not_counted", "reason": f"its files cannot be read ({type(err).__name__}: {err})"}
    return _keep(key, result)


def _keep(key: tuple[str, int, str], result: dict[str, Any]) -> dict[str, Any]:
    """Keep a commit's final counts for the process's life (history does not change)."""
    with _counts_lock:
        _counts_cache[key] = result
        while len(_counts_cache) > _COUNTS_KEPT:
            _counts_cache.popitem(last=False)
    return result


# -- commits and the task instances that made them -----------------------------------------------------------------
def task_of(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The task instance a log entry records (`metadata["airflow"]`), if it names a dag, run and task."""
    raw = metadata.get(AIRFLOW_KEY)
    if not isinstance(raw, Mapping):
        return None
    names = {k: raw.get(k) for k in ("dag_id", "run_id", "task_id")}
    if not all(isinstance(v, str) and v for v in names.values()):
        return None
    out: dict[str, Any] = dict(names)
    for key in ("map_index", "try_number"):
        value = raw.get(key)
        out[key] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return out
