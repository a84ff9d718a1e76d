"""Clustering in Airflow: operator specs, and a DAG sensor -> schedule -> execute run by `airflow dags test`
(real scheduler code, real spark-submit, a real deferral). The sensor and its trigger alone: tests/sensors/,
tests/triggers/."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from tests.airflow_stack import migrate_db
from tests.lake.lake_core_helpers import append, make_table
from tests.support import write_source

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def test_schedule_operator_builds_its_spec() -> None:
    op = ScheduleClusteringOperator(task_id="plan", table="/lake/t", layout="zorder", sort_columns="x, y",
                                    curve="direct", min_commits="{{ params.n }}", filter_mode="recent_days",
                                    lookback_partitions=3)
    op.min_commits = "6"  # as rendered
    assert op.build_spec({}) == {  # type: ignore[arg-type]
        "min_commits": 6, "filter_mode": "RECENT_DAYS", "lookback_partitions": 3, "layout": "ZORDER",
        "sort_columns": ["x", "y"], "curve": "DIRECT"}
    assert {"table", "min_commits", "partitions", "layout", "sort_columns"} <= set(op.template_fields)
    assert op.operation == "schedule_clustering" and "hook" not in op.__dict__


def test_day_rolling_takes_the_hour_of_the_logical_date_in_the_zone() -> None:
    op = ScheduleClusteringOperator(task_id="plan", table="/t", filter_mode="DAY_ROLLING", timezone="Asia/Shanghai")
    context = {"logical_date": pendulum.datetime(2024, 3, 1, 22, 30, tz="UTC")}
    spec = op.build_spec(context)  # type: ignore[arg-type]
    assert spec["filter_mode"] == "DAY_ROLLING" and spec["hour"] == 6  # 22:30 UTC is 06:30 in Shanghai


def test_execute_operator_takes_a_plan_id_or_which() -> None:
    op = ExecuteClusteringOperator(task_id="run", table="/t", plan_id="20240301000000000")
    assert op.build_spec({}) == {"parallelism": 4, "plan_id": "20240301000000000"}  # type: ignore[arg-type]
    left_out = ExecuteClusteringOperator(task_id="run", table="/t", which="all", parallelism=2)
    assert left_out.build_spec({}) == {"parallelism": 2, "which": "all"}  # type: ignore[arg-type]
    assert left_out.nothing_to_do({"table": "/t", **left_out.build_spec({})}) is None  # type: ignore[arg-type]
    for empty in ("", "None", "{{ ti.xcom_pull(task_ids='plan')['plan_id'] }}"):  # a run without a plan
        op = ExecuteClusteringOperator(task_id="run", table="/t", plan_id=empty, which="all", parallelism=2)
        op.plan_id = "None" if "{{" in empty else empty  # as rendered
        nothing = op.nothing_to_do({"table": "/t", **op.build_spec({})})  # type: ignore[arg-type]
        assert nothing is not None and nothing.field == "plan_id"  # runs nothing: never `which` ("all")
        assert nothing.reason.startswith("plan_id is empty")


DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.sensors.commit_count import CommitCountSensor

TABLE = {table!r}
with DAG("lake_clustering_test", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False):
    poke = CommitCountSensor(task_id="poke", table=TABLE, min_commits=4, mode="poke", poke_interval=1, timeout=120)
    wait = CommitCountSensor(task_id="wait", table=TABLE, min_commits=5, since="start", deferrable=True,
                             poke_interval=1, timeout=600)
    plan = ScheduleClusteringOperator(task_id="plan", table=TABLE, layout="HILBERT", sort_columns=["id", "v"])
    execute = ExecuteClusteringOperator(task_id="execute", table=TABLE,
                                        plan_id="{{{{ ti.xcom_pull(task_ids='plan')['plan_id'] }}}}")
    replan = ScheduleClusteringOperator(task_id="replan", table=TABLE)
    never = EmptyOperator(task_id="never")
    poke >> wait >> plan >> execute >> replan >> never
'''


@pytest.mark.slow
def test_sensor_schedule_execute_dag_in_airflow_dags_test(spark: Any, tmp_path: Path) -> None:
    table_path = str(tmp_path / "lake" / "events")
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    for i in range(4):
        run(spark, "write", {"table": table_path, "source": {"path": write_source(
            tmp_path / f"{i}.parquet", list(range(i * 100, (i + 1) * 100)), ["d1", "d2"] * 50)}})
    before = sorted(LakeTable.open(table_path).to_arrow().to_pylist(), key=lambda r: r["id"])
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lake_clustering_test.py").write_text(DAG_FILE.format(table=table_path))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate_db(env)
    log_path = tmp_path / "dags-test.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([AIRFLOW, "dags", "test", "lake_clustering_test", "2024-03-01"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while "of 5 commit(s)" not in log_path.read_text(errors="replace"):  # the trigger is waiting
            assert proc.poll() is None, log_path.read_text()[-5000:]
            assert time.monotonic() < deadline, log_path.read_text()[-5000:]
            time.sleep(0.5)
        run(spark, "write", {"table": table_path, "source": {"path": write_source(
            tmp_path / "late.parquet", list(range(400, 500)), ["d1", "d2"] * 50)}})
        code = proc.wait(timeout=600)
    text = log_path.read_text(errors="replace")
    assert code == 0, text[-5000:]
    table = LakeTable.open(table_path)
    after = sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])
    late = [{"id": i, "dt": ["d1", "d2"][i % 2], "v": float(i)} for i in range(400, 500)]
    assert after == sorted(before + late, key=lambda r: r["id"])  # the same rows, plus the late commit
    clustering = [e for e in table.entries_since(0) if e.operation == "execute_clustering"]
    assert len(clustering) == 1 and clustering[0].metrics["files_before"] == 10
    assert clustering[0].metrics["curve_words"] == "jvm"  # the hook's spark-submit put our JVM code on the path
    assert {f.path for f in table.snapshot().files} == {f.path for f in clustering[0].added}  # 10 files -> 2
    assert len(clustering[0].added) == 2
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:  # the run's task states, as Airflow stored them
        by_task = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = 'lake_clustering_test'"))
    assert by_task == {"poke": "success", "wait": "success", "plan": "success", "execute": "success",
                       "replan": "success", "never": "skipped"}, by_task  # no plan: downstream skipped
    assert "No clustering plan: 0 commit(s) since the last clustering" in text


def test_the_schedule_step_bounds_a_backtracking_partition_regex_in_the_airflow_process(table_path: str) -> None:
    """The schedule operator runs its operation in the Airflow process (timeline only): `dt=(a|a)*c` took a
    minute there, with no time limit."""
    table = make_table(table_path)
    append(table, "a" * 30)
    for _ in range(3):
        append(table, "aaac")
    op = ScheduleClusteringOperator(task_id="plan", table=table_path, partition_regex="dt=(a|a)*c")
    started = time.monotonic()
    out = op.hook.submit(op.operation, {"table": table_path, **op.build_spec({}),  # type: ignore[arg-type]
                                        "request_id": "dag/plan/run1/-1"})
    assert time.monotonic() - started < 5 and out["plan_id"] and out["input_files"] == 3
    refused = ScheduleClusteringOperator(task_id="plan", table=table_path, partition_regex=r"dt=(a+)\1c")
    with pytest.raises(ValueError, match=r"partition_regex: .* backreference"):
        refused.hook.submit(refused.operation, {"table": table_path, **refused.build_spec({}),  # type: ignore[arg-type]
                                                "request_id": "dag/plan/run2/-1"})
