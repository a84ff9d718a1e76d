"""What the command line and the Lake page show of a table, as JSON-able dicts: its timeline, live files per
partition and bucket, spec and totals, pending clustering plans. Metadata only: no Spark, no Airflow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake import cli_format as fmt
from airflow_lake.lake.clustering.timeline import commits_since, pending_plans
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.maintenance.orphans import remove_orphan_files
from airflow_lake.lake.spec.table_spec import DEFAULT_PROPERTIES
from airflow_lake.lake.table import LakeTable

Data = dict[str, Any]


def timeline_data(table: LakeTable, limit: int) -> Data:
    """The last `limit` log entries (0: all) with the instants they rolled back, then pending instants."""
    items = table.timeline(limit=None if limit == 0 else limit)
    return {"table": table.url, "instants": [item.to_dict() for item in items]}


def _summary(files: Sequence[DataFile]) -> Data:
    return {"files": len(files), "rows": sum(f.rows for f in files), "bytes": sum(f.bytes for f in files)}


def _partition_order(key: tuple[tuple[str, str | None], ...], columns: Sequence[str]) -> list[tuple[bool, str]]:
    values = dict(key)
    return [(values.get(c) is None, values.get(c) or "") for c in columns]


def files_data(table: LakeTable, as_of: str | None) -> Data:
    """Live files of a snapshot, and per partition (and bucket) their count, rows and bytes."""
    snap = table.snapshot(as_of)
    bucketed = snap.spec.bucket is not None
    groups = snap.partitions()
    partitions = []
    for key in sorted(groups, key=lambda k: _partition_order(k, snap.spec.partition_columns)):
        files = groups[key]
        buckets: dict[int | None, list[DataFile]] = {}
        for data_file in files:
            buckets.setdefault(data_file.bucket, []).append(data_file)
        partition = dict(key)
        counts = sorted({b.count for f in files if (b := file_bucketing(f, snap.spec)) is not None})
        partitions.append({
            "partition": partition,
            "name": fmt.partition_label(partition, snap.spec.partition_columns),
            # the partition's bucket count(s): [] plain, [8], or several after a change not yet rewritten
            "bucket_counts": counts,
            "plain_files": sum(1 for f in files if f.bucket is None),
            **_summary(files),
            "buckets": [{"bucket": b, **_summary(buckets[b])}
                        for b in sorted(buckets, key=lambda b: -1 if b is None else b)] if bucketed or counts else [],
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
    """Pending clustering plans (with their groups) and the commits since the last clustering."""
    counted = commits_since(table)
    plans = []
    for pending in pending_plans(table):
        item = pending.to_dict()
        if pending.plan is not None:
            item["groups_detail"] = [g.to_dict() for g in pending.plan.groups]
        plans.append(item)
    return {"table": table.url, "commits_since_last_clustering": counted.count,
            "last_clustering": counted.since_instant, "plans": plans}


def orphan_files_data(table: LakeTable, older_than_hours: float | None, dry_run: bool) -> Data:
    """Delete (or with `dry_run` only list) the files no log entry holds; what was found and done."""
    result = remove_orphan_files(table, older_than_hours, dry_run=dry_run)
    return {"table": table.url, **result.to_dict()}


