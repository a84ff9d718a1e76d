"""The cluster path: a Spark standalone master and two workers started as local processes (the commands the
compose services run), once for the module; the job runner submitted to spark://127.0.0.1:<port> as a plain
spark-submit, and the example pipeline run against it through Airflow: its jobs run on the cluster, each task's
metrics are the commit it made, and its DM table equals the independent computation (which the local-mode run
of tests/dags/test_ods_to_dm.py equals too). On S3: the runner submitted with the S3 connector's jars writes and
bucket-rewrites a table on the S3 server (tests/s3_server.py), its executors writing the data files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pandas as pd
import pyspark
import pytest

from airflow_lake.datagen import video
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.pyarrow_read import read_files
from tests.airflow_stack import free_port, migrate_db
from tests.dags import video_oracle
from tests.dags.test_ods_to_dm import airflow_env, dags_test, results
from tests.s3_server import S3Server
from tests.store_spark import s3_spark_args, s3a_conf
from tests.support import start_submit, table_ids, write_source

pytestmark = pytest.mark.slow
SPARK_CLASS = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
EVENTS = 2000
EXECUTORS_KEY = "executors"  # the S3 access key the executors sign with (the driver signs with the fixture's)


class Cluster(NamedTuple):
    url: str  # spark://127.0.0.1:<port>
    port: int
    ui: int  # the master's web UI (its /json/ state)


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:  # the process keeps its own copy of the file
        return subprocess.Popen([SPARK_CLASS, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def master_state(ui: int) -> dict[str, Any]:
    return dict(httpx.get(f"http://127.0.0.1:{ui}/json/", timeout=5).json())


def _alive_workers(ui: int) -> int:
    try:
        return int(master_state(ui).get("aliveworkers", 0))
    except (httpx.HTTPError, ValueError):
        return 0


def completed_apps(cluster: Cluster, before: set[str] | None = None) -> list[dict[str, Any]]:
    """The applications the master has seen complete (those not in `before`: ids)."""
    return [a for a in master_state(cluster.ui)["completedapps"] if a["id"] not in (before or set())]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and two one-core workers on loopback, for the module; stopped by their PIDs at the end."""
    work = tmp_path_factory.mktemp("spark-cluster")
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(work / "work"),
           "SPARK_LOG_DIR": str(work)}
    procs = []
    try:
        procs.append(_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                             "--webui-port", str(ui)], env, work / "master.log"))
        for i in (1, 2):
            procs.append(_start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port",
                                 str(free_port()), "--cores", "1", "--memory", "1g", f"spark://127.0.0.1:{port}"],
                                env, work / f"worker-{i}.log"))
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _alive_workers(ui) == 2, (work / "master.log").read_text()[-3000:]
        yield Cluster(f"spark://127.0.0.1:{port}", port, ui)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_runner_through_spark_submit_on_the_cluster(spark: Any, cluster: Cluster, table_path: str,
                                                    tmp_path: Path) -> None:
    before = {a["id"] for a in completed_apps(cluster)}
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                  "bucket": {"columns": ["id"], "count": 4}})
    source = write_source(tmp_path / "a.parquet", range(1000), ["a", "b"] * 500)
    proc = start_submit("write", {"table": table_path, "source": {"path": source}}, master=cluster.url,
                        log=tmp_path / "submit.log")
    assert proc.wait(timeout=300) == 0, (tmp_path / "submit.log").read_text()[-4000:]
    table = LakeTable.open(table_path)
    assert table_ids(spark, table_path) == list(range(1000))
    assert len(table.snapshot().files) == 8  # 2 partitions x 4 buckets, written by the cluster's executors
    apps = completed_apps(cluster, before)
    assert any("write" in app["name"] for app in apps), apps  # it really ran on this master


