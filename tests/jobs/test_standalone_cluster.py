"""The runner on a real Spark standalone cluster (master + worker started here), not only local[*]."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from airflow_lake.hooks.lake import LakeHook
from airflow_lake.lake import LakeTable
from tests.support import start_submit, table_ids, write_source

pytestmark = pytest.mark.slow
SPARK_CLASS = str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def master_state(web_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as response:
        return dict(json.load(response))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A standalone master and one worker (2 cores, 2 GiB) on loopback; yields (master URL, web UI port)."""
    work = tmp_path_factory.mktemp("spark-cluster")
    port, web, worker_web = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(work / "work"),
           "SPARK_LOG_DIR": str(work)}
    procs = [subprocess.Popen([SPARK_CLASS, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(web)],
                              env=env, stdout=open(work / "master.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
                              start_new_session=True)]
    url = f"spark://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                master_state(web)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError((work / "master.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        procs.append(subprocess.Popen([SPARK_CLASS, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--webui-port", str(worker_web), "--cores", "2", "--memory", "2g", url],
                                      env=env, stdout=open(work / "worker.log", "wb"),  # noqa: SIM115
                                      stderr=subprocess.STDOUT, start_new_session=True))
        while master_state(web).get("aliveworkers", 0) < 1:
            if time.monotonic() > deadline:
                raise AssertionError((work / "worker.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url, web
    finally:
        for proc in reversed(procs):
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_runner_through_spark_submit_on_the_cluster(spark: Any, cluster: tuple[str, int], table_path: str,
                                                    tmp_path: Path) -> None:
    url, web = cluster
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                  "bucket": {"columns": ["id"], "count": 4}})
    source = write_source(tmp_path / "a.parquet", range(1000), ["a", "b"] * 500)
    proc = start_submit("write", {"table": table_path, "source": {"path": source}}, master=url,
                        log=tmp_path / "submit.log")
    assert proc.wait(timeout=300) == 0, (tmp_path / "submit.log").read_text()[-4000:]
    table = LakeTable.open(table_path)
    assert table_ids(spark, table_path) == list(range(1000))
    assert len(table.snapshot().files) == 8  # 2 partitions x 4 buckets, written by the cluster's executors
    apps = master_state(web)["completedapps"]
    assert any("write" in app["name"] for app in apps)  # it really ran on this master


def test_lake_hook_submits_to_the_cluster(spark: Any, cluster: tuple[str, int], table_path: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    url, web = cluster
    host, port = url.rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": host,
                                                                  "port": int(port)}))
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    source = write_source(tmp_path / "a.parquet", range(50), "x")
    metrics = LakeHook("spark_cluster").submit("write", {"table": table_path, "source": {"path": source}})
    assert metrics["rows_added"] == 50 and metrics["files_added"] >= 1
    entry = LakeTable.open(table_path).find_request(metrics["request_id"])
    assert entry is not None and entry.instant == metrics["instant"] and entry.metrics["rows_added"] == 50
    assert table_ids(spark, table_path) == list(range(50))
    assert sum(1 for app in master_state(web)["completedapps"] if "airflow-lake write" in app["name"]) >= 1
