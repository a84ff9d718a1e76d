"""restore: commit a snapshot equal to an earlier one (Delta's RESTORE, Iceberg's rollback_to_snapshot; no Spark
needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.maintenance.restore import OPERATION, TARGET_FIELDS, RestoreTarget, restore, target_of
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class RestoreSpec:
    """Validated restore spec."""

    table: str
    target: RestoreTarget
    dry_run: bool
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> RestoreSpec:
    """Validate a restore spec: exactly one of to_seq, to_instant, to_timestamp."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    values = [reader.raw_value(name) for name in TARGET_FIELDS]
    target = target_of(*values)
    dry_run = reader.boolean("dry_run", default=False)
    request_id = reader.string("request_id")
    reader.done()
    return RestoreSpec(table, target, dry_run, request_id)


def execute(_spark: Any, spec: RestoreSpec) -> dict[str, Any]:
    """Restore and report what was removed and re-added; a retry of a committed request returns the first run's
    metrics; restoring the current snapshot (or a dry run) commits nothing (`noop`)."""
    table = LakeTable.open(spec.table)
    request = request_of(OPERATION, spec, ignore=("dry_run",))
    if not spec.dry_run and (first := requests.retry_result(table, request)) is not None:
        return first
    result = restore(table, spec.target, dry_run=spec.dry_run, request_id=None if spec.dry_run else spec.request_id,
                     request_fingerprint=request.fingerprint)
    if result.entry is None:
        extra = result.metrics()
        if spec.dry_run:
            extra.update({"removed": list(result.plan.removed), "readded": [f.path for f in result.plan.readded]})
        return requests.result(table.url, OPERATION, None, **extra)
    return requests.result(table.url, OPERATION, result.entry, already_committed=result.already_committed)


register(Operation(OPERATION, parse, execute, needs_spark=False,
                   summary="commit a snapshot equal to an earlier one (undo commits; history stays)"))
