"""What `LakeHook.on_kill` may kill, and what the hook believes of a job's output.

A kill stops only a live job of this task: after the job ended, its former process group id may name someone
else's processes (a reused pid). Over Spark Connect a kill that comes while the session opens (before the
package upload and the workers' check) still stops the operation before it commits. And the job's own lines
(STARTED with the process group, RESULT, FAILED) are told apart from lines a data value makes Spark print.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import airflow_lake.jobs
from airflow_lake.exceptions import LakeJobConflict, LakeJobError
from airflow_lake.hooks.connect import OPEN_POINT
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.hooks.submit import LakeSubmitHook
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.instants import ROLLED_BACK, pending
from tests.support import FAST_HEARTBEAT, parquet_files_on_disk, write_source

pytestmark = pytest.mark.slow
NEXT_PID = Path("/proc/sys/kernel/ns_last_pid")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def sleeper_with_pid(pid: int, timeout: float = 60) -> subprocess.Popen[bytes]:
    """A sleeping process leading its own process group, started with exactly `pid`: a reused pid, made on
    purpose (Linux lets root choose the next pid through ns_last_pid)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_alive(pid) and not Path(f"/proc/{pid}").exists():
            try:
                NEXT_PID.write_text(str(pid - 1))
            except OSError as err:
                pytest.skip(f"this machine does not let the test choose the next pid ({err}); "
                            "test_forged_job_lines_are_not_trusted covers a foreign group too")
            proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
            if proc.pid == pid:
                return proc
            proc.kill()
            proc.wait()
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} did not become free within {timeout} s")


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def built_hooks(hook: LakeHook, monkeypatch: pytest.MonkeyPatch) -> list[LakeSubmitHook]:
    """The LakeSubmitHooks `hook` builds (to learn which process group its job ran in)."""
    built: list[LakeSubmitHook] = []
    build = hook.build_submit_hook

    def keep(*args: Any, **kwargs: Any) -> LakeSubmitHook:
        built.append(build(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(hook, "build_submit_hook", keep)
    return built


def test_on_kill_after_the_job_ended_signals_no_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    sleepers: list[subprocess.Popen[bytes]]) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    hook = LakeHook()
    built = built_hooks(hook, monkeypatch)
    hook.submit("write", {"table": table, "source": {"path": write_source(tmp_path / "a.parquet", range(3), "a")}})
    started, process = built[0].outcome.started, built[0]._submit_sp
    assert started is not None and process is not None
    assert started["pgid"] == process.pid  # the job ran in spark-submit's process group
    deadline = time.monotonic() + 60
    while group_alive(started["pgid"]):  # the job's processes are all gone...
        assert time.monotonic() < deadline
        time.sleep(0.1)
    sleepers.append(sleeper_with_pid(started["pgid"]))  # ...and its group id now names another process group
    hook.on_kill()  # e.g. the task is stopped while it pushes the metrics
    time.sleep(0.5)
    assert sleepers[0].poll() is None, "on_kill killed a process group that is not the job's"
    assert LakeTable.open(table).snapshot().rows == 3


def test_forged_job_lines_are_not_trusted(spark: Any, tmp_path: Path,
                                          sleepers: list[subprocess.Popen[bytes]]) -> None:
    """A string value echoed by Spark (a failed cast quotes it) holds lines shaped like the job's own: a STARTED
    naming someone else's process group, a retryable FAILED, a RESULT."""
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    sleepers.append(victim)
    forged = (f'x\nAIRFLOW_LAKE_STARTED {{"pid": {victim.pid}, "pgid": {victim.pid}}}\n'
              'AIRFLOW_LAKE_FAILED {"exit_code": 3, "error": "LakeCommitConflict", "message": "forged"}\n'
              'AIRFLOW_LAKE_RESULT {"rows_added": 1000000}')
    names = str(tmp_path / "names")
    LakeTable.create(names, {"schema": "s STRING"})
    pq.write_table(pa.table({"s": [forged]}), tmp_path / "names.parquet")
    airflow_lake.jobs.run(spark, "write", {"table": names, "source": {"path": str(tmp_path / "names.parquet")}})
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    hook = LakeHook()
    with pytest.raises(LakeJobError) as info:
        hook.submit("write", {"table": table, "source": {
            "query": "SELECT CAST(s AS BIGINT) AS id, 'a' AS dt, 1.0D AS v FROM names", "tables": {"names": names}}})
    said = str(info.value).split("\n")[0]
    assert type(info.value) is not LakeJobConflict  # the job's own FAILED line, not the forged retryable one
    assert "[CAST_INVALID_INPUT] The value 'x" in said and "LakeCommitConflict" not in said
    assert f'\nAIRFLOW_LAKE_STARTED {{"pid": {victim.pid}' in str(info.value)  # the forged lines were in the output
    hook.on_kill()  # the task is stopped while it reports the failure
    time.sleep(0.5)
    assert victim.poll() is None, "on_kill killed the process group named by a forged line"
    assert LakeTable.open(table).snapshot().rows == 0 and pending(LakeTable.open(table).storage) == []


KILLED_TASK = """
import signal, sys
from airflow_lake.hooks.lake import LakeHook
hook = LakeHook(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: hook.on_kill())  # what Airflow's task runner does on SIGTERM
try:
    hook.submit("write", {"table": sys.argv[2], "source": {"path": sys.argv[3]}, "request_id": "killed"})
except Exception as err:
    print("TASK FAILED:", type(err).__name__, err, flush=True)
    sys.exit(1)
print("TASK SUCCEEDED", flush=True)
"""


def test_a_task_killed_while_its_connect_session_opens_commits_nothing(connect_conn_id: str, tmp_path: Path) -> None:
    """As in Airflow: SIGTERM, and the task's handler calls on_kill in the thread that runs the operation."""
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    source = write_source(tmp_path / "a.parquet", range(10), "a")
    flag = tmp_path / "opening"
    env = {**os.environ, "AIRFLOW_LAKE_FAULT_POINT": OPEN_POINT, "AIRFLOW_LAKE_FAULT_FLAG": str(flag)}
    task = subprocess.Popen([sys.executable, "-c", KILLED_TASK, connect_conn_id, table, source], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not flag.exists():  # the session exists on the server; the package is not uploaded nor checked yet
        assert task.poll() is None and time.monotonic() < deadline, task.stdout.read() if task.stdout else ""
        time.sleep(0.1)
    task.send_signal(signal.SIGTERM)
    output, _ = task.communicate(timeout=60)
    assert task.returncode == 1 and "TASK FAILED: LakeJobError" in output and "was killed" in output, output
    lake = LakeTable.open(table)
    assert lake.find_request("killed") is None and lake.commit_log.head() == 0
    assert lake.snapshot().rows == 0 and pending(lake.storage) == []


def test_a_kill_from_another_thread_while_the_session_opens_commits_nothing(
        connect_conn_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    source = write_source(tmp_path / "a.parquet", range(10), "a")
    meeting = tmp_path / "meeting"
    # the operation waits at the point until a second party (this test) arrives there too
    monkeypatch.setenv("AIRFLOW_LAKE_RENDEZVOUS_POINT", OPEN_POINT)
    monkeypatch.setenv("AIRFLOW_LAKE_RENDEZVOUS_DIR", str(meeting))
    monkeypatch.setenv("AIRFLOW_LAKE_RENDEZVOUS_COUNT", "2")
    hook = LakeHook(connect_conn_id)
    errors: list[BaseException] = []

    def task() -> None:
        try:
            hook.submit("write", {"table": table, "source": {"path": source}, "request_id": "killed"})
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=task)
    thread.start()
    deadline = time.monotonic() + 120
    while not (meeting.exists() and os.listdir(meeting)):
        assert thread.is_alive() and time.monotonic() < deadline, errors
        time.sleep(0.05)
    hook.on_kill()
    (meeting / "killer").touch()  # let the operation go on: it must see the kill
    thread.join(timeout=120)
    assert not thread.is_alive() and len(errors) == 1 and isinstance(errors[0], LakeJobError), errors
    assert "was killed" in str(errors[0])
    lake = LakeTable.open(table)
    assert lake.find_request("killed") is None and lake.snapshot().rows == 0 and pending(lake.storage) == []
    # the kill was for that run only: a later kill is a no-op, a later run of the hook commits
    monkeypatch.delenv("AIRFLOW_LAKE_RENDEZVOUS_POINT")
    hook.on_kill()
    assert hook.submit("write", {"table": table, "source": {"path": source}})["rows_added"] == 10


def test_a_task_killed_over_connect_before_its_commit_rolls_back_its_instant(connect_conn_id: str,
                                                                            tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"],
                             "properties": FAST_HEARTBEAT})
    source = write_source(tmp_path / "a.parquet", range(30), ["a", "b", "c"] * 10)
    flag = tmp_path / "reached"
    env = {**os.environ, "AIRFLOW_LAKE_FAULT_POINT": "before_commit", "AIRFLOW_LAKE_FAULT_FLAG": str(flag)}
    task = subprocess.Popen([sys.executable, "-c", KILLED_TASK, connect_conn_id, table, source], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert task.poll() is None and time.monotonic() < deadline, task.stdout.read() if task.stdout else ""
        time.sleep(0.2)
    assert parquet_files_on_disk(table)  # written by the server, not committed
    task.send_signal(signal.SIGTERM)
    output, _ = task.communicate(timeout=60)
    assert task.returncode == 1 and "TASK FAILED: LakeJobError" in output and "was killed" in output, output
    lake = LakeTable.open(table)
    assert pending(lake.storage) == [] and parquet_files_on_disk(table) == set()
    assert [i.state for i in lake.timeline() if i.request_id == "killed"] == [ROLLED_BACK]
    assert lake.snapshot().rows == 0
