"""The low-end smoke: what a user of the oldest Airflow and PySpark we support meets first. `.ci/lowend` runs it in
a venv of the lowest supported versions (constraints-lowend.txt); it passes on the pinned set (constraints.txt)
too. The example DAGs parse and serialize; one DAG run by `airflow dags test` creates two tables, writes through
spark-submit, upserts twice out of order (over Spark Connect, and in the task with pyarrow, without Spark) and
clusters over Spark Connect, with a deferrable sensor in between whose trigger waits for a commit this test makes
while the run is deferred, and a schedule step without a plan that skips its downstream task."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from tests.conftest import ROOT
from tests.connect_server import ConnectServer
from tests.support import write_source

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAG_ID = "lake_lowend_smoke"

DAG_FILE = '''
import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator
from airflow_lake.sensors.commit_count import CommitCountSensor

EVENTS, USERS, LANDING, CONNECT = {events!r}, {users!r}, {landing!r}, "spark_connect_smoke"
with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False):
    create_events = LakeCreateTableOperator(task_id="create_events", table=EVENTS,
                                            schema="id BIGINT, dt STRING, v DOUBLE", partition_by=["dt"])
    create_users = LakeCreateTableOperator(task_id="create_users", table=USERS,
                                           schema="id BIGINT NOT NULL, dt STRING, v DOUBLE", primary_key=["id"],
                                           bucket={{"columns": ["id"], "count": 4}})
    write = LakeWriteOperator(task_id="write", table=EVENTS, source_path=LANDING + "/events.parquet")  # spark-submit
    newer = VersionedUpsertOperator(task_id="upsert_newer", table=USERS, source_path=LANDING + "/users_v2.parquet",
                                    version=2, conn_id=CONNECT, in_process_max_bytes=0)  # on Spark, over Connect
    older = VersionedUpsertOperator(task_id="upsert_older", table=USERS, source_path=LANDING + "/users_v1.parquet",
                                    version=1, conn_id=CONNECT)  # small Parquet: in the task, without Spark
    wait = CommitCountSensor(task_id="wait", table=EVENTS, min_commits=2, since="start", deferrable=True,
                             poke_interval=1, timeout=600)
    plan = ScheduleClusteringOperator(task_id="plan", table=EVENTS, min_commits=2, layout="ZORDER",
                                      sort_columns=["id", "v"], conn_id=CONNECT)
    execute = ExecuteClusteringOperator(task_id="execute", table=EVENTS, conn_id=CONNECT,
                                        plan_id="{{{{ ti.xcom_pull(task_ids='plan')['plan_id'] }}}}")
    replan = ScheduleClusteringOperator(task_id="replan", table=EVENTS, min_commits=2)  # nothing new: no plan
    never = EmptyOperator(task_id="never")  # skipped by replan (Airflow 3.1: the standard provider's SkipMixin)
    [create_events, create_users] >> write >> newer >> older >> wait >> plan >> execute >> replan >> never
'''


def test_the_installed_versions_are_the_ones_asked_for() -> None:
    """`.ci/lowend` sets LAKE_EXPECT_VERSIONS to the low pins it installed: a resolver that quietly picked
    other versions would make this run prove nothing. pyspark and pyspark-client, when both are installed,
    must be one version (they share the `pyspark/` directory)."""
    import pyspark

    expected = json.loads(os.environ.get("LAKE_EXPECT_VERSIONS", "{}"))
    installed = {name: metadata.version(name) for name in expected}
    assert installed == expected
    try:
        client = metadata.version("pyspark-client")
    except metadata.PackageNotFoundError:
        client = None
    assert client in (None, metadata.version("pyspark")), (client, metadata.version("pyspark"))
    jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    assert len(jars) == 1 and f"-{pyspark.__version__}.jar" in jars[0].name, (pyspark.__version__, jars)


def test_the_example_dags_parse_and_serialize() -> None:
    """What the DAG processor does with dags/: import every file (no import errors) and serialize each DAG."""
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 3.1
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined,unused-ignore]
    from airflow.serialization import serialized_objects

    bag = DagBag(dag_folder=str(ROOT / "dags"))  # AIRFLOW__CORE__LOAD_EXAMPLES=False (tests/conftest.py)
    assert not bag.import_errors, bag.import_errors
    assert {"lake_ods_to_dm", "lake_maintenance"} <= set(bag.dags)
    serializer: Any = getattr(serialized_objects, "DagSerialization", None) \
        or serialized_objects.SerializedDAG  # type: ignore[attr-defined,unused-ignore]  # Airflow 3.1's name
    for dag_id, dag in bag.dags.items():
        assert serializer.to_dict(dag)["dag"]["dag_id"] == dag_id


def rows(path: str) -> list[dict[str, Any]]:
    return sorted(LakeTable.open(path).to_arrow().to_pylist(), key=lambda r: (r["id"], r["dt"]))


@pytest.mark.slow
def test_write_upsert_sensor_and_clustering_in_airflow_dags_test(tmp_path: Path,
                                                                 connect_server: ConnectServer) -> None:
    landing, events, users = tmp_path / "landing", str(tmp_path / "lake" / "events"), str(tmp_path / "lake" / "users")
    write_source(landing / "events.parquet", list(range(100)), ["d1", "d2"] * 50)
    write_source(landing / "users_v2.parquet", [1, 2, 3], "v2", value=2.0)
    write_source(landing / "users_v1.parquet", [2, 3, 4], "v1", value=1.0)  # older: loses keys 2 and 3
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / f"{DAG_ID}.py").write_text(DAG_FILE.format(events=events, users=users, landing=str(landing),
                                                       dag_id=DAG_ID))
    host, port = connect_server.url.rsplit(":", 1)
    connect = json.dumps({"conn_type": "spark_connect", "host": host, "port": int(port)})
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW_CONN_SPARK_CONNECT_SMOKE": connect}
    migrated = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300,
                              check=False)
    assert migrated.returncode == 0, (migrated.stdout + migrated.stderr)[-5000:]
    log_path = tmp_path / "dags-test.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([AIRFLOW, "dags", "test", DAG_ID, "2024-03-01"], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while "1 of 2 commit(s)" not in log_path.read_text(errors="replace"):  # the sensor is deferred
                assert proc.poll() is None, log_path.read_text(errors="replace")[-6000:]
                assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-6000:]
                time.sleep(0.5)
            late = write_source(landing / "late.parquet", list(range(100, 150)), "d1")
            # the commit the trigger waits for, made as an operator would: the hook, over Spark Connect
            from airflow_lake.hooks.lake import LakeHook

            os.environ["AIRFLOW_CONN_SPARK_CONNECT_SMOKE"] = connect
            LakeHook("spark_connect_smoke").submit("write", {"table": events, "source": {"path": late},
                                                             "request_id": "smoke-late"})
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log_path.read_text(errors="replace")
    assert code == 0, text[-6000:]
    assert f"Submitting write on {events}" in text, text[-6000:]  # the provider's SparkSubmitHook
    assert f"Running versioned_upsert on {users} over Spark Connect" in text, text[-6000:]  # its SparkConnectHook
    assert f"Running versioned_upsert on {users} in-process, without Spark" in text, text[-6000:]  # the older batch
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:  # the run's task states, as Airflow stored them
        states = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ?", (DAG_ID,)))
    assert states == {**{t: "success" for t in ("create_events", "create_users", "write", "upsert_newer",
                                                "upsert_older", "wait", "plan", "execute", "replan")},
                      "never": "skipped"}, states

    table = LakeTable.open(events)
    operations = [e.operation for e in table.entries_since(0)]
    assert operations.count("write") == 2 and operations[-1] == "execute_clustering", operations
    clustering = table.entries_since(0)[-1]
    assert clustering.metrics["files_before"] > clustering.metrics["files_after"], clustering.metrics
    want = [{"id": i, "dt": ["d1", "d2"][i % 2], "v": float(i)} for i in range(100)]
    want += [{"id": i, "dt": "d1", "v": float(i)} for i in range(100, 150)]
    assert rows(events) == sorted(want, key=lambda r: (r["id"], r["dt"]))
    # version 2 wins keys 2 and 3 although version 1 was upserted after it (a merged read, over Spark Connect)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(connect_server.url).getOrCreate()
    try:
        merged = sorted((r.asDict() for r in LakeTable.open(users).read(spark).collect()), key=lambda r: r["id"])
    finally:
        spark.stop()
    assert merged == [{"id": 1, "dt": "v2", "v": 2.0}, {"id": 2, "dt": "v2", "v": 4.0},
                           {"id": 3, "dt": "v2", "v": 6.0}, {"id": 4, "dt": "v1", "v": 4.0}]
