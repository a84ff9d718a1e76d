"""remove_orphan_files (formerly `vacuum`): delete files under the table root that no log entry holds (no Spark
needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.maintenance.orphans import OPERATION, remove_orphan_files
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class RemoveOrphanFilesSpec:
    """Validated remove_orphan_files spec."""

    table: str
    older_than_hours: float | None
    dry_run: bool
    request_id: str | None
    force: bool = False  # past the table's clean.retain.hours (`maintenance.retention`)


def parse(raw: Mapping[str, Any]) -> RemoveOrphanFilesSpec:
    """Validate a remove_orphan_files spec."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    hours = reader.number("older_than_hours")
    dry_run = reader.boolean("dry_run", default=False)
    request_id = reader.string("request_id")
    force = reader.boolean("force", default=False)
    reader.done()
    return RemoveOrphanFilesSpec(table, hours, dry_run, request_id, force)


def execute(_spark: Any, spec: RemoveOrphanFilesSpec) -> dict[str, Any]:
    """Remove orphan files and report what was found and deleted (a dry run writes nothing and lists what would go)."""
    table = LakeTable.open(spec.table)
    if (first := requests.retry_result(table, request_of(OPERATION, spec))) is not None:
        return first
    result = remove_orphan_files(table, spec.older_than_hours, dry_run=spec.dry_run, request_id=spec.request_id,
                                 force=spec.force)
    return requests.result(table.url, OPERATION, result.entry, **result.metrics())


register(Operation(OPERATION, parse, execute, needs_spark=False,
                   summary="delete files no log entry holds (orphans)"))
