"""schedule_clustering: store a clustering plan (a requested replace instant) when enough commits happened.

Reads only the timeline (no Spark): the hook runs it in-process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.fields import SpecReader
from airflow_lake.jobs.ops.common import table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.clustering.plan import SCHEDULE_OPERATION
from airflow_lake.lake.clustering.schedule import schedule_clustering
from airflow_lake.lake.clustering.strategy import PlanStrategy
from airflow_lake.lake.table import LakeTable

STRATEGY_FIELDS = ("min_commits", "partitions", "partition_regex", "filter_mode", "lookback_partitions",
                   "skip_from_latest", "begin_partition", "end_partition", "hour", "small_file_limit_bytes",
                   "max_bytes_per_group", "target_file_max_bytes", "max_groups", "single_group_clustering")
LAYOUT_FIELDS = ("layout", "sort_columns", "curve", "sample_ranges")


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule_clustering spec; strategy and layout fields are checked against the table when it runs."""

    table: str
    settings: Mapping[str, Any]
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> ScheduleSpec:
    """Validate the spec's shape: known fields only."""
    reader = SpecReader(raw, SCHEDULE_OPERATION)
    table = table_path(reader)
    request_id = reader.string("request_id")
    settings = {key: reader.raw_value(key) for key in (*STRATEGY_FIELDS, *LAYOUT_FIELDS) if reader.has(key)}
    reader.done()
    return ScheduleSpec(table, settings, request_id)


def read_settings(settings: Mapping[str, Any], table: LakeTable) -> tuple[PlanStrategy, Layout]:
    """The strategy and layout, checked against the table (columns, partition values, types)."""
    spec = table.spec
    reader = SpecReader(dict(settings), SCHEDULE_OPERATION)
    strategy = PlanStrategy.read(reader, spec)
    layout = Layout.read(reader, spec)
    reader.done()
    return strategy, layout


def execute(spark: Any, spec: ScheduleSpec) -> dict[str, Any]:
    """Plan, or report why not; the plan id is `plan_id` (None when nothing was planned)."""
    table = LakeTable.open(spec.table)
    strategy, layout = read_settings(spec.settings, table)
    result = schedule_clustering(table, strategy, layout, request_id=spec.request_id)
    return {"table": table.url, "operation": SCHEDULE_OPERATION, "request_id": spec.request_id, **result.to_dict()}


register(Operation(SCHEDULE_OPERATION, parse, execute, needs_spark=False,
                   summary="plan a clustering after enough commits"))