def test_the_example_pipeline_runs_on_a_standalone_cluster(tmp_path: Path, cluster: Cluster) -> None:
    """Through Airflow (`airflow dags test`): each task's LakeHook submits to the cluster (a `spark`
    connection with the master's host and port); what a task reports is the commit it made."""
    before = {a["id"] for a in completed_apps(cluster)}
    env = {**airflow_env(tmp_path),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                     "port": cluster.port})}
    migrate_db(env)
    log = dags_test(env, "lake_ods_to_dm", "2024-01-01", {"events_per_day": EVENTS})
    submitted = [m for m in results(log) if m["operation"] in ("write", "versioned_upsert")]
    assert len(submitted) == 6 and f"--master {cluster.url}" in log, log[-3000:]  # the writes, on the cluster
    # the two dimension upserts of small Parquet batches ran in their tasks, without Spark
    in_task = [json.loads(line.split("AIRFLOW_LAKE_METRICS ", 1)[1].rsplit("}", 1)[0] + "}")
               for line in log.splitlines() if "AIRFLOW_LAKE_METRICS " in line and '"versioned_upsert"' in line]
    assert len(in_task) == 2 and all(m["spark"] is False and m["rows"] > 0 for m in in_task), in_task
    for metrics in submitted:  # each task's metrics: those its commit recorded, under its request id
        entry = LakeTable.open(metrics["table"]).find_request(metrics["request_id"])
        assert entry is not None and entry.instant == metrics["instant"], metrics
        assert entry.metrics["rows_added"] == metrics["rows_added"] > 0 and metrics["files_added"] >= 1, metrics
    apps = completed_apps(cluster, before)
    assert len(apps) >= 6 and all(a["cores"] >= 1 for a in apps), apps  # executors on the workers ran them
    assert sum(1 for app in apps if "airflow-lake write" in app["name"]) >= 1, apps
    expected = video_oracle.pipeline([("2024-01-01", [])], video.Sizes(events=EVENTS))["dm_work_7d"]
    cols = ["work_id", "category", "author_id", "plays_7d", "likes_7d", "play_ms_7d", "active_days", "dt"]
    got = LakeTable.open(str(tmp_path / "lake" / "dm_work_7d")).to_arrow().to_pandas()[cols]
    pd.testing.assert_frame_equal(got.sort_values("work_id").reset_index(drop=True),
                                  expected[cols].sort_values("work_id").reset_index(drop=True), check_dtype=False)


def test_the_cluster_writes_and_rewrites_an_s3_table_through_s3a(cluster: Cluster, s3_server: S3Server,
                                                                 s3_root: str, tmp_path: Path) -> None:
    """The runner submitted to the cluster with the S3 connector's jars on the driver's and the executors' class
    path (`spark.executor.extraClassPath`: the worker runs on this machine, where the jars are) writes, then
    bucket-rewrites, a table on the S3 server: the executors write the data files (their requests are signed with a
    key only they hold), through the magic committer, without one COPY."""
    before = {a["id"] for a in completed_apps(cluster)}
    LakeTable.create(s3_root, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"],
                               "bucket": {"columns": ["id"], "count": 4}})
    source = write_source(tmp_path / "a.parquet", range(1000), ["a", "b"] * 500)
    conf = {**s3a_conf(s3_server), "spark.executorEnv.AWS_ACCESS_KEY_ID": EXECUTORS_KEY,
            "spark.executorEnv.AWS_SECRET_ACCESS_KEY": EXECUTORS_KEY,
            # each process signs with the key of its environment: the driver's (the fixture's) or the executors'
            "spark.hadoop.fs.s3a.aws.credentials.provider":
                "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"}
    for key in ("spark.hadoop.fs.s3a.access.key", "spark.hadoop.fs.s3a.secret.key"):
        del conf[key]
    extra = s3_spark_args(s3_server, conf)
    mark = s3_server.counter.mark()
    signed = s3_server.counter.signed()
    for operation, spec in [("write", {"table": s3_root, "source": {"path": source}}),
                            ("bucket_rewrite", {"table": s3_root, "bucket": {"columns": ["id"], "count": 8}})]:
        log = tmp_path / f"{operation}.log"
        proc = start_submit(operation, spec, master=cluster.url, log=log, extra=extra)
        assert proc.wait(timeout=300) == 0, log.read_text()[-4000:]

    table = LakeTable.open(s3_root)
    files = table.snapshot().files
    rows = read_files(table.storage, table.spec, files, ["id", "dt"])
    assert sorted(rows.column("id").to_pylist()) == list(range(1000))
    assert {(f.partition["dt"], f.bucket) for f in files} == {(dt, b) for dt in "ab" for b in range(8)}
    assert table.spec.bucket is not None and table.spec.bucket.count == 8
    counts = s3_server.counter.since(mark)
    assert counts[("COPY", "data")] == 0, counts  # nothing renamed: written once under final names
    by_executors = s3_server.counter.signed()
    by_executors.subtract(signed)
    # the executors initiated and uploaded the data files (the driver completes them at the job's commit)
    assert by_executors[(EXECUTORS_KEY, "PUT", "data")] > 0 and by_executors[(EXECUTORS_KEY, "POST", "data")] > 0
    names = [app["name"] for app in completed_apps(cluster, before)]  # both ran on this master
    assert any("airflow-lake write" in n for n in names) and any("bucket_rewrite" in n for n in names), names
