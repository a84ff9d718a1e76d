"""The plan strategy: when to plan, which partitions, and how to group their small files (Hudi's
`hoodie.clustering.*` settings under our names; the defaults are Hudi's)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.partitions import normalize_partition
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import TableSpec

MB = 1024 * 1024
NONE, RECENT_DAYS, SELECTED_PARTITIONS, DAY_ROLLING = "NONE", "RECENT_DAYS", "SELECTED_PARTITIONS", "DAY_ROLLING"
# ours, not Hudi's: the partitions the commits counted since the last clustering wrote to (the commits that fired
# the sensor) — a backfill into an old day plans that day, where RECENT_DAYS would plan the newest by value
COMMITS_SINCE_LAST_CLUSTERING = "COMMITS_SINCE_LAST_CLUSTERING"
FILTER_MODES = (NONE, RECENT_DAYS, SELECTED_PARTITIONS, DAY_ROLLING, COMMITS_SINCE_LAST_CLUSTERING)
MAX_REGEX = 1000
Partition = dict[str, str | None]


@dataclass(frozen=True)
class PlanStrategy:
    """How `schedule_clustering` chooses what to rewrite."""

    min_commits: int = 4  # hoodie.clustering.async.max.commits / inline.max.commits
    partitions: tuple[Partition, ...] = ()  # an explicit list: wins over regex and filter mode
    partition_regex: str | None = None  # matched against "col=value/col2=value" (full match)
    filter_mode: str = NONE
    lookback_partitions: int = 2  # RECENT_DAYS
    skip_from_latest: int = 0  # RECENT_DAYS
    begin_partition: Partition | None = None  # SELECTED_PARTITIONS (inclusive)
    end_partition: Partition | None = None
    hour: int | None = None  # DAY_ROLLING: the hour of the run (its logical date)
    small_file_limit: int = 300 * MB
    max_bytes_per_group: int = 2048 * MB
    target_file_max_bytes: int = 1024 * MB
    max_groups: int = 30
    single_group: bool = False  # keep a last group of one file even without sort columns
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, reader: SpecReader, spec: TableSpec) -> PlanStrategy:
        """From a schedule_clustering spec (every field optional)."""
        listed = reader.objects("partitions") or []
        if listed and not spec.partition_columns:
            raise LakeSpecError(reader.field("partitions"), "the table is not partitioned.", "Drop `partitions`.")
        partitions = tuple(normalize_partition(spec, p, f"{reader.field('partitions')}[{i}]")
                           for i, p in enumerate(listed))
        regex = reader.string("partition_regex")
        if regex is not None:
            if len(regex) > MAX_REGEX:
                raise LakeSpecError(reader.field("partition_regex"), "the pattern is too long.",
                                    f"Keep it under {MAX_REGEX} characters.")
            try:
                re.compile(regex)
            except re.error as err:
                raise LakeSpecError(reader.field("partition_regex"), f"{regex!r} is not a regular expression "
                                    f"({err}).", "Give a Python regular expression, e.g. 'dt=2024-.*'.") from None
        mode = reader.choice("filter_mode", FILTER_MODES, NONE)
        begin = reader.raw_value("begin_partition")
        end = reader.raw_value("end_partition")
        hour = reader.number("hour", default=None, minimum=0)
        out = cls(
            min_commits=_whole(reader, "min_commits", 4, 0),
            partitions=partitions,
            partition_regex=regex,
            filter_mode=mode,
            lookback_partitions=_whole(reader, "lookback_partitions", 2, 1),
            skip_from_latest=_whole(reader, "skip_from_latest", 0, 0),
            begin_partition=normalize_partition(spec, begin, reader.field("begin_partition")) if begin else None,
            end_partition=normalize_partition(spec, end, reader.field("end_partition")) if end else None,
            hour=None if hour is None else _hour(reader, hour),
            small_file_limit=_whole(reader, "small_file_limit_bytes", 300 * MB, 1),
            max_bytes_per_group=_whole(reader, "max_bytes_per_group", 2048 * MB, 1),
            target_file_max_bytes=_whole(reader, "target_file_max_bytes", 1024 * MB, 1),
            max_groups=_whole(reader, "max_groups", 30, 1),
            single_group=reader.boolean("single_group_clustering", default=False),
        )
        if mode == SELECTED_PARTITIONS and out.begin_partition is None and out.end_partition is None:
            raise LakeSpecError(reader.field("filter_mode"), "SELECTED_PARTITIONS needs begin_partition and/or "
                                "end_partition.", "Give e.g. begin_partition: {'dt': '2024-01-01'}.")
        if mode != SELECTED_PARTITIONS and (begin or end):
            raise LakeSpecError(reader.field("begin_partition" if begin else "end_partition"),
                                f"applies to filter_mode SELECTED_PARTITIONS, not {mode}.",
                                "Set filter_mode to SELECTED_PARTITIONS or drop it.")
        if mode == DAY_ROLLING and out.hour is None:
            raise LakeSpecError(reader.field("hour"), "DAY_ROLLING needs the hour of the run (0-23).",
                                "Give `hour` (the operator passes the hour of the run's logical date).")
        if mode in (RECENT_DAYS, SELECTED_PARTITIONS, DAY_ROLLING, COMMITS_SINCE_LAST_CLUSTERING) and \
                not spec.partition_columns:
            raise LakeSpecError(reader.field("filter_mode"), f"{mode} chooses partitions, but the table is not "
                                "partitioned.", "Use filter_mode NONE.")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form (kept in the plan for people to read)."""
        out: dict[str, Any] = {
            "min_commits": self.min_commits, "filter_mode": self.filter_mode,
            "small_file_limit_bytes": self.small_file_limit, "max_bytes_per_group": self.max_bytes_per_group,
            "target_file_max_bytes": self.target_file_max_bytes, "max_groups": self.max_groups,
            "single_group_clustering": self.single_group,
        }
        if self.partitions:
            out["partitions"] = [dict(p) for p in self.partitions]
        if self.partition_regex is not None:
            out["partition_regex"] = self.partition_regex
        if self.filter_mode == RECENT_DAYS:
            out.update(lookback_partitions=self.lookback_partitions, skip_from_latest=self.skip_from_latest)
        if self.filter_mode == SELECTED_PARTITIONS:
            out.update(begin_partition=self.begin_partition, end_partition=self.end_partition)
        if self.filter_mode == DAY_ROLLING:
            out["hour"] = self.hour
        return out


def _whole(reader: SpecReader, key: str, default: int, minimum: int) -> int:
    value = reader.number(key, default=default, minimum=minimum)
    assert value is not None
    if not float(value).is_integer():
        raise LakeSpecError(reader.field(key), f"{value!r} is not a whole number.", f"Give e.g. {default}.")
    return int(value)


def _hour(reader: SpecReader, value: float) -> int:
    if not float(value).is_integer() or not 0 <= value <= 23:
        raise LakeSpecError(reader.field("hour"), f"{value!r} is not an hour of the day.", "Give 0..23.")
    return int(value)
