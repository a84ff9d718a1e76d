"""A real Airflow for tests: `airflow api-server`, `scheduler`, `dag-processor` and `triggerer` as separate
processes (SQLite, LocalExecutor, small parallelism), and a REST client logged in as the UI's admin would be.

    with AirflowStack(tmp_path / "airflow", env) as stack:
        stack.api.patch("/api/v2/dags/my_dag", json={"is_paused": False})

Every process runs in its own process group and is stopped by its PID on exit, also when the test fails.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


_MIGRATED: list[Path] = []  # this process's migrated database, the template of the others


def migrate_db(env: Mapping[str, str]) -> None:
    """What `airflow db migrate` gives env's AIRFLOW_HOME (a SQLite database at the newest revision): a copy of
    one database migrated once per test process (a migration costs 3 CPU-s, a copy nothing)."""
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    if any(key.startswith("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN") for key in env):  # not the home's SQLite file
        subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, timeout=300, check=True)
        return
    if not _MIGRATED:
        template = Path(tempfile.mkdtemp(prefix="airflow-lake-db-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        subprocess.run([AIRFLOW, "db", "migrate"], env={**env, "AIRFLOW_HOME": str(template)}, capture_output=True,
                       timeout=300, check=True)
        _MIGRATED.append(template / "airflow.db")
    shutil.copyfile(_MIGRATED[0], home / "airflow.db")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AirflowStack:
    """Airflow's components as processes under `home`; `api` is an authenticated client once started."""

    def __init__(self, home: Path, env: Mapping[str, str], components: tuple[str, ...] = COMPONENTS) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4", "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__BASE_URL": self.url, "AIRFLOW__API__PORT": str(self.port), "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": "airflow-lake-tests-only",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS",
                                                                "admin:admin"),
            # a DAG file is parsed when the dag-processor first sees it, not again every few seconds: the tests'
            # DAG files do not change while they run (a re-parse every 5 s cost 2 CPU-s a minute)
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5", "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2", "AIRFLOW__TRIGGERER__CAPACITY": "10",
        }
        self.components = components
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.api = httpx.Client(base_url=self.url, timeout=30)

    def __enter__(self) -> AirflowStack:
        self.home.mkdir(parents=True, exist_ok=True)
        migrate_db(self.env)
        try:
            for name in self.components:
                args = [AIRFLOW, name, *(["--port", str(self.port)] if name == "api-server" else [])]
                log = open(self.home / f"{name}.log", "wb")
                self.procs[name] = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                    start_new_session=True)
            self.wait(self._healthy, 120, "the api-server to answer")
            self.api.headers["Authorization"] = f"Bearer {self.token()}"
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _healthy(self) -> bool:
        self.check_alive()
        try:
            return httpx.get(f"{self.url}/api/v2/monitor/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def token(self, username: str = "admin") -> str:
        """A JWT for `username`, as the UI's login form gets one (password from the generated file)."""
        passwords = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
        response = httpx.post(f"{self.url}/auth/token", json={"username": username, "password": passwords[username]},
                              timeout=30)
        assert response.status_code in (200, 201), response.text
        return str(response.json()["access_token"])

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"airflow {name} exited with {proc.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, chars: int = 4000) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def wait(self, condition: Callable[[], Any], timeout: float, what: str, every: float = 0.5) -> Any:
        """Poll `condition` until it returns something truthy; fail naming `what` with the components' logs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(every)
        logs = "\n".join(f"--- {n}\n{self.log_tail(n, 2500)}" for n in self.procs)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}")

    def stop(self) -> None:
        """SIGTERM every component's process group, then SIGKILL what is left after 20 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # children (task supervisors, spark-submits) too
            proc.wait()
        self.api.close()
