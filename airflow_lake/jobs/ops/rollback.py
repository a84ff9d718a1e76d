"""rollback: roll back pending instants whose writer died, or the named ones (no Spark needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import NothingToDo, entry_metrics, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.instants import is_instant_id
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class RollbackSpec:
    """Validated rollback spec."""

    table: str
    instants: list[str] | None
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> RollbackSpec | NothingToDo:
    """Validate a rollback spec; `instants: []` rolls back nothing (leave it out for every dead instant)."""
    reader = SpecReader(raw, "rollback")
    table = table_path(reader)
    ids = reader.strings("instants")
    for i, instant in enumerate(ids or ()):
        if not is_instant_id(instant):
            raise LakeSpecError(f"instants[{i}]", f"{instant!r} is not an instant id.",
                                "Give 17-digit ids as `airflow-lake timeline` shows them.")
    request_id = reader.string("request_id")
    reader.done()
    if ids == []:
        return NothingToDo(table, "rollback", "instants", request_id, extra={"rolled_back": []})
    return RollbackSpec(table, ids, request_id)


def execute(_spark: Any, spec: RollbackSpec) -> dict[str, Any]:
    """Roll back and report which instants were rolled back."""
    table = LakeTable.open(spec.table)
    entry = table.rollback(spec.instants, request_id=spec.request_id)
    rolled = list(entry.rolled_back) if entry else []
    return entry_metrics(table.url, "rollback", entry, rolled_back=rolled)


register(Operation("rollback", parse, execute, needs_spark=False,
                   summary="roll back dead or named pending instants"))
