"""Recovery: dead writers are rolled back by the next writer, live ones never; plans and leftovers (no Spark)."""

from __future__ import annotations

import os
import time

import pytest

from airflow_lake.lake import LakeError, LakeInstantRolledBack, LakeTable
from airflow_lake.lake.format import instants as instants_module
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.instants import INFLIGHT, REQUESTED, ROLLED_BACK, markers_dir, requested_file
from airflow_lake.lake.format.log import LogEntry
from tests.lake.lake_core_helpers import (
    append,
    backdate,
    data_file,
    live_paths,
    make_table,
    on_disk,
    pending_names,
    put_file,
)


def states(table: LakeTable) -> dict[str, str]:
    """Instant id -> state, as the timeline shows it."""
    return {i.id: i.state for i in table.timeline()}


def test_dead_writer_is_rolled_back_by_the_next_writer_and_live_one_is_not(table_path: str) -> None:
    table = make_table(table_path)
    _, (committed,) = append(table, "a", disk=True)
    live = table.begin("commit", "write")
    dead = table.begin("commit", "write")
    live_files = [data_file(live, "a"), data_file(live, "b")]
    dead_files = [data_file(dead, "a"), data_file(dead, "c")]
    for item in (*live_files, *dead_files):
        put_file(table, item)
    dead._heartbeat.stop()  # the writer process died
    time.sleep(1.3)  # > heartbeat.timeout.seconds; the live writer keeps beating meanwhile

    nxt = table.begin("commit", "write")
    # the dead instant: rolled back, its files and pending files gone
    assert states(table)[dead.instant] == ROLLED_BACK
    rollback = table.commit_log.read(table.commit_log.head())
    assert rollback.action == "rollback" and rollback.rolled_back == (dead.instant,)
    assert rollback.metadata["instants"][dead.instant]["action"] == "commit"
    assert "writer dead" in rollback.metadata["reason"]
    assert not any(on_disk(table, f) for f in dead_files)
    assert pending_names(table, dead.instant) == []
    # the live instant and committed data are untouched
    assert states(table)[live.instant] == INFLIGHT
    assert all(on_disk(table, f) for f in live_files) and on_disk(table, committed)
    assert len(pending_names(table, live.instant)) == 5  # requested, inflight, heartbeat, 2 markers
    with pytest.raises(LakeError, match="alive"):
        table.rollback_pending([live.instant])
    assert table.rollback_pending() is None  # nothing stale any more
    assert states(table)[live.instant] == INFLIGHT

    # the dead writer wakes up: it must not commit anything
    head = table.commit_log.head()
    with pytest.raises(LakeInstantRolledBack):
        dead.commit(added=dead_files)
    dead.abort()
    assert table.commit_log.head() == head
    assert not {f.path for f in dead_files} & live_paths(table)

    live.commit(added=live_files)
    mine = data_file(nxt, "d")
    nxt.commit(added=[mine])
    assert live_paths(table) == {committed.path, mine.path, *(f.path for f in live_files)}
    assert table.storage.list_dir(paths.PENDING) == []
    assert table.storage.list_dir(paths.HEARTBEATS) == []
    assert table.storage.list_dir(paths.MARKERS) == []


def test_rollback_on_request_of_a_dead_writer(table_path: str) -> None:
    table = make_table(table_path)
    dead = table.begin("commit", "write", request_id="job-7")
    files = [data_file(dead, "a")]
    put_file(table, files[0])
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)
    entry = table.rollback_pending([dead.instant], request_id="rb-1")
    assert entry is not None and entry.rolled_back == (dead.instant,)
    assert entry.metadata["reason"] == "requested"
    assert table.find_request("rb-1") == entry
    assert not on_disk(table, files[0]) and pending_names(table, dead.instant) == []
    timeline = {i.id: i for i in table.timeline()}
    assert timeline[dead.instant].state == ROLLED_BACK and timeline[dead.instant].request_id == "job-7"
    assert table.rollback_pending([dead.instant]) is None  # already rolled back: nothing to do
    with pytest.raises(LakeInstantRolledBack):
        dead.commit(added=files)


def test_rollback_of_completed_or_unknown_instants_is_refused(table_path: str) -> None:
    table = make_table(table_path)
    entry, (item,) = append(table, "a", disk=True)
    with pytest.raises(LakeError, match="completed"):
        table.rollback_pending([entry.instant])
    with pytest.raises(LakeError, match="not pending"):
        table.rollback_pending(["20000101000000000"])
    assert on_disk(table, item) and table.commit_log.head() == 1


def test_rollback_with_nothing_stale_returns_none(table_path: str) -> None:
    table = make_table(table_path)
    assert table.rollback_pending() is None
    append(table, "a")
    txn = table.begin("commit", "write")
    assert table.rollback_pending() is None
    assert table.rollback_pending([]) is None  # an empty list rolls back nothing
    txn.commit(added=[data_file(txn)])
    assert table.commit_log.head() == 2


