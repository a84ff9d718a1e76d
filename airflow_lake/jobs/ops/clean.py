"""clean: delete removed files that no snapshot within the retention needs (no Spark needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class CleanSpec:
    """Validated clean spec."""

    table: str
    retain_hours: float | None
    request_id: str | None
    force: bool = False  # past the table's clean.retain.hours (`maintenance.retention`)


def parse(raw: Mapping[str, Any]) -> CleanSpec:
    """Validate a clean spec."""
    reader = SpecReader(raw, "clean")
    table = table_path(reader)
    retain = reader.number("retain_hours")
    request_id = reader.string("request_id")
    force = reader.boolean("force", default=False)
    reader.done()
    return CleanSpec(table, retain, request_id, force)


def execute(_spark: Any, spec: CleanSpec) -> dict[str, Any]:
    """Clean and report what was deleted; a retry of a committed request returns the first run's metrics."""
    table = LakeTable.open(spec.table)
    if (first := requests.retry_result(table, request_of("clean", spec))) is not None:
        # the deletes its first run did not get to (killed between its entry and its deletes)
        table.clean(spec.retain_hours, request_id=spec.request_id, force=spec.force)
        return first
    entry = table.clean(spec.retain_hours, request_id=spec.request_id, force=spec.force)
    extra = {} if entry else {"files_deleted": 0, "bytes_freed": 0}
    return requests.result(table.url, "clean", entry, **extra)


register(Operation("clean", parse, execute, needs_spark=False,
                   summary="delete files no snapshot within the retention needs"))
