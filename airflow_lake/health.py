"""Table health: the warnings `airflow-lake ls` and the Lake page show, each with the number that fired it and the
threshold it went over. Metadata only (the snapshot's file sizes and rows, pending instants, the log back to the
last clustering), so it is cheap enough to run for every table of a lake.

Checks (`check` in a warning) and the table properties that set their thresholds (defaults in `THRESHOLDS`):

- `small_files`: the share of live files smaller than `health.small_file_bytes` (128 MiB, Spark's read split
  `spark.sql.files.maxPartitionBytes`) that share their partition and bucket with another file — files clustering
  (compaction on a primary-key table) could merge; a small file alone in its partition or bucket is not counted,
  as nothing could merge it — is over `health.small_file_share` (0.5).
- `bucket_skew`: in a partition of at least `health.bucket_skew_min_rows` rows (10,000), the largest bucket holds
  more than `health.bucket_skew` (5, Spark's own skew factor `spark.sql.adaptive.skewJoin.skewedPartitionFactor`)
  times the mean rows per bucket (rows / bucket count); the worst partition is named.
- `pending_instants`: a pending instant shows no sign of life (heartbeat, else its newest pending file) for more
  than `health.pending_age_seconds` (3600), or a clustering plan has waited that long for an executor.
- `commits_since_clustering`: more than `health.commits_since_clustering` (8, twice the schedule's default
  `min_commits`) data commits since the last clustering — only for a table that was clustered, has a pending plan,
  or sets that property: a table never clustered has nothing to be behind on.

A threshold is a positive number; set it high to turn its check off for a table (`airflow-lake alter PATH --set
health.bucket_skew=1000`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_lake import cli_format as fmt
from airflow_lake import reports
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.spec.table_spec import DEFAULT_PROPERTIES, TableSpec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.physical import only_tombstones

PREFIX = "health."
# name -> default threshold (the table properties `health.<name>` override them per table)
THRESHOLDS: dict[str, float] = {key[len(PREFIX):]: float(value) for key, value in DEFAULT_PROPERTIES.items()
                                if key.startswith(PREFIX)}
Warning = dict[str, Any]


def thresholds(spec: TableSpec) -> dict[str, float]:
    """The thresholds of one table: `THRESHOLDS`, overridden by its `health.*` properties."""
    return {name: spec.float_property(PREFIX + name) for name in THRESHOLDS}


def table_health(table: LakeTable, summary: Mapping[str, Any] | None = None) -> list[Warning]:
    """The health warnings of a table, each {"check", "message", "value", "threshold", "where"}; [] when healthy.
    `summary` is `reports.summary_data(table)` (its pending instants and clustering state are used; missing
    parts are read from the table)."""
    summary = summary or {}
    state = table.state()
    spec = table.spec
    limits = thresholds(spec)
    files = list(state.files.values())
    pending = summary.get("pending")
    if not (isinstance(pending, list) and all(isinstance(p, Mapping) and "age_seconds" in p for p in pending)):
        pending = reports.pending_data(table, state)  # (not `reports.summary_data`'s: read them)
    clustering = summary.get("clustering")
    if not (isinstance(clustering, Mapping) and "applies" in clustering and "commits_since" in clustering):
        clustering = reports.clustering_data(table, state, spec, pending)
    found = [
        _small_files(files, spec, limits),
        _bucket_skew(files, spec, limits),
        _pending(pending, limits),
        _commits_since_clustering(clustering, limits),
    ]
    return [w for w in found if w is not None]


def small_file_bytes(spec: TableSpec) -> int:
    """Below this size a live file of the table counts as small (its `health.small_file_bytes`)."""
    return int(thresholds(spec)["small_file_bytes"])


def _warning(check: str, message: str, value: float, threshold: float, where: str | None = None) -> Warning:
    return {"check": check, "message": message, "value": value, "threshold": threshold, "where": where}


def _small_files(files: list[DataFile], spec: TableSpec, limits: Mapping[str, float]) -> Warning | None:
    if not files:
        return None
    limit, share_limit = limits["small_file_bytes"], limits["small_file_share"]
    cells: dict[tuple[Any, int | None], list[DataFile]] = {}
    for data_file in files:
        cells.setdefault((data_file.partition_key(), data_file.bucket), []).append(data_file)
    if spec.primary_key:  # a bucket's tombstone file beside the data file of its compaction: one file split in two
        cells = {key: _without_tombstone_halves(cell) for key, cell in cells.items()}
    small = sum(1 for cell in cells.values() if len(cell) > 1 for f in cell if f.bytes < limit)
    share = small / len(files)
    if share <= share_limit:
        return None
    fixer = "compact_upserts" if spec.primary_key else "clustering"
    return _warning("small_files", f"{share:.0%} of live files ({small} of {len(files)}) are under "
                    f"{fmt.fmt_bytes(int(limit))} beside other files of their partition or bucket: {fixer} would "
                    f"merge them (threshold {share_limit:.0%})", round(share, 4), share_limit)


def _without_tombstone_halves(cell: list[DataFile]) -> list[DataFile]:
    """A primary-key table's files of one partition and bucket less the tombstone files written beside a file of
    rows with data by the same compaction (`lake/upsert/compact.py`), which compaction does not count either."""
    halves = {f.instant for f in cell if not only_tombstones(f)}
    return [f for f in cell if not (only_tombstones(f) and f.instant in halves)]


def _bucket_skew(files: list[DataFile], spec: TableSpec, limits: Mapping[str, float]) -> Warning | None:
    groups: dict[tuple[Any, str], dict[int, int]] = {}
    counts: dict[str, int] = {}
    for data_file in files:
        bucketing = file_bucketing(data_file, spec)
        if bucketing is None or data_file.bucket is None:
            continue
        key = bucketing.key()
        counts[key] = bucketing.count
        rows = groups.setdefault((data_file.partition_key(), key), {})
        rows[data_file.bucket] = rows.get(data_file.bucket, 0) + data_file.rows
    worst: tuple[float, Any, int, int, int, int] | None = None
    for (partition, key), rows in groups.items():
        total = sum(rows.values())
        if total < limits["bucket_skew_min_rows"] or total == 0:
            continue
        bucket, largest = max(rows.items(), key=lambda item: (item[1], -item[0]))
        ratio = largest / (total / counts[key])
        if worst is None or ratio > worst[0]:
            worst = (ratio, partition, bucket, largest, total, counts[key])
    if worst is None or worst[0] <= limits["bucket_skew"]:
        return None
    ratio, partition, bucket, largest, total, count = worst
    name = fmt.partition_label(dict(partition), spec.partition_columns)
    where = f"{name} bucket {bucket}"
    return _warning("bucket_skew", f"bucket {bucket} of {name} holds {largest:,} of its {total:,} rows: {ratio:.1f}x "
                    f"the mean of its {count} buckets (threshold {limits['bucket_skew']:g}x)", round(ratio, 2),
                    limits["bucket_skew"], where)


def _pending(pending: Sequence[Mapping[str, Any]], limits: Mapping[str, float]) -> Warning | None:
    limit = limits["pending_age_seconds"]
    old = [p for p in pending if p["age_seconds"] > limit]
    if not old:
        return None
    oldest = max(old, key=lambda p: p["age_seconds"])
    age = _duration(oldest["age_seconds"])
    if oldest.get("plan"):
        what = f"clustering plan {oldest['id']} has waited {age} for an executor"
    else:
        what = (f"instant {oldest['id']} ({oldest['action']} {oldest['operation']}, {oldest['state']}) has shown no "
                f"sign of life for {age}")
    more = f" ({len(old)} pending instants are that old)" if len(old) > 1 else ""
    return _warning("pending_instants", f"{what}{more} (threshold {_duration(limit)}); `airflow-lake "
                    "rollback-pending` rolls back writers that died", round(float(oldest["age_seconds"]), 1), limit,
                    oldest["id"])


def _commits_since_clustering(clustering: Mapping[str, Any], limits: Mapping[str, float]) -> Warning | None:
    count = clustering.get("commits_since")
    limit = limits["commits_since_clustering"]
    if not clustering.get("applies") or count is None or count <= limit:
        return None
    since = (f"the last clustering ({clustering['last_clustering']})" if clustering.get("clustered")
             else "the table's start (never clustered)")
    return _warning("commits_since_clustering", f"{count} commits since {since} (threshold {limit:g})",
                    count, limit)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
