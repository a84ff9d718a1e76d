"""`--json` on every `airflow-lake` command, run as a user runs it (the installed command, a process of its own):
stdout holds exactly one JSON document and nothing else, on success and on an error."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import build_parser
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from tests.airflow_stack import free_port
from tests.lake.lake_core_helpers import append, backdate
from tests.support import write_source

AIRFLOW_LAKE = str(Path(sys.executable).with_name("airflow-lake"))


def cli_json(*argv: str, code: int = 0) -> Any:
    """Run the installed command with --json; its stdout parsed as one JSON document (json.loads refuses more)."""
    done = subprocess.run([AIRFLOW_LAKE, *argv, "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout)


def test_every_metadata_command_prints_one_json_document(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    table = LakeTable.create(str(root / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                                "properties": {"heartbeat.interval.seconds": "0.2",
                                                               "heartbeat.timeout.seconds": "1"}})
    _, (first,) = append(table, "a", disk=True)
    for _ in range(4):
        append(table, "b", disk=True)
    plan = run(None, "schedule_clustering", {"table": table.url})["plan_id"]
    orphan = Path(table.storage.path("dt=a/lost.parquet"))
    orphan.write_bytes(b"x")
    os.utime(orphan, (time.time() - 400 * 3600,) * 2)
    url = table.url

    assert [t["path"] for t in cli_json("ls", str(root))["tables"]] == ["t"]
    assert cli_json("timeline", url)["instants"][-1]["id"] == plan
    assert cli_json("files", url)["totals"]["files"] == 5
    assert cli_json("show", url)["effective_properties"]["health.small_file_share"] == "0.5"
    assert cli_json("plans", url)["plans"][0]["partitions_detail"][0]["name"] == "dt=b"
    # (the files of these commits are dummies: their changes cannot be read, which the error says)
    assert "cannot be read" in cli_json("changes", url, "--from", "0", code=2)["error"]
    assert cli_json("changes", url, "--from", "1", "--to", "1")["commits"] == []
    assert cli_json("remove-orphan-files", url, "--dry-run")["orphans"] == ["dt=a/lost.parquet"]
    assert cli_json("vacuum", url)["files_deleted"] == 1  # (the old name: its note goes to stderr)
    dead = table.begin("commit", "write")
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)
    assert cli_json("rollback-pending", url)["rolled_back"] == [dead.instant]
    assert cli_json("rollback", url, plan)["rolled_back"] == [plan]
    assert cli_json("alter", url, "--add", "note STRING")["columns"][-1] == {"name": "note", "type": "string"}
    restored = cli_json("restore", url, "--to", "1")
    assert restored["committed"] is True and restored["removed"]
    assert cli_json("clean", url)["committed"] is False  # the removed files are within the retention
    cleaned = cli_json("clean", url, "--retain-hours", "0", "--force")
    assert cleaned["committed"] is True and cleaned["files_deleted"] == 4
    assert [f.path for f in LakeTable.open(url).snapshot().files] == [first.path]

    # errors: one JSON document too (the message also on stderr), exit code 2
    assert cli_json("show", str(tmp_path / "none"), code=2)["error"].startswith("no lake table at ")
    assert "is neither a sequence number nor an instant id" in cli_json("files", url, "--as-of", "x", code=2)["error"]
    usage = cli_json("timeline", url, "--limit", "-1", code=2)
    assert usage["exit_code"] == 2 and "--limit" in usage["error"]


def test_every_command_takes_json() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        assert any("--json" in action.option_strings for action in parser._actions), name


@pytest.mark.slow
def test_delete_prints_one_json_document_though_spark_runs(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "users"), {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    run(spark, "write", {"table": table.url, "source": {"path": write_source(tmp_path / "0.parquet", list(range(10)),
                                                                              "d1")}})
    done = cli_json("delete", table.url, "--where", "id < 3")
    assert (done["rows_deleted"], done["seq"]) == (3, 2)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_connect_server_prints_its_address_as_json_and_logs_to_stderr(tmp_path: Path) -> None:
    port = free_port()
    with open(tmp_path / "stderr.log", "wb") as err:
        proc = subprocess.Popen([AIRFLOW_LAKE, "connect-server", "--port", str(port), "--json",
                                 "--conf", "spark.ui.enabled=false"], stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first == {"url": f"sc://127.0.0.1:{port}", "host": "127.0.0.1", "port": port, "master": "local[2]"}
        deadline = time.monotonic() + 180
        while not listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.log").read_text()
            time.sleep(0.5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.stdout.read() == b""  # the server's own output went to stderr
    assert "Spark Connect server on" in (tmp_path / "stderr.log").read_text()
