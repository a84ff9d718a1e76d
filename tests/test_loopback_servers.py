"""README "Running Airflow on loopback": with the flags it shows, Airflow's processes listen on 127.0.0.1 only, a
task of a lake operator runs through the execution API on a port other than 8080, and its log reaches the REST API
without the log servers. (What Airflow does without `--skip-serve-logs` — a log server on every interface — is
Airflow's own default, not tested here.)"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.airflow_stack import AIRFLOW, AirflowStack, free_port

DAG_ID = "loopback_create"
DAG = f'''
import pendulum
from airflow.sdk import DAG
from airflow_lake.operators.create_table import LakeCreateTableOperator

with DAG("{DAG_ID}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    LakeCreateTableOperator(task_id="create", table="{{{{ params.table }}}}", schema="id BIGINT, dt STRING",
                            partition_by=["dt"], params={{"table": ""}})
'''
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket of these processes and their children."""
    found: set[tuple[str, int]] = set()
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    found |= {(c.laddr.ip, c.laddr.port) for c in proc.net_connections(kind="tcp")
                              if c.status == psutil.CONN_LISTEN}
    return found


def env_for(tmp_path: Path) -> dict[str, str]:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "loopback.py").write_text(DAG)
    # the log servers' ports: free ones, so that this test never meets another Airflow on the machine
    return {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())}


@pytest.mark.timeout(600)
def test_readme_loopback_flags(tmp_path: Path) -> None:
    stack = AirflowStack(tmp_path / "airflow", env_for(tmp_path), components=())
    assert stack.port != 8080
    # the README's line for another port; AirflowStack's own env sets it too: set here as the README says
    stack.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://127.0.0.1:{stack.port}/execution/"
    stack.env.pop("AIRFLOW__API__BASE_URL")  # not needed for this
    commands = {"api-server": ["--host", "127.0.0.1", "--port", str(stack.port)],
                "scheduler": ["--skip-serve-logs"], "triggerer": ["--skip-serve-logs"], "dag-processor": []}
    stack.home.mkdir(parents=True)
    subprocess.run([AIRFLOW, "db", "migrate"], env=stack.env, capture_output=True, timeout=300, check=True)
    try:
        for name, flags in commands.items():
            with open(stack.home / f"{name}.log", "wb") as output:  # the child keeps its own descriptor
                stack.procs[name] = subprocess.Popen([AIRFLOW, name, *flags], env=stack.env, stdout=output,
                                                     stderr=subprocess.STDOUT, start_new_session=True)
        stack.wait(stack._healthy, 180, "the api-server to answer")
        stack.api.headers["Authorization"] = f"Bearer {stack.token()}"
        stack.wait(lambda: stack.api.get(f"/api/v2/dags/{DAG_ID}").status_code == 200, 180, "the DAG to be parsed")
        assert stack.api.patch(f"/api/v2/dags/{DAG_ID}", json={"is_paused": False}).status_code == 200
        table = tmp_path / "lake" / "t"
        response = stack.api.post(f"/api/v2/dags/{DAG_ID}/dagRuns",
                                  json={"logical_date": None, "conf": {"table": str(table)}})
        assert response.status_code == 200, response.text
        run_id = response.json()["dag_run_id"]
        run = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}"
        state = stack.wait(lambda: (s := stack.api.get(run).json()["state"]) in ("success", "failed") and s, 300,
                           "the run to finish")
        assert state == "success", stack.log_tail("scheduler")
        assert (table / "_lake" / "log").is_dir()  # the task ran, and reported through the execution API
        log = stack.api.get(f"{run}/taskInstances/create/logs/1", headers={"Accept": "application/json"})
        # read from the log file by the api-server itself: no log server was running
        assert log.status_code == 200 and "AIRFLOW_LAKE_METRICS" in log.text, log.text[-2000:]

        sockets = listening([p.pid for p in stack.procs.values()])
        assert ("127.0.0.1", stack.port) in sockets
        assert {ip for ip, _ in sockets} <= LOOPBACK, sockets
    finally:
        stack.stop()

