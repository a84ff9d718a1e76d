"""What the command line and the Lake page show of a table, as JSON-able dicts: its timeline, live files per
partition and bucket, spec and totals, pending clustering plans, a one-table summary (kind, layout, merged keys of
a primary-key table, last commit, clustering state, where publishing for other engines stands) and the tables
under a root. Metadata only: no Spark, no
Airflow."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_lake import cli_format as fmt
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION
from airflow_lake.lake.clustering.timeline import commits_since, pending_plans
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import instants, table_roots
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.format.log import LogEntryExpired
from airflow_lake.lake.format.snapshots import Snapshot, TableState
from airflow_lake.lake.format.storage import Storage, is_local, normalize_url
from airflow_lake.lake.format.table_state import UPSERT_ACTION
from airflow_lake.lake.maintenance.orphans import remove_orphan_files
from airflow_lake.lake.spec.partitions import partition_order_key
from airflow_lake.lake.spec.table_spec import DEFAULT_PROPERTIES, TableSpec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.physical import NEWEST, OLDEST, UNKNOWN_OLDEST
from airflow_lake.publication import published_data

Data = dict[str, Any]
PartitionKey = tuple[tuple[str, str | None], ...]
AIRFLOW_KEY = "airflow"  # log entry metadata: the Airflow task that made the commit (written by the operators)
COMMITS_SINCE_CLUSTERING = "health.commits_since_clustering"


def timeline_data(table: LakeTable, limit: int) -> Data:
    """The last `limit` log entries (0: all) with the instants they rolled back, then pending instants; an upsert
    (or versioned delete) lists the versions it applied under `versions`."""
    items = table.timeline(limit=None if limit == 0 else limit)
    out = []
    for item in items:
        row = item.to_dict()
        row["versions"] = entry_versions(item.action, item.metadata)
        out.append(row)
    return {"table": table.url, "instants": out}


def entry_versions(action: str, metadata: Mapping[str, Any]) -> list[int] | None:
    """The versions an upsert entry (a versioned upsert or delete) applied; None for other entries."""
    if action != UPSERT_ACTION:
        return None
    raw = metadata.get("versions")
    if not isinstance(raw, list):
        return None
    return sorted({int(v) for v in raw if isinstance(v, int | str) and str(v).lstrip("-").isdigit()})


def _summary(files: Sequence[DataFile]) -> Data:
    return {"files": len(files), "rows": sum(f.rows for f in files), "bytes": sum(f.bytes for f in files)}


def _partition_order(key: PartitionKey, columns: Sequence[str]) -> list[tuple[bool, str]]:
    values = dict(key)
    return [(values.get(c) is None, values.get(c) or "") for c in columns]


def files_data(table: LakeTable, as_of: str | None) -> Data:
    """Live files of a snapshot, and per partition (and bucket) their count, rows and bytes. Plain files of a
    partition (every file of a partition before a table's `from_partition`) are counted under `plain`, never as a
    bucket."""
    snap = table.snapshot(as_of)
    groups = snap.partitions()
    partitions = []
    for key in sorted(groups, key=lambda k: _partition_order(k, snap.spec.partition_columns)):
        files = groups[key]
        buckets: dict[int, list[DataFile]] = {}
        for data_file in files:
            if data_file.bucket is not None:
                buckets.setdefault(data_file.bucket, []).append(data_file)
        plain = [f for f in files if f.bucket is None]
        partition = dict(key)
        counts = sorted({b.count for f in files if (b := file_bucketing(f, snap.spec)) is not None})
        partitions.append({
            "partition": partition,
            "name": fmt.partition_label(partition, snap.spec.partition_columns),
            # the partition's bucket count(s): [] plain, [8], or several after a change not yet rewritten
            "bucket_counts": counts,
            "plain_files": len(plain),
            **_summary(files),
            "buckets": [{"bucket": b, **_summary(buckets[b])} for b in sorted(buckets)],
            "plain": _summary(plain) if plain and buckets else None,  # plain files beside buckets (mixed)
        })
    return {
        "table": table.url, "seq": snap.seq, "instant": snap.instant, "completed_at": snap.completed_at,
        "bucket_count": snap.spec.bucket.count if snap.spec.bucket else None,
        "totals": {**_summary(snap.files), "partitions": len(partitions)},
        "partitions": partitions,
        "files": [f.to_dict() for f in snap.files],
    }


def show_data(table: LakeTable, as_of: str | None) -> Data:
    """The spec of a snapshot, its totals, and the table's pending instants."""
    snap = table.snapshot(as_of)
    spec = snap.spec
    pending = [i.id for i in table.timeline(limit=1) if i.state in (instants.REQUESTED, instants.INFLIGHT)]
    return {
        "table": table.url, "seq": snap.seq, "instant": snap.instant, "completed_at": snap.completed_at,
        "spec": spec.to_dict(),
        "effective_properties": {**{k: spec.property(k) for k in DEFAULT_PROPERTIES}, **spec.properties},
        "totals": {**_summary(snap.files), "partitions": len(snap.partitions())},
        "pending": pending,
        "pending_count": len(pending),
    }


def plans_data(table: LakeTable) -> Data:
    """Pending clustering plans with their groups and the partitions they cover, and the commits since the last
    clustering."""
    counted = commits_since(table)
    spec = table.spec
    plans = []
    for pending in pending_plans(table):
        item = pending.to_dict()
        if pending.plan is not None:
            item["groups_detail"] = [g.to_dict() for g in pending.plan.groups]
            covered: dict[PartitionKey, Data] = {}
            for group in pending.plan.groups:
                key = tuple(sorted(group.partition.items()))
                part = covered.setdefault(key, {
                    "partition": dict(group.partition),
                    "name": fmt.partition_label(group.partition, spec.partition_columns),
                    "groups": 0, "files": 0, "bytes": 0, "rows": 0, "output_files": 0})
                part["groups"] += 1
                part["files"] += len(group.files)
                part["bytes"] += group.bytes
                part["rows"] += group.rows
                part["output_files"] += group.output_files
            item["partitions_detail"] = [covered[k] for k in sorted(
                covered, key=lambda k: _partition_order(k, spec.partition_columns))]
        plans.append(item)
    return {"table": table.url, "commits_since_last_clustering": counted.count,
            "last_clustering": counted.since_instant, "plans": plans}


def orphan_files_data(table: LakeTable, older_than_hours: float | None, dry_run: bool) -> Data:
    """Delete (or with `dry_run` only list) the files no log entry holds; what was found and done."""
    result = remove_orphan_files(table, older_than_hours, dry_run=dry_run)
    return {"table": table.url, **result.to_dict()}


# -- one table at a glance (`airflow-lake ls`, the Lake page) ----------------------------------------------------
def summary_data(table: LakeTable) -> Data:
    """A table at a glance, from metadata only: its kind, totals, layout (plain and bucketed partitions), the rows
    a reader sees (merged keys for a primary-key table, exact or an upper bound), the last commit and the Airflow
    task that made it, pending instants, clustering state, and for a primary-key table its versions and the delta
    files not yet compacted, and where publishing for other engines stands (`published`:
    `publication.published_data`). `health.table_health(table, summary)` judges it."""
    state = table.state()
    snap = table.snapshot()
    spec = snap.spec
    pending = pending_data(table, state)
    clustering = clustering_data(table, state, spec, pending)
    kind, kind_text = table_kind(spec, clustered=clustering["clustered"])
    layout = layout_data(snap)
    if layout["plain"] is not None and layout["bucketed"]:  # (bucketed from a partition on)
        bucketed = sum(g["partitions"] for g in layout["bucketed"])
        kind_text += f" ({layout['plain']['partitions']} plain, {bucketed} bucketed partition(s))"
    keyed = primary_key_data(table, state, snap) if spec.primary_key else None
    rows: Data = {"count": snap.rows, "what": "rows", "exact": True}
    if keyed is not None:
        rows = {"count": keyed["keys"], "what": "keys", "exact": keyed["keys_exact"]}
    head = table.commit_log.read(state.seq)
    return {
        "table": table.url, "seq": snap.seq, "instant": snap.instant, "completed_at": snap.completed_at,
        "kind": kind, "kind_text": kind_text,
        "totals": {**_summary(snap.files), "partitions": len(snap.partitions())},
        "rows": rows,
        "layout": layout,
        "last_commit": {"seq": head.seq, "instant": head.instant, "action": head.action,
                        "operation": head.operation, "completed_at": head.completed_at,
                        "airflow": head.metadata.get(AIRFLOW_KEY)},
        "pending": pending,
        "clustering": clustering,
        "primary_key": keyed,
        "published": published_data(table, state),
    }


def table_kind(spec: TableSpec, *, clustered: bool) -> tuple[list[str], str]:
    """The kind of a table as tags (plain, partitioned, bucketed, bucketed_from_partition, clustered, primary_key)
    and as text, e.g. "partitioned, bucketed 16 on customer_id from dt=2024-03-01"."""
    tags: list[str] = []
    words: list[str] = []
    if spec.primary_key:
        tags.append("primary_key")
        words.append(f"primary-key ({', '.join(spec.primary_key)})")
    if spec.partition_columns:
        tags.append("partitioned")
        words.append("partitioned")
    bucket = spec.bucket
    if bucket is not None:
        tags.append("bucketed")
        text = f"bucketed {bucket.count} on {', '.join(bucket.columns)}"
        text += "".join(f", {c.count} in {fmt.partition_label(c.partition, spec.partition_columns)}"
                        for c in bucket.partition_counts)
        if bucket.from_partition is not None:
            tags.append("bucketed_from_partition")
            text += f" from {fmt.partition_label(bucket.from_partition, spec.partition_columns)}"
        words.append(text)
    if clustered:
        tags.append("clustered")
        words.append("clustered")
    if not tags:
        return ["plain"], "plain"
    return tags, ", ".join(words)


def layout_data(snap: Snapshot) -> Data:
    """The partitions by how their files are laid out: `plain` (files without a bucket; None if there are none)
    and `bucketed`, one group per bucketing (count and columns), each with its partitions, files, rows, bytes and
    first and last partition (by typed value). A table bucketed from a partition on shows both."""
    spec = snap.spec
    plain: dict[PartitionKey, list[DataFile]] = {}
    bucketed: dict[str, dict[PartitionKey, list[DataFile]]] = {}
    for key, files in snap.partitions().items():
        for data_file in files:
            bucketing = file_bucketing(data_file, spec)
            target = plain if bucketing is None else bucketed.setdefault(bucketing.key(), {})
            target.setdefault(key, []).append(data_file)

    def group(parts: Mapping[PartitionKey, list[DataFile]]) -> Data:
        ordered = sorted(parts, key=lambda k: _typed_order(spec, k))
        files = [f for k in ordered for f in parts[k]]
        return {"partitions": len(parts), **_summary(files),
                "first": fmt.partition_label(dict(ordered[0]), spec.partition_columns),
                "last": fmt.partition_label(dict(ordered[-1]), spec.partition_columns)}

    groups = []
    for bucketing_key in sorted(bucketed, key=lambda k: (int(k.split(":")[1]), k)):
        hash_name, count, columns = bucketing_key.split(":", 2)
        groups.append({"count": int(count), "columns": columns.split(","), "hash": hash_name,
                       **group(bucketed[bucketing_key])})
    return {"plain": group(plain) if plain else None, "bucketed": groups}


def _typed_order(spec: TableSpec, key: PartitionKey) -> tuple[bool, Any, list[tuple[bool, str]]]:
    try:
        typed = partition_order_key(spec, dict(key))
    except LakeError:  # a value the current type cannot read (an old file): order it by its text
        typed = None
    return (typed is None, typed or (), _partition_order(key, spec.partition_columns))


def pending_data(table: LakeTable, state: TableState | None = None, now: float | None = None) -> list[Data]:
    """The table's pending instants (neither completed nor rolled back), oldest first, with their age: since the
    last sign of life of their writer (heartbeat, else the newest pending file), or for a clustering plan since it
    was scheduled (a plan has no writer; it waits for an executor)."""
    state = table.state() if state is None else state
    now = time.time() if now is None else now
    out = []
    for item in instants.pending(table.storage):
        if item.id in state.instants or item.id in state.rolled_back:
            continue
        since = item.requested_at if item.is_plan else item.last_beat
        out.append({"id": item.id, "action": item.action, "operation": item.operation,
                    "state": instants.INFLIGHT if item.inflight else instants.REQUESTED, "plan": item.is_plan,
                    "requested_at": item.requested_at, "last_beat": item.last_beat,
                    "age_seconds": max(0.0, now - since)})
    return out


def last_clustering_seq(table: LakeTable, state: TableState) -> int | None:
    """The log sequence number of the newest completed clustering, without reading the log back: an executed
    plan's requested instant and the execute entry map to the same sequence number in the state's instant index
    (`TableState.apply`, COMPLETES), so a sequence number held by two instants is a candidate (checked by reading
    that one entry). A clustering older than the log keeps (`log.retain.hours`) is not found: its entry expired."""
    seen: set[int] = set()
    candidates: set[int] = set()
    for seq in state.instants.values():
        if seq in seen:
            candidates.add(seq)
        seen.add(seq)
    for seq in sorted(candidates, reverse=True):
        try:
            if table.commit_log.read(seq).operation == EXECUTE_OPERATION:
                return seq
        except LogEntryExpired:
            return None  # this one and all older ones expired
    return None


def clustering_data(table: LakeTable, state: TableState, spec: TableSpec, pending: Iterable[Mapping[str, Any]]
                    ) -> Data:
    """Whether the table was ever clustered, its pending plans, and the commits since the last clustering. The
    count (which reads the log back to the last clustering) is only taken where it means something (`applies`):
    a table that was clustered, has a pending plan, or sets `health.commits_since_clustering`."""
    seq = last_clustering_seq(table, state)
    plans = sum(1 for p in pending if p.get("plan"))
    applies = seq is not None or plans > 0 or COMMITS_SINCE_CLUSTERING in spec.properties
    counted = commits_since(table) if applies else None
    entry = table.commit_log.read(seq) if seq is not None else None
    return {"clustered": seq is not None, "applies": applies, "pending_plans": plans,
            "last_clustering": entry.instant if entry else None, "last_clustering_seq": seq,
            "last_clustering_at": entry.completed_at if entry else None,
            "commits_since": counted.count if counted else None}


# -- primary-key tables: merged keys, versions, pending deltas ---------------------------------------------------
def primary_key_data(table: LakeTable, state: TableState | None = None, snap: Snapshot | None = None) -> Data:
    """A primary-key table's merged key count, versions and pending deltas, from the metadata of its latest snapshot
    (`state` and `snap`: the table's latest state and snapshot, if the caller has them).

    Base files (written by compaction) hold one row per key of their partition and bucket, deleted keys kept as
    tombstones (no version, `__lake_v` NULL): their live keys are their rows minus their NULL `__lake_v` count. Delta
    files (written by upserts and versioned deletes, not compacted yet) may repeat keys and delete them, which no
    stat can tell. So the count is exact where a partition's bucket holds the base files of one compaction (a file
    of rows with data and one of tombstones: distinct keys), and elsewhere an upper bound (`keys_exact` false): its
    base keys plus its deltas' rows that carry data.
    """
    state = table.state() if state is None else state
    snap = table.snapshot() if snap is None else snap
    upserts = set((state.versions or {}).values())
    cells: dict[tuple[PartitionKey, int | None], list[DataFile]] = {}
    for data_file in snap.files:
        cells.setdefault((data_file.partition_key(), data_file.bucket), []).append(data_file)
    keys, exact = 0, True
    base_files = base_rows = delta_files = delta_rows = 0
    pending: list[Data] = []
    for (key, bucket), files in cells.items():
        deltas = [f for f in files if _is_delta(f, state, upserts)]
        delta_paths = {f.path for f in deltas}
        bases = [f for f in files if f.path not in delta_paths]
        base_files += len(bases)
        base_rows += sum(f.rows for f in bases)
        delta_files += len(deltas)
        delta_rows += sum(f.rows for f in deltas)
        live = [_live_base_keys(f) for f in bases]
        keys += sum(n for n, _ in live) + sum(_data_rows(f) for f in deltas)
        if deltas or len({f.instant for f in bases}) > 1 or not all(ok for _, ok in live):
            exact = False
        if deltas:
            pending.append({"partition": dict(key), "name": fmt.partition_label(dict(key), snap.spec.partition_columns),
                            "bucket": bucket, "files": len(deltas), "rows": sum(f.rows for f in deltas)})
    columns = snap.spec.partition_columns
    pending.sort(key=lambda p: (_partition_order(tuple(sorted(p["partition"].items())), columns),
                                -1 if p["bucket"] is None else p["bucket"]))
    versions = sorted(state.versions) if state.versions is not None else None
    return {
        "columns": list(snap.spec.primary_key),
        "keys": keys, "keys_exact": exact, "keys_bound": "exact" if exact else "at_most",
        "stored_rows": snap.rows,
        "base_files": base_files, "base_rows": base_rows, "delta_files": delta_files, "delta_rows": delta_rows,
        "versions": None if versions is None else {"count": len(versions), "min": min(versions, default=None),
                                                   "max": max(versions, default=None)},
        "pending_deltas": pending,
    }


def _is_delta(data_file: DataFile, state: TableState, upserts: set[int]) -> bool:
    """Whether a file was written by an upsert entry (a delta) rather than compaction (a base). The version index
    maps every applied version to the seq of its upsert entry, so that needs no log read; a file of unknown origin
    counts as a delta (its keys then make the count an upper bound, never a wrong exact number)."""
    if state.versions is None:
        return True
    seq = state.instants.get(data_file.instant)
    return seq is None or seq in upserts


def _live_base_keys(data_file: DataFile) -> tuple[int, bool]:
    """(keys, exact) of a base file: its rows less its tombstones. Rows written before versioned deletes have no
    version either (`__lake_v0` is then UNKNOWN_OLDEST), so with those, or without stats, it is an upper bound."""
    newest, oldest = data_file.stats.get(NEWEST), data_file.stats.get(OLDEST)
    if newest is None or oldest is None:
        return data_file.rows, False
    if newest.null_count and oldest.min is not None and oldest.min <= UNKNOWN_OLDEST:
        return data_file.rows, False
    return data_file.rows - newest.null_count, True


def _data_rows(data_file: DataFile) -> int:
    """A delta file's rows that carry data (a delete row has no version)."""
    newest = data_file.stats.get(NEWEST)
    return data_file.rows - (newest.null_count if newest is not None else 0)


# -- the tables under a root (`airflow-lake ls`) -------------------------------------------------------------------
def ls_data(root: str) -> Data:
    """Every lake table under `root`, a directory or a store URL (the root itself too, if it is one), one summary
    each with its health warnings (`health.table_health`); a table that cannot be read is listed with its
    `error`."""
    from airflow_lake.health import table_health

    real, paths = tables_under(root)
    tables = []
    for relative, path in paths:
        item: Data = {"path": relative, "url": path}
        try:
            table = LakeTable.open(path)
            summary = summary_data(table)
            item.update(summary, health=table_health(table, summary), error=None)
        except (LakeError, OSError, ValueError) as err:  # one damaged table must not hide the others
            item["error"] = str(err)
        tables.append(item)
    return {"root": real, "tables": tables}


def tables_under(root: str) -> tuple[str, list[tuple[str, str]]]:
    """The root as resolved (a real local path or a normalized URL) and the lake tables under it, each as (path
    relative to the root, its URL): the root itself (".") if it is a table, then those below (4 levels deep)."""
    from airflow_lake.ui.roots import find_tables

    url = normalize_url(root)
    if is_local(url):
        real = os.path.realpath(url)
        if not os.path.isdir(real):
            raise LakeError(f"{root!r} is not a directory. Fix: give the directory the tables lie under.")
        holds = table_roots.holds_table(real)
    else:  # a store URL: a prefix (bounded listings, never a data file: `table_roots.store_tables_below`)
        real = url
        holds = table_roots.store_holds_table(url)
    paths = [(".", real)] if holds else []
    paths += [(ref.relative, ref.path) for ref in find_tables([real], strict=True)]
    if not paths and not is_local(real) and not Storage(real).exists(""):
        raise LakeError(f"{root!r} holds nothing. Fix: give the URL of the prefix the tables lie under.")
    return real, paths
