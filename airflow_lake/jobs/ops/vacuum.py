"""vacuum: delete files under the table root that no log entry holds (no Spark needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import entry_metrics, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.maintenance.orphans import vacuum
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class VacuumSpec:
    """Validated vacuum spec."""

    table: str
    older_than_hours: float | None
    dry_run: bool
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> VacuumSpec:
    """Validate a vacuum spec."""
    reader = SpecReader(raw, "vacuum")
    table = table_path(reader)
    hours = reader.number("older_than_hours")
    dry_run = reader.boolean("dry_run", default=False)
    request_id = reader.string("request_id")
    reader.done()
    return VacuumSpec(table, hours, dry_run, request_id)


def execute(_spark: Any, spec: VacuumSpec) -> dict[str, Any]:
    """Vacuum and report what was found and deleted (a dry run writes nothing and lists what would go)."""
    table = LakeTable.open(spec.table)
    result = vacuum(table, spec.older_than_hours, dry_run=spec.dry_run, request_id=spec.request_id)
    return entry_metrics(table.url, "vacuum", result.entry, **result.metrics())


register(Operation("vacuum", parse, execute, needs_spark=False,
                   summary="delete files no log entry holds (orphans)"))
