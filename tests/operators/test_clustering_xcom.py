"""The clustering operators' XCom fields mean one thing (issue 23): `noop` is true exactly when no plan was created,
run or returned (`plan_id` null, with a `reason`); a plan stored or committed before is `noop: false` with
`existing_plan` / `already_committed`. The schedule runs as its operator runs it (its hook, in-process: that is
where a new plan used to come back as `noop: true`), execute through the job runner and the operator's own no-op,
and both in a real DAG run (`airflow dags test`)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from tests.airflow_stack import migrate_db
from tests.support import write_source

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def table_with_small_files(spark: Any, tmp_path: Path, commits: int = 4) -> str:
    path = str(tmp_path / "lake" / "events")
    LakeTable.create(path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    for i in range(commits):
        run(spark, "write", {"table": path, "source": {"path": write_source(
            tmp_path / f"{i}.parquet", list(range(i * 10, (i + 1) * 10)), "d1")}})
    return path


def test_schedule_xcom_new_plan_retry_pending_plan_executed_plan_and_nothing(spark: Any, tmp_path: Path) -> None:
    path = table_with_small_files(spark, tmp_path)
    op = ScheduleClusteringOperator(task_id="plan", table=path)

    def plan(request_id: str) -> dict[str, Any]:
        return op.hook.submit(op.operation, {"table": path, **op.build_spec({}),  # type: ignore[arg-type]
                                             "request_id": request_id})

    new = plan("dag/plan/run1/-1")
    assert new["plan_id"] is not None and new["noop"] is False  # was `noop: true` next to the plan id
    assert (new["scheduled"], new["existing_plan"], new["already_committed"]) == (True, False, False)
    assert new["input_files"] == 4

    retry = plan("dag/plan/run1/-1")  # the task's retry: the plan its first try stored
    assert (retry["plan_id"], retry["noop"], retry["existing_plan"], retry["already_committed"]) == \
        (new["plan_id"], False, True, False)
    assert retry["reason"] == "scheduled by an earlier try of this request"

    other = plan("dag/plan/run2/-1")  # another run while that plan is pending: its files are not planned twice
    assert (other["plan_id"], other["noop"], other["existing_plan"]) == (None, True, False)
    assert other["pending_plans"] == [new["plan_id"]] and f"under pending plan(s) {new['plan_id']}" in other["reason"]

    ran = run(spark, "execute_clustering", {"table": path, "plan_id": new["plan_id"],
                                            "request_id": "dag/execute/run1/-1"})
    after = plan("dag/plan/run1/-1")  # a retry after its plan ran (through the hook it used to fail: "already used")
    assert (after["plan_id"], after["noop"], after["existing_plan"], after["already_committed"]) == \
        (new["plan_id"], False, True, True)
    assert after["executed_by"] == ran["instant"]

    nothing = plan("dag/plan/run3/-1")
    assert (nothing["plan_id"], nothing["noop"], nothing["scheduled"], nothing["existing_plan"]) == \
        (None, True, False, False)
    assert nothing["reason"] == "0 commit(s) since the last clustering, fewer than min_commits=4"


def test_execute_xcom_ran_retry_run_by_another_request_and_nothing(spark: Any, tmp_path: Path) -> None:
    path = table_with_small_files(spark, tmp_path)
    plan_id = run(None, "schedule_clustering", {"table": path})["plan_id"]
    spec = {"table": path, "plan_id": plan_id, "request_id": "dag/execute/run1/-1"}
    first = run(spark, "execute_clustering", spec)
    assert (first["plan_id"], first["noop"], first["already_committed"], first["files_before"]) == \
        (plan_id, False, False, 4)
    retry = run(spark, "execute_clustering", spec)
    assert (retry["plan_id"], retry["noop"], retry["already_committed"], retry["seq"]) == \
        (plan_id, False, True, first["seq"])
    by_other = run(spark, "execute_clustering", {**spec, "request_id": "dag/execute/run2/-1"})
    assert (by_other["noop"], by_other["already_committed"], by_other["seq"]) == (False, True, first["seq"])

    oldest = run(spark, "execute_clustering", {"table": path, "request_id": "dag/execute/run3/-1"})
    assert (oldest["plan_id"], oldest["noop"], oldest["reason"]) == (None, True, "no pending clustering plan")

    op = ExecuteClusteringOperator(task_id="execute", table=path, plan_id="{{ ti.xcom_pull('plan')['plan_id'] }}")
    op.plan_id = "None"  # as rendered after a schedule that planned nothing
    nothing = op.nothing_to_do({"table": path, **op.build_spec({}), "request_id": "r"})  # type: ignore[arg-type]
    assert nothing is not None
    metrics = nothing.run()
    assert (metrics["plan_id"], metrics["noop"], metrics["plans_executed"]) == (None, True, 0)


DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator

TABLE = {table!r}
with DAG("lake_xcom_test", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False):
    plan = ScheduleClusteringOperator(task_id="plan", table=TABLE, filter_mode="COMMITS_SINCE_LAST_CLUSTERING")
    execute = ExecuteClusteringOperator(task_id="execute", table=TABLE, plan_id=plan.output["plan_id"])
    replan = ScheduleClusteringOperator(task_id="replan", table=TABLE)
    plan >> execute >> replan
'''


@pytest.mark.slow
def test_the_xcom_of_a_dag_run_says_one_thing(spark: Any, tmp_path: Path) -> None:
    path = table_with_small_files(spark, tmp_path)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lake_xcom_test.py").write_text(DAG_FILE.format(table=path))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate_db(env)
    done = subprocess.run([AIRFLOW, "dags", "test", "lake_xcom_test", "2024-03-01"], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        rows = db.execute("SELECT task_id, value FROM xcom WHERE dag_id = 'lake_xcom_test' AND key = 'return_value'")
        xcom = {task: json.loads(value) for task, value in rows}
    plan, execute, replan = xcom["plan"], xcom["execute"], xcom["replan"]
    assert plan["plan_id"] is not None and plan["noop"] is False and plan["existing_plan"] is False
    assert (execute["plan_id"], execute["noop"], execute["already_committed"]) == (plan["plan_id"], False, False)
    assert (replan["plan_id"], replan["noop"]) == (None, True) and replan["reason"].startswith("0 commit(s)")
    assert pending_plans(LakeTable.open(path)) == []