def test_stale_requested_instant_of_a_dead_writer_is_rolled_back(table_path: str) -> None:
    """A writer that died right after reserving its id (never inflight) is debris too."""
    table = make_table(table_path)
    doomed = instants_module.request(table.storage, "commit", "write", {}, None,
        not_before=table.state().instant, finished=table.is_finished)
    backdate(table, doomed, 30)
    table.begin("commit", "write").abort()
    assert states(table)[doomed] == ROLLED_BACK
    assert pending_names(table, doomed) == []


def test_requested_replace_plans_are_never_rolled_back_automatically(table_path: str) -> None:
    table = make_table(table_path)
    plan = {"plan": {"groups": [{"partition": {"dt": "a"}, "files": ["dt=a/x.parquet"]}]}}
    planned = instants_module.request(table.storage, "replace", "schedule_clustering", plan, None,
        not_before=table.state().instant, finished=table.is_finished)
    backdate(table, planned, 3600)
    txn = table.begin("commit", "write")
    txn.commit(added=[data_file(txn)])
    assert table.rollback_pending() is None
    item = {i.id: i for i in table.timeline()}[planned]
    assert (item.state, item.action, item.operation) == (REQUESTED, "replace", "schedule_clustering")
    assert item.metadata == plan
    assert planned not in table.state().rolled_back
    # an explicit request may drop a plan
    entry = table.rollback_pending([planned])
    assert entry is not None and entry.rolled_back == (planned,)
    assert states(table)[planned] == ROLLED_BACK and pending_names(table, planned) == []


def test_stale_inflight_replace_is_rolled_back(table_path: str) -> None:
    """Only *requested* replaces are plans; an executor that died mid-replace is debris."""
    table = make_table(table_path)
    _, (old,) = append(table, "a", disk=True)
    run = table.begin("replace", "cluster")
    new = data_file(run, "a")
    put_file(table, new)
    run._heartbeat.stop()
    backdate(table, run.instant, 30)
    assert table.rollback_pending() is not None
    assert states(table)[run.instant] == ROLLED_BACK
    assert not on_disk(table, new) and on_disk(table, old)
    assert live_paths(table) == {old.path}


