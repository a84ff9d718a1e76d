"""Choosing what a clustering plan rewrites: partitions (`select_partitions`) and groups of their small files
(`build_groups`). Pure functions of the snapshot's files; Hudi's rules (REFERENCES.md), with buckets kept
whole.

Groups: a partition's candidate files, largest first, fill a group until the next file would pass
`max_bytes_per_group`; a group becomes ceil(bytes / target_file_max_bytes) files, never more files than it
has rows. At most `max_groups`
groups in all, newest partitions first. A last group of one file is dropped (rewriting one file alone only
helps if it gets sorted) unless single-group clustering is on or the layout sorts and the file was not
itself written by a clustering.

Bucketed partitions: clustering never mixes buckets. The unit is a bucket — all live files with one bucket
id under the partition's current bucketing — when it has two or more files and one of them is small; a
group of buckets is written as one file per bucket, sorted by the buckets' sort columns (or the layout).
Files under another bucketing (before a bucket count changed) are left to `bucket_rewrite`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake.clustering.partition_regex import PartitionPattern
from airflow_lake.lake.clustering.plan import PlanGroup
from airflow_lake.lake.clustering.strategy import (
    COMMITS_SINCE_LAST_CLUSTERING,
    DAY_ROLLING,
    RECENT_DAYS,
    SELECTED_PARTITIONS,
    PlanStrategy,
)
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.spec.partitions import partition_order_key

if TYPE_CHECKING:
    from airflow_lake.lake.spec.table_spec import TableSpec

PartitionKey = tuple[tuple[str, str | None], ...]


def partition_path(spec: TableSpec, partition: Mapping[str, str | None]) -> str:
    """`col=value/col2=value` (unescaped; NULL as `__HIVE_DEFAULT_PARTITION__`), what the regex matches."""
    return "/".join(f"{c}={'__HIVE_DEFAULT_PARTITION__' if partition.get(c) is None else partition.get(c)}"
                    for c in spec.partition_columns)


def _order(spec: TableSpec, partition: Mapping[str, str | None]) -> tuple[int, tuple[object, ...]]:
    key = partition_order_key(spec, partition)
    return (1, ()) if key is None else (0, key)  # partitions with a null value sort last


def select_partitions(spec: TableSpec, existing: Sequence[Mapping[str, str | None]], strategy: PlanStrategy,
                      committed: Collection[PartitionKey] = ()) -> list[dict[str, str | None]]:
    """The partitions to plan, newest first: the explicit list (those that exist), else the regex and the
    filter mode over the existing partitions. `committed`: the partitions the commits since the last clustering
    wrote to (COMMITS_SINCE_LAST_CLUSTERING)."""
    if strategy.partitions:
        present = {tuple(sorted(p.items())) for p in existing}
        chosen = [dict(p) for p in strategy.partitions if tuple(sorted(p.items())) in present]
        return sorted(chosen, key=lambda p: _order(spec, p), reverse=True)
    parts = sorted((dict(p) for p in existing), key=lambda p: _order(spec, p))  # oldest first
    if strategy.partition_regex is not None:  # matched in bounded time: this runs in the Airflow process
        pattern = PartitionPattern(strategy.partition_regex)
        parts = [p for p in parts if pattern.fullmatch(partition_path(spec, p))]
    if strategy.filter_mode == RECENT_DAYS:
        ordered = [p for p in reversed(parts) if partition_order_key(spec, p) is not None]  # newest first
        return ordered[strategy.skip_from_latest:strategy.skip_from_latest + strategy.lookback_partitions]
    if strategy.filter_mode == SELECTED_PARTITIONS:
        low = partition_order_key(spec, strategy.begin_partition) if strategy.begin_partition else None
        high = partition_order_key(spec, strategy.end_partition) if strategy.end_partition else None
        parts = [p for p in parts if (key := partition_order_key(spec, p)) is not None
                 and (low is None or key >= low) and (high is None or key <= high)]
    elif strategy.filter_mode == DAY_ROLLING:
        parts = [p for i, p in enumerate(parts) if i % 24 == strategy.hour]
    elif strategy.filter_mode == COMMITS_SINCE_LAST_CLUSTERING:
        wanted = set(committed)
        parts = [p for p in parts if tuple(sorted(p.items())) in wanted]
    return list(reversed(parts))


def build_groups(spec: TableSpec, files: Sequence[DataFile], partitions: Sequence[Mapping[str, str | None]],
                 strategy: PlanStrategy, *, excluded: frozenset[str] = frozenset(), sorts: bool = False,
                 made_by_clustering: Callable[[DataFile], bool] = lambda f: False) -> list[PlanGroup]:
    """Groups over the chosen partitions (in the given order), at most `max_groups`.

    `excluded`: files under a pending plan (never planned twice); `sorts`: the layout orders rows.
    """
    by_partition: dict[PartitionKey, list[DataFile]] = {}
    for data_file in files:
        by_partition.setdefault(data_file.partition_key(), []).append(data_file)
    groups: list[PlanGroup] = []
    for partition in partitions:
        live = [f for f in by_partition.get(tuple(sorted(partition.items())), []) if f.path not in excluded]
        current = _current_bucketing(spec, partition)
        if current is None:
            groups += _plain_groups(partition, live, strategy, sorts, made_by_clustering)
        else:
            groups += _bucket_groups(spec, partition, live, strategy, current)
        if len(groups) >= strategy.max_groups:
            return groups[:strategy.max_groups]
    return groups


def output_files(group_bytes: int, target: int, rows: int | None = None) -> int:
    """Files a group becomes: ceil(bytes / target), at least 1, and at most one per row (a tiny target
    must not plan thousands of files that would hold nothing)."""
    count = max(1, math.ceil(group_bytes / target))
    return count if rows is None else min(count, max(1, rows))


def _fill(units: list[tuple[list[DataFile], int]], strategy: PlanStrategy) -> list[list[tuple[list[DataFile], int]]]:
    """Hudi's grouping: units (files, or buckets) largest first, a new group when the next would pass
    max_bytes_per_group (a unit larger than that is a group of its own)."""
    out: list[list[tuple[list[DataFile], int]]] = []
    current: list[tuple[list[DataFile], int]] = []
    size = 0
    for unit in sorted(units, key=lambda u: (-u[1], u[0][0].path)):
        if current and size + unit[1] > strategy.max_bytes_per_group:
            out.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit[1]
    if current:
        out.append(current)
    return out


def _plain_groups(partition: Mapping[str, str | None], live: list[DataFile], strategy: PlanStrategy, sorts: bool,
                  made_by_clustering: Callable[[DataFile], bool]) -> list[PlanGroup]:
    small = [f for f in live if f.bytes < strategy.small_file_limit]
    filled = _fill([([f], f.bytes) for f in small], strategy)
    groups = []
    for i, members in enumerate(filled):
        chosen = [f for unit, _ in members for f in unit]
        if i == len(filled) - 1 and len(chosen) == 1:
            keep = strategy.single_group or (sorts and not made_by_clustering(chosen[0]))
            if not keep:
                continue
        groups.append(_group(partition, chosen, output_files(sum(f.bytes for f in chosen),
                                                             strategy.target_file_max_bytes,
                                                             sum(f.rows for f in chosen))))
    return groups


def _bucket_groups(spec: TableSpec, partition: Mapping[str, str | None], live: list[DataFile],
                   strategy: PlanStrategy, current: str) -> list[PlanGroup]:
    buckets: dict[int, list[DataFile]] = {}
    for data_file in live:
        bucketing = file_bucketing(data_file, spec)
        if bucketing is not None and bucketing.key() == current and data_file.bucket is not None:
            buckets.setdefault(data_file.bucket, []).append(data_file)
    units = [(sorted(fs, key=lambda f: f.path), sum(f.bytes for f in fs)) for fs in buckets.values()
             if len(fs) >= 2 and any(f.bytes < strategy.small_file_limit for f in fs)]
    groups = []
    for members in _fill(units, strategy):
        chosen = [f for unit, _ in members for f in unit]
        ids = sorted({f.bucket for f in chosen if f.bucket is not None})
        groups.append(_group(partition, chosen, len(ids), tuple(ids)))
    return groups


def _current_bucketing(spec: TableSpec, partition: Mapping[str, str | None]) -> str | None:
    """The bucketing new files of this partition get (None: plain)."""
    count = spec.bucket_count_for(partition)
    return None if count is None or spec.bucket is None else spec.bucket.bucketing(count).key()


def _group(partition: Mapping[str, str | None], files: list[DataFile], outputs: int,
           buckets: tuple[int, ...] = ()) -> PlanGroup:
    ordered = sorted(files, key=lambda f: f.path)
    return PlanGroup(dict(partition), tuple(f.path for f in ordered), sum(f.bytes for f in ordered),
                     sum(f.rows for f in ordered), outputs, buckets)
