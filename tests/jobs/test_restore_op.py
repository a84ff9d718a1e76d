"""The `restore` operation through the job runner: its spec, retries, dry runs, and SIGKILL mid-restore (the runner as
a real process; restore needs no Spark, so it runs as `python -m airflow_lake.jobs`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.command_line import main as runner_main
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format.instants import COMPLETED, INFLIGHT, ROLLED_BACK, pending
from airflow_lake.lake.format.log import LogEntry
from tests.lake.lake_core_helpers import FAST, append, live_paths, make_table
from tests.support import wait_for_file


def history(path: str) -> tuple[LakeTable, LogEntry]:
    """Two loads; the second is the bad one. Returns the table and the good load's entry."""
    table = make_table(path)
    good, _ = append(table, "a", files=2, disk=True)
    append(table, "b", disk=True)
    return table, good


def test_restore_spec_retry_and_noop(table_path: str) -> None:
    table, good = history(table_path)
    spec = {"table": table_path, "to_instant": good.instant, "request_id": "dag/undo/run1/-1"}
    dry = run(None, "restore", {**spec, "dry_run": True})
    assert (dry["noop"], dry["dry_run"], dry["files_would_remove"], dry["files_would_readd"]) == (True, True, 1, 0)
    assert len(dry["removed"]) == 1 and dry["readded"] == [] and table.commit_log.head() == 2

    first = run(None, "restore", spec)
    assert (first["action"], first["seq"], first["files_removed"], first["restored_to_seq"]) == ("restore", 3, 1, 1)
    assert first["already_committed"] is False and live_paths(table) == live_paths(table, 1)
    again = run(None, "restore", spec)  # the Airflow retry
    assert again == {**first, "already_committed": True} and table.commit_log.head() == 3
    with pytest.raises(LakeSpecError, match="already belongs to"):  # the same id for another target: refused
        run(None, "restore", {**spec, "to_instant": None, "to_seq": 0})
    noop = run(None, "restore", {"table": table_path, "to_seq": "3"})  # a rendered template gives text
    assert noop["noop"] is True and "already equals snapshot 3" in noop["reason"] and "seq" not in noop


@pytest.mark.parametrize(("spec", "field"), [
    ({}, "to_seq"),
    ({"to_seq": 1, "to_timestamp": 5}, "to_timestamp"),
    ({"to_seq": "one"}, "to_seq"),
    ({"to_instant": 20260101000000000}, "to_instant"),
    ({"to_timestamp": True}, "to_timestamp"),
    ({"to_seq": 1, "dry_run": "no"}, "dry_run"),
    ({"to_seq": 1, "retain_hours": 1}, "retain_hours"),
])
def test_bad_specs_are_refused_before_anything_runs(table_path: str, spec: dict[str, Any], field: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    history(table_path)
    with pytest.raises(LakeSpecError) as caught:
        run(None, "restore", {"table": table_path, **spec})
    assert caught.value.field == field
    assert runner_main(["restore", "--spec", json.dumps({"table": table_path, **spec})]) == 2  # exit code 2
    assert LakeTable.open(table_path).commit_log.head() == 2


@pytest.mark.parametrize("point", ["after_request", "before_commit", "after_commit"])
def test_sigkill_mid_restore_leaves_the_table_as_before_and_the_retry_finishes(table_path: str, tmp_path: Path,
                                                                               point: str) -> None:
    table, good = history(table_path)
    before = live_paths(table)
    spec = {"table": table_path, "to_seq": good.seq, "request_id": "dag/undo/run1/-1"}
    flag = tmp_path / "reached"
    proc = subprocess.Popen([sys.executable, "-m", "airflow_lake.jobs", "restore", "--spec", json.dumps(spec)],
                            env={**os.environ, "AIRFLOW_LAKE_FAULT_POINT": point, "AIRFLOW_LAKE_FAULT_FLAG": str(flag)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for_file(flag, proc, timeout=120)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)

    table = LakeTable.open(table_path)
    killed = [i for i in table.timeline() if i.operation == "restore"]
    assert len(killed) == 1
    if point == "after_commit":  # the entry had landed: restored; only tidying up was lost
        assert killed[0].state == COMPLETED and live_paths(table) == live_paths(table, good.seq)
    else:
        assert killed[0].state != COMPLETED and live_paths(table) == before  # exactly as before
    time.sleep(float(FAST["heartbeat.timeout.seconds"]) + 0.5)  # the killed writer's heartbeat goes stale

    retry = run(None, "restore", spec)

    table = LakeTable.open(table_path)
    assert retry["already_committed"] is (point == "after_commit")
    assert live_paths(table) == live_paths(table, good.seq)
    states = [i.state for i in table.timeline() if i.operation == "restore"]
    assert states == ([COMPLETED] if point == "after_commit" else [ROLLED_BACK, COMPLETED])
    assert pending(table.storage) == [] and INFLIGHT not in states
