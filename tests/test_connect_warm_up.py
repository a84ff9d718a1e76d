"""`airflow-lake connect-server` warms its server up in a process of its own (`connect_warm_up`): a real warm-up
against the suite's Spark Connect server, the warm-up giving up on a server that is gone, and the command starting
it (or not, with `--no-warm-up`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake import connect_server as server_cli
from airflow_lake.connect_warm_up import main
from airflow_lake.hooks.connect import ConnectClient
from airflow_lake.hooks.package_zip import CACHE_ENV
from tests.airflow_stack import free_port


@pytest.mark.slow
def test_a_warm_up_runs_a_task_s_first_steps_leaves_nothing_and_spares_the_first_task_the_check(
        connect_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"  # this user's private directory, fresh: no check of this server remembered yet
    cache.mkdir(mode=0o700)
    before = set(Path(tempfile.gettempdir()).glob("airflow-lake-warm-up-*"))
    done = subprocess.run([sys.executable, "-m", "airflow_lake.connect_warm_up", connect_server.url, "--wait", "60"],
                          env={**os.environ, CACHE_ENV: str(cache)}, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done in" in done.stderr and "'python_job'" in done.stderr and "'lake_write'" in done.stderr, \
        done.stderr[-3000:]
    assert set(Path(tempfile.gettempdir()).glob("airflow-lake-warm-up-*")) == before
    # the workers' check it passed is remembered: this user's first task on the server (Airflow's URL) skips it
    checked: list[str] = []
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setattr(ConnectClient, "_check_workers", lambda self, spark, shipped: checked.append(self.url))
    client = ConnectClient(connect_server.url + "/", {})
    try:
        client.open()
    finally:
        client.close()
    assert checked == []


def test_a_warm_up_gives_up_when_its_server_is_gone(capsys: pytest.CaptureFixture[str]) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    started = time.monotonic()
    assert main([f"sc://127.0.0.1:{free_port()}", "--wait", "60", "--server-pid", str(gone.pid)]) == 0
    assert time.monotonic() - started < 10 and "not warmed up" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "expected"), [
    (["--port", "15999"], "sc://127.0.0.1:15999"),
    (["--host", "0.0.0.0"], "sc://127.0.0.1:15002"),
    (["--no-warm-up"], None),
])
def test_the_server_command_starts_the_warm_up_before_it_becomes_the_server(
        argv: list[str], expected: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, int]] = []
    monkeypatch.setattr(server_cli, "start_warm_up", lambda url, pid: started.append((url, pid)))
    monkeypatch.setattr(os, "execve", lambda *args: started.append(("execve", 0)))
    parser = argparse.ArgumentParser()
    server_cli.add_arguments(parser)
    server_cli.run(parser.parse_args(argv))
    assert started == ([(expected, os.getpid())] if expected else []) + [("execve", 0)]
