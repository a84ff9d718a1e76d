"""schedule_clustering: store a clustering plan (a requested replace instant) when enough commits happened.

Reads only the timeline (no Spark): the hook runs it in-process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import NothingToDo, plain_table, request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.clustering.partition_regex import compile_pattern
from airflow_lake.lake.clustering.plan import SCHEDULE_OPERATION
from airflow_lake.lake.clustering.schedule import schedule_clustering
from airflow_lake.lake.clustering.strategy import PlanStrategy
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable

STRATEGY_FIELDS = ("min_commits", "partitions", "partition_regex", "filter_mode", "lookback_partitions",
                   "skip_from_latest", "begin_partition", "end_partition", "hour", "small_file_limit_bytes",
                   "max_bytes_per_group", "target_file_max_bytes", "max_groups", "single_group_clustering")
LAYOUT_FIELDS = ("layout", "sort_columns", "curve", "sample_ranges")
# A Parquet file's own footer and page headers take hundreds of bytes: a smaller target cannot be met and
# only multiplies files (1 byte planned 5,449 files for 40 rows).
MIN_TARGET_FILE_BYTES = 1024


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule_clustering spec; strategy and layout fields are checked against the table when it runs."""

    table: str
    settings: Mapping[str, Any]
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> ScheduleSpec | NothingToDo:
    """Validate the spec's shape: known fields only. `partitions: []` plans nothing (no plan, never one
    over every partition)."""
    reader = SpecReader(raw, SCHEDULE_OPERATION)
    table = table_path(reader)
    request_id = reader.string("request_id")
    settings = {key: reader.raw_value(key) for key in (*STRATEGY_FIELDS, *LAYOUT_FIELDS) if reader.has(key)}
    reader.done()
    if settings.get("partitions") == []:
        rest = {k: v for k, v in settings.items() if k != "partitions"}

        def check(lake: LakeTable) -> None:  # the other settings as the schedule would read them
            plain_table(lake)
            read_settings(rest, lake)

        return NothingToDo(table, SCHEDULE_OPERATION, "partitions", request_id, partitioned=True,
                           extra={"plan_id": None, "scheduled": False}, check=check)
    return ScheduleSpec(table, settings, request_id)


def read_settings(settings: Mapping[str, Any], table: LakeTable) -> tuple[PlanStrategy, Layout]:
    """The strategy and layout, checked against the table (columns, partition values, types)."""
    spec = table.spec
    reader = SpecReader(dict(settings), SCHEDULE_OPERATION)
    strategy = PlanStrategy.read(reader, spec)
    layout = Layout.read(reader, spec)
    reader.done()
    if strategy.target_file_max_bytes < MIN_TARGET_FILE_BYTES:
        raise LakeSpecError("target_file_max_bytes", f"{strategy.target_file_max_bytes:,} byte(s) is below the "
                            f"minimum of {MIN_TARGET_FILE_BYTES}: a Parquet file's own metadata is about that big.",
                            f"Give at least {MIN_TARGET_FILE_BYTES} (e.g. 134217728 for 128 MiB files), or leave it "
                            "out for 1 GiB.")
    if strategy.partition_regex is not None:  # refused here, before the lock: patterns that need backtracking
        compile_pattern(strategy.partition_regex)
    return strategy, layout


def execute(spark: Any, spec: ScheduleSpec) -> dict[str, Any]:
    """Plan, or report why not; the plan id is `plan_id` (None when nothing was planned)."""
    table = LakeTable.open(spec.table)
    strategy, layout = read_settings(spec.settings, table)
    result = schedule_clustering(table, strategy, layout, request_id=spec.request_id,
                                 request_fingerprint=request_of(SCHEDULE_OPERATION, spec).fingerprint)
    return {"table": table.url, "operation": SCHEDULE_OPERATION, "request_id": spec.request_id, **result.to_dict()}


register(Operation(SCHEDULE_OPERATION, parse, execute, needs_spark=False,
                   summary="plan a clustering after enough commits"))
