"""compact_upserts (formerly `compact`): fold a primary-key table's upserts (delta files) into base files, one
replace commit — Hudi's merge-on-read compaction. Small files of any table are merged by clustering."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import NothingToDo, primary_key_table, request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.partitions import normalize_partitions
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import stored_spec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import OPERATION, committed_compaction, compact, result_metrics


@dataclass(frozen=True)
class CompactUpsertsSpec:
    """A validated compact_upserts spec."""

    table: str
    partitions: list[Mapping[str, Any]] | None
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> CompactUpsertsSpec | NothingToDo:
    """Validate the spec: optional partitions (a list of {column: value}); `[]` compacts nothing."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    partitions = reader.raw_value("partitions")
    if partitions is not None and (isinstance(partitions, str) or not isinstance(partitions, list)):
        raise LakeSpecError("partitions", f"{partitions!r} is not a list of partitions.",
                            "Give [{'dt': '2024-01-01'}, ...], or leave it out for every partition.")
    request_id = reader.string("request_id")
    reader.done()
    if partitions == []:
        return NothingToDo(table, OPERATION, "partitions", request_id, partitioned=True, check=primary_key_table)
    return CompactUpsertsSpec(table, partitions, request_id)


def execute(spark: Any, spec: CompactUpsertsSpec) -> dict[str, Any]:
    """Compact; a retry returns the first run's metrics and writes nothing."""
    table = LakeTable.open(spec.table)
    if spec.partitions is not None:
        normalize_partitions(table.spec, spec.partitions)  # fail before any Spark work
    done = compact(table, spark, partitions=spec.partitions, request_id=spec.request_id,
                   request_fingerprint=request_of(OPERATION, spec).fingerprint)
    return {"table": table.url, "operation": OPERATION, **result_metrics(done)}


def retry_result(spec: CompactUpsertsSpec) -> dict[str, Any] | None:
    """What `execute` returns when the spec's request has already committed (read from the log, no Spark), else
    None (it has to run)."""
    table = LakeTable.open(spec.table)
    if spec.partitions is not None:
        normalize_partitions(table.spec, spec.partitions)  # refused as `execute` refuses it
    done = committed_compaction(table, stored_spec(table.state().spec), spec.request_id,
                                request_of(OPERATION, spec).fingerprint)
    return None if done is None else {"table": table.url, "operation": OPERATION, **result_metrics(done)}


register(Operation(OPERATION, parse, execute, summary="fold upserts into base files (primary-key tables)",
                   retry_result=retry_result))
