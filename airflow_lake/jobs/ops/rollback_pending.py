"""rollback_pending (formerly `rollback`): roll back pending instants whose writer died, or the named ones (no Spark
needed). Undoing a completed commit is another operation (`restore`, Delta's RESTORE; issue 22)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import NothingToDo, request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.instants import is_instant_id
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable

OPERATION = "rollback_pending"  # "rollback" before (lake.format.operation_names)


@dataclass(frozen=True)
class RollbackPendingSpec:
    """Validated rollback_pending spec."""

    table: str
    instants: list[str] | None
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> RollbackPendingSpec | NothingToDo:
    """Validate a rollback_pending spec; `instants: []` rolls back nothing (leave it out for every dead instant)."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    ids = reader.strings("instants")
    for i, instant in enumerate(ids or ()):
        if not is_instant_id(instant):
            raise LakeSpecError(f"instants[{i}]", f"{instant!r} is not an instant id.",
                                "Give 17-digit ids as `airflow-lake timeline` shows them.")
    request_id = reader.string("request_id")
    reader.done()
    if ids == []:
        return NothingToDo(table, OPERATION, "instants", request_id, extra={"rolled_back": []})
    return RollbackPendingSpec(table, ids, request_id)


def execute(_spark: Any, spec: RollbackPendingSpec) -> dict[str, Any]:
    """Roll back and report which instants were rolled back; a retry of a committed request returns the first
    run's metrics."""
    table = LakeTable.open(spec.table)
    if (first := requests.retry_result(table, request_of(OPERATION, spec))) is not None:
        return first
    entry = table.rollback_pending(spec.instants, request_id=spec.request_id)
    rolled = list(entry.rolled_back) if entry else []
    return requests.result(table.url, OPERATION, entry, rolled_back=rolled)


register(Operation(OPERATION, parse, execute, needs_spark=False,
                   summary="roll back dead or named pending instants"))
