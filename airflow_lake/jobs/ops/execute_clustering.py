"""execute_clustering: run a scheduled clustering plan (or the oldest / all pending ones) as replace commits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.clustering.execute import (
    ALL,
    DEFAULT_PARALLELISM,
    OLDEST,
    Executed,
    committed_runs,
    execute_clustering,
    result_metrics,
)
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.instants import is_instant_id
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class ExecuteSpec:
    """A validated execute_clustering spec."""

    table: str
    plan_id: str | None
    which: str
    parallelism: int
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> ExecuteSpec:
    """Validate the spec: a plan id (17 digits) or which = oldest / all."""
    reader = SpecReader(raw, EXECUTE_OPERATION)
    table = table_path(reader)
    plan_id = reader.string("plan_id")
    if plan_id is not None and not is_instant_id(plan_id):
        raise LakeSpecError("plan_id", f"{plan_id!r} is not a plan id (an instant id of 17 digits).",
                            "Pass the plan_id schedule_clustering returned, or leave it out for the oldest plan.")
    which = reader.choice("which", (OLDEST, ALL), OLDEST)
    if plan_id is not None and reader.has("which"):
        raise LakeSpecError("which", "give either plan_id or which, not both.", "Drop one.")
    parallelism = reader.number("parallelism", default=DEFAULT_PARALLELISM, minimum=1)
    assert parallelism is not None
    if not float(parallelism).is_integer() or parallelism > 64:
        raise LakeSpecError("parallelism", f"{parallelism!r} is not a whole number in 1..64.", "Give e.g. 4.")
    request_id = reader.string("request_id")
    reader.done()
    return ExecuteSpec(table, plan_id, which, int(parallelism), request_id)


def execute(spark: Any, spec: ExecuteSpec) -> dict[str, Any]:
    """Run the plan(s). A retry returns the commits its earlier tries made (`already_committed`) and, for
    which="all", runs the plans still pending; `plans` lists every plan of the request. `noop` is true exactly
    when no plan ran or was returned (`plan_id` null, `reason` says why)."""
    table = LakeTable.open(spec.table)
    request = request_of(EXECUTE_OPERATION, spec, ignore=("parallelism",))
    ran = execute_clustering(table, spark, plan_id=spec.plan_id, which=spec.which, request_id=spec.request_id,
                             parallelism=spec.parallelism, request_fingerprint=request.fingerprint)
    return _metrics(table, spec, ran)


def retry_result(spec: ExecuteSpec) -> dict[str, Any] | None:
    """What `execute` returns when every plan it would run has been committed already (by earlier tries of the
    request; or the plan it names, by anyone), read from the log with no Spark; else None (it has to run)."""
    table = LakeTable.open(spec.table)
    request = request_of(EXECUTE_OPERATION, spec, ignore=("parallelism",))
    ran = committed_runs(table, plan_id=spec.plan_id, which=spec.which, request_id=spec.request_id,
                         request_fingerprint=request.fingerprint)
    return None if ran is None else _metrics(table, spec, ran)


def _metrics(table: LakeTable, spec: ExecuteSpec, ran: list[Executed]) -> dict[str, Any]:
    """The metrics of the plans a request ran or found committed."""
    out: dict[str, Any] = {"table": table.url, "operation": EXECUTE_OPERATION, "request_id": spec.request_id,
                           "plans_executed": len(ran),
                           "plans_already_committed": sum(1 for r in ran if r.already_committed)}
    if not ran:
        return {**out, "plan_id": None, "noop": True, "reason": "no pending clustering plan"}
    runs = [result_metrics(r) for r in ran]
    out.update(runs[0])
    out["noop"] = False
    if len(runs) > 1:
        out["plans"] = runs
    return out


register(Operation(EXECUTE_OPERATION, parse, execute, summary="run a clustering plan as one replace commit",
                   retry_result=retry_result))
