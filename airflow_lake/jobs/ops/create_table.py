"""create_table: create a lake table from a spec (no Spark needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.format import spec_history
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.table import LakeTable

TABLE_FIELDS = ("columns", "schema", "partition_by", "bucket", "primary_key", "version_column",
                "merge_operators", "properties", "null_values")


@dataclass(frozen=True)
class CreateTableSpec:
    """Validated create_table spec."""

    table: str
    spec: TableSpec
    if_exists: str
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> CreateTableSpec:
    """Validate a create_table spec."""
    reader = SpecReader(raw, "create_table")
    table = table_path(reader)
    if_exists = reader.choice("if_exists", ("error", "ignore"), "error")
    request_id = reader.string("request_id")
    spec = TableSpec.from_dict({k: reader.raw_value(k) for k in TABLE_FIELDS if reader.has(k)})
    reader.done()
    return CreateTableSpec(table, spec, if_exists, request_id)


def execute(_spark: Any, spec: CreateTableSpec) -> dict[str, Any]:
    """Create the table; with if_exists=ignore an existing table is fine if the spec is its spec or one it reached
    its spec from through the provider's operations (`spec_changed_by` and `spec_differences` then say how)."""
    existed = LakeTable.exists(spec.table)
    table = LakeTable.create(spec.table, spec.spec, exist_ok=spec.if_exists == "ignore",
                             request_id=spec.request_id)
    first = table.commit_log.read(0)
    ours = not existed or (spec.request_id is not None and first.request_id == spec.request_id)
    if not existed:
        return requests.result(table.url, "create_table", first, created=ours)
    reached = spec_history.reached_from(table, spec.spec)  # (accepted by `create`: a few log reads at most)
    return requests.result(table.url, "create_table", first, created=ours,
                           spec_changed_by=[c.to_dict() for c in reached.changes],
                           spec_differences=[str(d) for d in reached.differences])


register(Operation("create_table", parse, execute, needs_spark=False,
                   summary="create a lake table from a spec"))
