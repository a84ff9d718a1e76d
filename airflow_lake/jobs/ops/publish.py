"""publish: catch a table's open-format metadata up with its log (the Delta log `_delta_log/`; no Spark needed).

Every commit publishes itself once it lands; this catches up what a failed or killed publish left behind, and
publishes a table created before publishing existed for the first time (`airflow-lake publish`, `LakeTable.publish`).
It commits nothing to our log, so it needs no request id: a retry publishes whatever is still missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable

OPERATION = "publish"


@dataclass(frozen=True)
class PublishSpec:
    """Validated publish spec."""

    table: str
    request_id: str | None  # accepted like every operation's (the operators send one); publishing needs none


def parse(raw: Mapping[str, Any]) -> PublishSpec:
    """Validate a publish spec."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    request_id = reader.string("request_id")
    reader.done()
    return PublishSpec(table, request_id)


def execute(_spark: Any, spec: PublishSpec) -> dict[str, Any]:
    """Publish every commit not published yet and report it (`Published.to_dict`: `published_seq`,
    `delta_versions_written`, `publish_seconds`...); raises what goes wrong."""
    table = LakeTable.open(spec.table)
    published = table.publish()
    return {"table": table.url, "operation": OPERATION, "noop": False, **published.to_dict()}


register(Operation(OPERATION, parse, execute, needs_spark=False,
                   summary="publish the commits other engines do not see yet (Delta Lake log)"))
