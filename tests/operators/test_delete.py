"""LakeDeleteOperator: its spec, its templated fields, and real runs through LakeHook and spark-submit (a retry is
a no-op; a hostile `where` from a UI Param is refused by the plan Spark analyzes, and nothing is committed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.assets import table_asset
from airflow_lake.exceptions import LakeJobError
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.operators.delete import LakeDeleteOperator
from tests.support import table_ids, write_source


def test_the_delete_operator_builds_its_spec() -> None:
    op = LakeDeleteOperator(task_id="forget", table="/lake/users", where="user_id = {{ params.user_id }}")
    assert op.build_spec({}) == {"where": "user_id = {{ params.user_id }}"}  # type: ignore[arg-type]
    assert {"table", "filters", "where"} <= set(op.template_fields) and "hook" not in op.__dict__
    assert op.outlets == [table_asset("/lake/users")] and op.operation == "delete"
    rendered = LakeDeleteOperator(task_id="f", table="/t", filters="[['user_id', 'in', [1, 2]]]")
    assert rendered.build_spec({}) == {"filters": [["user_id", "in", [1, 2]]]}  # type: ignore[arg-type]
    empty = LakeDeleteOperator(task_id="f", table="/t", filters="[]")  # an upstream task found no one
    assert empty.build_spec({}) == {"filters": []}  # type: ignore[arg-type]  # (refused by the operation)
    with pytest.raises(ValueError, match="exactly one"):
        LakeDeleteOperator(task_id="f", table="/t")
    with pytest.raises(ValueError, match="exactly one"):
        LakeDeleteOperator(task_id="f", table="/t", where="true", filters=[["k", "=", 1]])


@pytest.mark.slow
def test_the_delete_operator_runs_through_spark_submit(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "users"), {"schema": "id BIGINT, dt STRING, v DOUBLE",
                                                       "partition_by": ["dt"]})
    run(spark, "write", {"table": table.url, "source": {"path": write_source(tmp_path / "a.parquet", list(range(40)),
                                                                             ["d1", "d2"] * 20)}})
    op = LakeDeleteOperator(task_id="forget", table=table.url, where="id IN (3, 4)")

    def submit(spec: dict[str, Any], request_id: str = "dag/forget/run/-1") -> dict[str, Any]:
        return op.hook.submit(op.operation, {"table": op.table, **spec, "request_id": request_id})

    metrics = submit(op.build_spec({}))  # type: ignore[arg-type]
    assert (metrics["action"], metrics["rows_deleted"], metrics["already_committed"]) == ("replace", 2, False)
    again = submit(op.build_spec({}))  # type: ignore[arg-type]  # an Airflow retry
    assert again["already_committed"] is True and again["seq"] == metrics["seq"]
    assert table_ids(spark, table.url) == [i for i in range(40) if i not in (3, 4)]

    head = table.commit_log.head()
    hostile = f"id IN (SELECT id FROM parquet.`{tmp_path / 'a.parquet'}`)"  # as a UI Param could render it
    with pytest.raises(LakeJobError, match=r"subquery|cannot be resolved"):
        submit({"where": hostile}, "dag/forget/run2/-1")
    assert table.commit_log.head() == head and table_ids(spark, table.url) == [i for i in range(40) if i not in (3, 4)]
