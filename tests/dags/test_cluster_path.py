"""The cluster path: a Spark standalone master and two workers started as local processes (the commands the
compose services run), and the example pipeline run against spark://127.0.0.1:<port> through Airflow; its
jobs run on the cluster and its DM table equals the independent computation (which the local-mode run of
tests/dags/test_ods_to_dm.py equals too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pandas as pd
import pyspark
import pytest

from airflow_lake.datagen import video
from airflow_lake.lake import LakeTable
from tests.airflow_stack import free_port
from tests.dags import video_oracle
from tests.dags.test_ods_to_dm import AIRFLOW, airflow_env, dags_test, results

SPARK_CLASS = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
EVENTS = 2000


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:  # the process keeps its own copy of the file
        return subprocess.Popen([SPARK_CLASS, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _alive_workers(ui: int) -> int:
    try:
        return int(httpx.get(f"http://127.0.0.1:{ui}/json/", timeout=5).json().get("aliveworkers", 0))
    except (httpx.HTTPError, ValueError):
        return 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """A master and two one-core workers on loopback; stopped by their PIDs at the end."""
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(tmp_path / "work")}
    procs = []
    try:
        procs.append(_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                             "--webui-port", str(ui)], env, tmp_path / "master.log"))
        for i in (1, 2):
            procs.append(_start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port",
                                 str(free_port()), "--cores", "1", "--memory", "1g", f"spark://127.0.0.1:{port}"],
                                env, tmp_path / f"worker-{i}.log"))
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 2 and time.monotonic() < deadline:
            time.sleep(1)
        assert _alive_workers(ui) == 2, (tmp_path / "master.log").read_text()[-3000:]
        yield f"{port} {ui}"
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


@pytest.mark.slow
def test_the_example_pipeline_runs_on_a_standalone_cluster(tmp_path: Path, cluster: str) -> None:
    port, ui = cluster.split()
    env = {**airflow_env(tmp_path),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                     "port": int(port)})}
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, timeout=300, check=True)
    log = dags_test(env, "lake_ods_to_dm", "2024-01-01", {"events_per_day": EVENTS})
    submitted = [m for m in results(log) if m["operation"] in ("write", "versioned_upsert")]
    assert len(submitted) == 8 and "--master spark://127.0.0.1:" + port in log, log[-3000:]
    apps = httpx.get(f"http://127.0.0.1:{ui}/json/", timeout=5).json()["completedapps"]
    assert len(apps) >= 8 and all(a["cores"] >= 1 for a in apps), apps  # executors on the workers ran them
    expected = video_oracle.pipeline([("2024-01-01", [])], video.Sizes(events=EVENTS))["dm_work_7d"]
    cols = ["work_id", "category", "author_id", "plays_7d", "likes_7d", "play_ms_7d", "active_days", "dt"]
    got = LakeTable.open(str(tmp_path / "lake" / "dm_work_7d")).to_arrow().to_pandas()[cols]
    pd.testing.assert_frame_equal(got.sort_values("work_id").reset_index(drop=True),
                                  expected[cols].sort_values("work_id").reset_index(drop=True), check_dtype=False)
