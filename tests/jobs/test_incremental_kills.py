"""Exactly-once consumption (issue 36, item 2) with real kills: incremental write jobs run by spark-submit and
SIGKILLed (the whole process group) before the query, before the commit (the files written) and after the commit
(no result printed: Airflow's XCom never sent), then retried in-process with the same request id after the
upstream moved on. After every story the downstream equals a full rebuild from the upstream's current snapshot.

(`test_incremental_jobs` raises at the same steps in-process, where the transaction aborts itself; here the dead
writer leaves its instant and files behind for the next one to recover.) The three consumers of one upstream are
started at once, each on its own downstream table: one JVM start's wait instead of three."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.instants import COMPLETED, INFLIGHT, ROLLED_BACK, pending
from tests.jobs.test_incremental_jobs import DOUBLED, SCHEMA, Lake, rows
from tests.support import FAST_HEARTBEAT, parquet_files_on_disk, start_submit, wait_for_file

pytestmark = pytest.mark.slow
TIMEOUT = float(FAST_HEARTBEAT["heartbeat.timeout.seconds"])
RESULT = "AIRFLOW_LAKE_RESULT"  # the line a job prints last when it succeeded (`jobs.protocol`)


def downstream(lake: Lake, name: str) -> str:
    """A downstream table whose dead writers look dead within seconds."""
    return LakeTable.create(str(lake.root / name), {"schema": SCHEMA, "partition_by": ["dt"],
                                                    "properties": FAST_HEARTBEAT}).url


def consume_spec(lake: Lake, down: str, request_id: str) -> dict[str, Any]:
    """The write job `Lake.consume` runs: `DOUBLED` over the upstream's changes, appended."""
    return {"table": down, "request_id": request_id,
            "source": {"query": DOUBLED, "incremental": [{"view": "ch", "table": lake.up.url}]}}


def kill_at(jobs: Mapping[str, tuple[dict[str, Any], str]], work: Path) -> None:
    """Start a write job under spark-submit per name (its spec, the fault point to stop at), all at once; SIGKILL
    each one's process group once it stands at its point."""
    started: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    try:
        for name, (spec, point) in jobs.items():
            flag = work / f"{name}.reached"
            env = {"AIRFLOW_LAKE_FAULT_POINT": point, "AIRFLOW_LAKE_FAULT_FLAG": str(flag)}
            started[name] = (start_submit("write", spec, env=env, log=work / f"{name}.log"), flag)
        for name, (proc, flag) in started.items():
            try:
                wait_for_file(flag, proc)
            except AssertionError as err:
                raise AssertionError(f"{name}: {err}\n{(work / f'{name}.log').read_text()[-3000:]}") from err
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    finally:  # a job that failed to get there is not left running
        for proc, _ in started.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)


def files_under(path: str) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file()}


def no_debris(path: str) -> None:
    """Only the live snapshot's data files are on disk; nothing pending, staged or marked."""
    table = LakeTable.open(path)
    assert pending(table.storage) == []
    assert parquet_files_on_disk(path) == {f.path for f in table.snapshot().files}
    assert not any(Path(path, "_lake", "markers").rglob("*"))
    assert not any(Path(path, "_lake", "staging").rglob("*"))


def requests_committed(path: str) -> list[str | None]:
    return [e.request_id for e in LakeTable.open(path).entries_since(-1) if e.action == "commit"]


def test_consumers_sigkilled_before_the_query_before_and_after_the_commit_then_retried(
        spark: Any, tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    lake.add(2)
    lake.add(2, "b")
    fresh, written, committed = (downstream(lake, n) for n in ("fresh", "written", "committed"))
    # two of them consumed before: their killed runs' windows start at a consumed position, not at -1
    first = {down: lake.consume(down, "r0")["incremental"]["ch"]["to"] for down in (written, committed)}
    head = lake.add(3)
    ident = lake.up.identity()
    fresh_before = files_under(fresh)
    written_live = rows(written)
    kill_at({"fresh": (consume_spec(lake, fresh, "r1"), "before_query"),
             "written": (consume_spec(lake, written, "r1"), "before_commit"),
             "committed": (consume_spec(lake, committed, "r1"), "after_commit")}, tmp_path)
    killed = time.monotonic()

    # before the query: the windows were fixed, nothing read, nothing of the job on disk (no instant, no position)
    assert files_under(fresh) == fresh_before and LakeTable.open(fresh).consumed() == {}
    # before the commit: the files are written, the instant is in flight, the table is as before
    table = LakeTable.open(written)
    dead = [p.id for p in pending(table.storage)]
    assert len(dead) == 1 and {i.id: i.state for i in table.timeline()}[dead[0]] == INFLIGHT
    assert rows(written) == written_live and table.consumed() == {ident: first[written]}
    assert parquet_files_on_disk(written) > {f.path for f in table.snapshot().files}  # its files: debris
    # after the commit: landed with its positions, and no result printed (the XCom a retry must answer)
    table = LakeTable.open(committed)
    entry = table.entries_since(-1)[-1]
    assert (entry.request_id, {i.id: i.state for i in table.timeline()}[entry.instant]) == ("r1", COMPLETED)
    assert table.consumed() == {ident: head} and rows(committed) == lake.rebuild()
    assert RESULT not in (tmp_path / "committed.log").read_text()

    lake.add(2)  # the upstream moves on before Airflow retries
    later = lake.add(1, "c")

    retry = lake.consume(fresh, "r1")  # the retry takes the whole upstream as it is now
    assert (retry["incremental"]["ch"]["from"], retry["incremental"]["ch"]["to"]) == (-1, later)
    assert rows(fresh) == lake.rebuild()
    no_debris(fresh)

    time.sleep(max(0.0, killed + TIMEOUT + 0.5 - time.monotonic()))  # the dead writer's heartbeat goes stale
    retry = lake.consume(written, "r1")  # its window from its consumed position to the upstream's head now
    assert (retry["incremental"]["ch"]["from"], retry["incremental"]["ch"]["to"]) == (first[written], later)
    assert rows(written) == lake.rebuild() and retry["rows_added"] == 3 + 2 + 1
    assert {i.id: i.state for i in LakeTable.open(written).timeline()}[dead[0]] == ROLLED_BACK
    assert requests_committed(written) == ["r0", "r1"]
    no_debris(written)

    before_retry = rows(committed)
    at = LakeTable.open(committed).commit_log.head()
    retry = lake.consume(committed, "r1")  # answered from the log: the killed run's result, nothing run again
    assert retry["already_committed"] is True and retry["incremental"]["ch"]["to"] == head
    assert LakeTable.open(committed).commit_log.head() == at and rows(committed) == before_retry
    assert LakeTable.open(committed).consumed() == {ident: head}
    following = lake.consume(committed, "r2")  # the next run: exactly the appends after the killed one's window
    assert (following["incremental"]["ch"]["from"], following["incremental"]["ch"]["to"]) == (head, later)
    assert following["rows_added"] == 2 + 1 and requests_committed(committed) == ["r0", "r1", "r2"]
    no_debris(committed)  # the tidying the killed run never did

    for down in (fresh, written, committed):
        assert rows(down) == lake.rebuild() and LakeTable.open(down).consumed() == {ident: later}
