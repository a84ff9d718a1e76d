"""bucket_rewrite: rewrite chosen partitions of a lake table into a bucket spec, as one replace commit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import NothingToDo, request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.buckets.rewrite import OPERATION, bucket_rewrite
from airflow_lake.lake.commit import requests
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class BucketRewriteSpec:
    """Validated bucket_rewrite spec."""

    table: str
    partitions: Any
    bucket: Mapping[str, Any] | None
    request_id: str | None


def parse(raw: Mapping[str, Any]) -> BucketRewriteSpec | NothingToDo:
    """Validate a bucket_rewrite spec's shape (partitions and bucket are checked against the table later).

    `partitions: []` rewrites nothing (never every partition): `NothingToDo`, and no bucket spec is stored."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    partitions = reader.raw_value("partitions")
    if partitions is not None and partitions != "all" and not isinstance(partitions, list | dict):
        raise LakeSpecError("partitions", f"{partitions!r} is not a partition selection.",
                            "Give a list of partitions, {'from': {...}, 'to': {...}}, or 'all'.")
    bucket = reader.raw_value("bucket")
    if bucket is not None and not isinstance(bucket, dict):
        raise LakeSpecError("bucket", f"expected an object, got {bucket!r}.",
                            "Give {'columns': [...], 'count': N, 'sort_columns': [...]}.")
    request_id = reader.string("request_id")
    reader.done()
    if partitions == []:
        return NothingToDo(table, OPERATION, "partitions", request_id, partitioned=True,
                           extra={"nothing_to_do": True})
    return BucketRewriteSpec(table, partitions, bucket, request_id)


def execute(spark: Any, spec: BucketRewriteSpec) -> dict[str, Any]:
    """Run the rewrite; a retry with the same request_id returns the first run's metrics."""
    table = LakeTable.open(spec.table)
    request = request_of(OPERATION, spec)
    if (first := requests.retry_result(table, request)) is not None:
        return first
    entry = bucket_rewrite(table, spark, partitions=spec.partitions, bucket=spec.bucket, request_id=spec.request_id,
                           request_fingerprint=request.fingerprint)
    return requests.result(table.url, OPERATION, entry, already_committed=False, nothing_to_do=entry is None)


def retry_result(spec: BucketRewriteSpec) -> dict[str, Any] | None:
    """What `execute` returns when the spec's request has already committed (read from the log, no Spark), else
    None (it has to run)."""
    return requests.retry_result(LakeTable.open(spec.table), request_of(OPERATION, spec))


register(Operation(OPERATION, parse, execute, summary="rewrite partitions into a bucket spec",
                   retry_result=retry_result))