def test_leftovers_of_a_completed_instant_are_removed_without_its_data(table_path: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write")
    files = [data_file(txn, "a"), data_file(txn, "b")]
    for item in files:
        put_file(table, item)
    with monkeypatch.context() as patch:  # the writer dies right after its log entry landed
        patch.setattr(instants_module, "remove_pending", lambda storage, instant: None)
        txn.commit(added=files)
    assert len(pending_names(table, txn.instant)) == 5
    backdate(table, txn.instant, 30)
    assert table.rollback_pending() is None  # nothing to roll back, but the leftovers are tidied
    assert pending_names(table, txn.instant) == []
    assert all(on_disk(table, f) for f in files)
    assert live_paths(table) == {f.path for f in files}
    assert txn.instant not in table.state().rolled_back


def test_leftovers_of_a_rolled_back_instant_lose_their_files(table_path: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollback that died after its log entry (before deleting files) is finished by the next writer."""
    table = make_table(table_path)
    dead = table.begin("commit", "write")
    item = data_file(dead, "a")
    put_file(table, item)
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)
    with monkeypatch.context() as patch:
        patch.setattr("airflow_lake.lake.commit.recovery.delete_written_files", lambda table, instant: 0)
        patch.setattr(instants_module, "remove_pending", lambda storage, instant: None)
        table.rollback_pending([dead.instant])
    assert dead.instant in table.state().rolled_back
    assert on_disk(table, item) and pending_names(table, dead.instant)
    nxt = table.begin("commit", "write")
    assert not on_disk(table, item) and pending_names(table, dead.instant) == []
    nxt.abort()


def test_abort_rolls_back_the_writers_own_files(table_path: str) -> None:
    table = make_table(table_path)
    _, (kept,) = append(table, "a", disk=True)
    txn = table.begin("commit", "write", request_id="job-1")
    mine = [data_file(txn, "a"), data_file(txn, "b")]
    for item in mine:
        put_file(table, item)
    # a marker for a file the writer never got to create is harmless
    table.storage.touch(f"{markers_dir(txn.instant)}/dt=c/never-created.parquet")
    txn.abort()
    entry = table.commit_log.read(table.commit_log.head())
    assert entry.action == "rollback" and entry.rolled_back == (txn.instant,)
    assert entry.metadata["reason"] == "aborted by its writer"
    assert entry.metadata["instants"][txn.instant]["request_id"] == "job-1"
    assert not any(on_disk(table, f) for f in mine) and on_disk(table, kept)
    assert pending_names(table, txn.instant) == []
    assert table.find_request("job-1") is None  # a rolled-back job did not happen


def test_a_writer_completing_while_it_is_rolled_back_keeps_its_files(table_path: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Race: the slow writer completes after the rollback read the table, before the rollback entry lands.

    The rollback must notice the completed entry and leave the instant (and its live files) alone.
    """
    table = make_table(table_path)
    slow = table.begin("commit", "write")
    item = data_file(slow, "a")
    put_file(table, item)
    slow._heartbeat.stop()
    backdate(table, slow.instant, 30)
    real_append = LakeTable.append_entry

    def commit_first(self: LakeTable, *args: object, **kwargs: object) -> LogEntry | None:
        if not slow._done:
            with monkeypatch.context() as patch:  # completes; dies before tidying its pending files
                patch.setattr(instants_module, "remove_pending", lambda storage, instant: None)
                slow.commit(added=[item])
        return real_append(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LakeTable, "append_entry", commit_first)
    table.rollback_pending([slow.instant])
    monkeypatch.undo()
    state = table.state()
    assert slow.instant in state.instants
    assert slow.instant not in state.rolled_back
    assert on_disk(table, item)
    assert live_paths(table) == {item.path}


def test_pending_listing_skips_an_instant_that_finishes_meanwhile(table_path: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer completing (and tidying) between the read of its requested file and its mtime."""
    table = make_table(table_path)
    txn = table.begin("commit", "write")
    real_read = table.storage.read_json

    def read_then_finish(rel: str) -> object:
        raw = real_read(rel)
        if rel == requested_file(txn.instant):
            instants_module.remove_pending(table.storage, txn.instant)
        return raw

    monkeypatch.setattr(table.storage, "read_json", read_then_finish)
    assert instants_module.pending(table.storage) == []
    assert table.rollback_pending() is None
    txn._heartbeat.stop()


@pytest.mark.parametrize("content", ['{"instant": "2026', "", "[]", '{"action": 7, "metadata": "x"}'])
def test_a_damaged_pending_file_blocks_nobody_and_is_rolled_back_once_stale(
        table_path: str, content: str, caplog: pytest.LogCaptureFixture) -> None:
    table = make_table(table_path)
    append(table, "a")
    damaged = "20200101000000000"
    path = table.storage.path(requested_file(damaged))
    with open(path, "w") as handle:
        handle.write(content)
    stray = table.storage.path(f"{paths.PENDING}/notes.requested.json")
    with open(stray, "w") as handle:
        handle.write("{}")
    entry, _ = append(LakeTable(table_path), "b")  # writes go on
    assert entry.seq == 2
    if content != '{"action": 7, "metadata": "x"}':
        assert requested_file(damaged) in caplog.text  # the warning names the file
    item = {i.id: i for i in table.timeline()}[damaged]
    assert item.state == REQUESTED and item.action in ("unknown",)
    backdate(table, damaged, 30)
    rollback = LakeTable(table_path).rollback_pending()  # the rollback operation itself works
    assert rollback is not None and rollback.rolled_back == (damaged,)
    assert states(table)[damaged] == ROLLED_BACK and pending_names(table, damaged) == []
    append(LakeTable(table_path), "c")
    assert len(LakeTable(table_path).snapshot().files) == 3


def test_a_writer_whose_process_is_gone_from_this_host_is_dead_before_the_timeout(table_path: str) -> None:
    import socket
    import subprocess
    import sys

    from airflow_lake.lake.format.instants import inflight_file, process_alive

    table = make_table(table_path, {"heartbeat.timeout.seconds": "3600"})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not process_alive(gone.pid) and process_alive(os.getpid())
    runs = []
    for host, pid in ((socket.gethostname(), gone.pid), ("another-host", gone.pid), (socket.gethostname(),
                                                                                      os.getpid())):
        run = table.begin("commit", "write")
        run._heartbeat.stop()
        info = table.storage.read_json(inflight_file(run.instant))
        table.storage.write_json(inflight_file(run.instant), {**info, "host": host, "pid": pid})
        runs.append(run.instant)
    table.rollback_pending()  # heartbeats are fresh (timeout 1 h): only the first writer is surely dead
    assert [states(table)[i] for i in runs] == [ROLLED_BACK, INFLIGHT, INFLIGHT]


def test_orphan_removal_treats_an_instant_in_the_log_as_finished(table_path: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer killed just past its commit leaves its pending files: vacuum must judge its files by the log
    (they were kept as if the instant were still being written)."""
    from airflow_lake.lake import faults

    table = make_table(table_path)
    txn = table.begin("commit", "write")
    kept, stray = data_file(txn, "a"), data_file(txn, "a")  # stray: written, never committed
    for item in (kept, stray):
        put_file(table, item)
    staged = table.storage.path(f"{instants_module.staging_dir(txn.instant)}/dt=a/part-x.parquet")
    os.makedirs(os.path.dirname(staged))
    with open(staged, "wb") as handle:
        handle.write(b"PAR1 staged PAR1")

    def killed(point: str) -> None:
        if point == "after_commit":
            raise KeyboardInterrupt  # SIGKILL, as far as the tidying after the commit is concerned

    monkeypatch.setattr(faults, "reach", killed)
    with pytest.raises(KeyboardInterrupt):
        txn.commit(added=[kept])
    monkeypatch.undo()
    assert txn.instant in table.state().instants and pending_names(table, txn.instant)
    result = table.vacuum(older_than_hours=0, force=True)
    assert result.orphans == (stray.path,) and result.staging == (instants_module.staging_dir(txn.instant),)
    assert not on_disk(table, stray) and on_disk(table, kept) and not os.path.exists(staged)
    assert live_paths(table) == {kept.path}
