"""BucketRewriteOperator: its spec, and a real run through LakeHook and spark-submit with metrics to XCom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.operators.bucket_rewrite import BucketRewriteOperator
from tests.support import write_source


def test_bucket_rewrite_operator_builds_its_spec() -> None:
    op = BucketRewriteOperator(task_id="b", table="/lake/t", partitions={"from": {"dt": "{{ ds }}"}},
                               bucket={"columns": ["id"], "count": 16})
    assert op.build_spec({}) == {"partitions": {"from": {"dt": "{{ ds }}"}},  # type: ignore[arg-type]
                                 "bucket": {"columns": ["id"], "count": 16}}
    assert {"table", "partitions", "bucket"} <= set(op.template_fields)
    assert BucketRewriteOperator(task_id="b", table="/t").build_spec({}) == {}  # type: ignore[arg-type]
    assert op.operation == "bucket_rewrite" and "hook" not in op.__dict__


def test_bucket_rewrite_operator_runs_through_spark_submit(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING, v DOUBLE",
                                                   "partition_by": ["dt"]})
    source = write_source(tmp_path / "a.parquet", list(range(40)), ["d1", "d2"] * 20)
    run(spark, "write", {"table": table.url, "source": {"path": source}})
    op = BucketRewriteOperator(task_id="b", table=table.url, partitions=[{"dt": "d2"}],
                               bucket={"columns": ["id"], "count": 4, "sort_columns": ["id"]})

    def submit(spec: dict[str, Any]) -> dict[str, Any]:
        return op.hook.submit(op.operation, {"table": op.table, **spec, "request_id": "dag/b/run/-1"})

    metrics = submit(op.build_spec({}))  # type: ignore[arg-type]
    assert metrics["action"] == "replace" and metrics["operation"] == "bucket_rewrite"
    assert metrics["bucket_counts"] == {"dt=d2": 4} and metrics["bucket_counts_before"] == {"dt=d2": None}
    assert metrics["rows_added"] == metrics["rows_removed"] == 20 and metrics["files_added"] == 4
    assert metrics["already_committed"] is False
    again = submit(op.build_spec({}))  # type: ignore[arg-type]  # an Airflow retry: same table, same metrics
    assert again["already_committed"] is True and again["seq"] == metrics["seq"]
    snap = LakeTable.open(table.url).snapshot()
    assert sorted(f.bucket for f in snap.files if f.partition["dt"] == "d2") == [0, 1, 2, 3]
