"""alter_table: add, widen, drop or rename columns and set or unset properties, in one metadata-only commit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.alter.alter_table import OPERATION, alter_table, result_metrics
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.evolution import Change, parse_changes
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class AlterSpec:
    """A validated alter_table spec."""

    table: str
    changes: tuple[Change, ...]
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> AlterSpec:
    """Validate the spec: a non-empty list of changes, each one well formed (checked against the table when it
    runs, all of them before anything is committed)."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    if not reader.has("changes"):
        raise LakeSpecError("changes", "alter_table needs `changes`.",
                            'Give e.g. [{"add": "c2", "type": "bigint", "after": "c1"}, {"drop": "c"}].')
    changes = tuple(parse_changes(reader.raw_value("changes")))
    request_id = reader.string("request_id")
    reader.done()
    return AlterSpec(table, changes, request_id)


def execute(_spark: Any, spec: AlterSpec) -> dict[str, Any]:
    """Alter the table; a retry with the same request_id returns the first run's metrics."""
    table = LakeTable.open(spec.table)
    request = request_of(OPERATION, _Fingerprinted(spec.table, [c.to_dict() for c in spec.changes], spec.request_id))
    altered = alter_table(table, list(spec.changes), request_id=spec.request_id,
                          request_fingerprint=request.fingerprint)
    return {"table": table.url, "operation": OPERATION, **result_metrics(altered)}


@dataclass(frozen=True)
class _Fingerprinted:
    """The request's inputs as JSON (a retry with the same changes matches, one with other changes does not)."""

    table: str
    changes: list[dict[str, Any]]
    request_id: str | None


register(Operation(OPERATION, parse, execute, needs_spark=False,
                   summary="add, widen, drop or rename columns; set or unset table properties (metadata only)"))
