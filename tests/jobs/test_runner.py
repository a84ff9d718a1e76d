"""`committed_result`: the result of an already committed request, read from the log with no Spark, is exactly what
`run` returns for that retry, for every operation that needs Spark; a request that did not commit (never ran, pending,
rolled back), a rebuild whose lake inputs changed and a reused request id are not answered so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.registry import operations
from airflow_lake.jobs.runner import committed_result
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.commit.transaction import begin
from tests.support import write_source

AIRFLOW = {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1, "try_number": 2}


def retried(spark: Any, operation: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run `spec` (its first try), then answer its retry from the log and check that it is what the retry run
    returns, with nothing committed by either; returns the answer."""
    first = run(spark, operation, spec)
    table = LakeTable.open(spec["table"])
    head = table.commit_log.head()
    answer = committed_result(operation, {**spec, "airflow": AIRFLOW})
    assert answer is not None and answer["already_committed"] is True, (operation, answer)
    assert answer == run(spark, operation, spec)
    assert LakeTable.open(spec["table"]).commit_log.head() == head
    assert answer["instant"] == first["instant"]
    return answer


def test_every_operation_that_needs_spark_answers_its_retries_from_the_log() -> None:
    assert sorted(name for name, op in operations().items() if op.needs_spark and op.retry_result is None) == []


def test_a_committed_request_is_answered_as_its_retry_runs(spark: Any, tmp_path: Path) -> None:
    events = LakeTable.create(str(tmp_path / "events"), {"schema": "id BIGINT, dt STRING, v DOUBLE",
                                                         "partition_by": ["dt"]}).url
    source = write_source(tmp_path / "a.parquet", range(12), ["a", "b", "c"] * 4)
    append = {"table": events, "source": {"path": source}, "request_id": "append"}
    assert committed_result("write", append) is None  # not run yet: the job runs
    retried(spark, "write", append)
    run(spark, "write", {"table": events, "source": {"path": write_source(tmp_path / "b.parquet", range(20, 32),
                                                                          ["a", "b", "c"] * 4)}})
    plan = run(spark, "schedule_clustering", {"table": events, "layout": "ZORDER", "sort_columns": ["id", "v"],
                                              "min_commits": 1, "small_file_limit_bytes": 10**12})
    retried(spark, "execute_clustering", {"table": events, "request_id": "cluster"})
    by_id = committed_result("execute_clustering", {"table": events, "plan_id": plan["plan_id"], "request_id": "x"})
    assert by_id is not None and by_id["plan_id"] == plan["plan_id"]  # a plan executed already, by any request
    staging = LakeTable.create(str(tmp_path / "staging"), {"schema": "id BIGINT, dt STRING, v DOUBLE"}).url
    run(spark, "write", {"table": staging, "source": {"path": source}})
    overwrite = {"table": events, "mode": "overwrite", "partitions": [{"dt": "c"}], "request_id": "rebuild",
                 "source": {"query": "SELECT id, dt, v + 1 AS v FROM s WHERE dt = 'c'", "tables": {"s": staging}}}
    retried(spark, "write", overwrite)
    retried(spark, "delete", {"table": events, "filters": [["id", "=", 1]], "request_id": "delete"})
    retried(spark, "bucket_rewrite", {"table": events, "bucket": {"columns": ["id"], "count": 2},
                                      "request_id": "rewrite"})
    # the overwrite's lake input changed since: it rebuilds (the job runs); an append under a used id is refused
    run(spark, "write", {"table": staging, "source": {"path": source}})
    assert committed_result("write", overwrite) is None
    other = {**append, "source": {"path": write_source(tmp_path / "c.parquet", [99], "a")}}
    with pytest.raises(LakeSpecError, match="reused request id") as answered:
        committed_result("write", other)
    with pytest.raises(LakeSpecError) as ran:
        run(spark, "write", other)
    assert str(answered.value) == str(ran.value)


def test_upserts_compactions_and_versioned_deletes(spark: Any, tmp_path: Path) -> None:
    users = LakeTable.create(str(tmp_path / "users"), {"schema": "id BIGINT NOT NULL, n BIGINT", "primary_key": ["id"],
                                                       "bucket": {"columns": ["id"], "count": 2}}).url
    for version in (2, 1):
        pq.write_table(pa.table({"id": pa.array(range(8), pa.int64()), "n": pa.array([version] * 8, pa.int64())}),
                       tmp_path / f"v{version}.parquet")
        retried(spark, "versioned_upsert", {"table": users, "source": {"path": str(tmp_path / f"v{version}.parquet")},
                                            "version": version, "request_id": f"upsert-{version}"})
    retried(spark, "delete", {"table": users, "keys": [{"id": 3}], "version": 5, "request_id": "forget"})
    retried(spark, "compact_upserts", {"table": users, "request_id": "compact"})


def test_a_request_that_did_not_commit_is_not_answered(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    spec = {"table": table.url, "source": {"path": write_source(tmp_path / "a.parquet", range(3), "a")}}
    rolled_back = begin(table, "commit", "write", request_id="rolled-back")
    rolled_back.abort()
    begin(table, "commit", "write", request_id="pending")  # its writer is alive (this process): left pending
    for request_id in ("rolled-back", "pending", "never"):
        assert committed_result("write", {**spec, "request_id": request_id}) is None, request_id
    assert committed_result("write", {**spec, "partitions": [], "mode": "overwrite", "request_id": "x"}) is None
