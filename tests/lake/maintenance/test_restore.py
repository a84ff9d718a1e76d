"""Restore (metadata only, no Spark): a new commit whose snapshot equals an earlier one; indexes, checkpoints,
refusals, races with other commits and with clean."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeSpecError, LakeTable, faults
from airflow_lake.lake.format import instants as instants_module
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.maintenance import restore as restore_module
from airflow_lake.lake.maintenance.clean import clean
from airflow_lake.lake.upsert import versions as versions_module
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table, on_disk, put_file


def replace(table: LakeTable, old: DataFile, part: str = "a") -> tuple[LogEntry, DataFile]:
    """Replace `old` by a new file on disk (a compaction or clustering)."""
    txn = table.begin("replace", "compact")
    new = data_file(txn, part)
    put_file(table, new)
    return txn.commit(added=[new], removed=[old.path]), new


def upsert(table: LakeTable, version: int, request_id: str | None = None) -> LogEntry:
    """An upsert entry of `version` (one synthetic delta file on disk), as `versioned_upsert` records it."""
    txn = table.begin("upsert", "versioned_upsert", request_id=request_id)
    item = data_file(txn, "a")
    put_file(table, item)
    return txn.commit(added=[item], versions=[version],
                      metadata={"versions": [version], "fingerprint": f"fp{version}", "columns": ["id"]})


def no_pending(table: LakeTable) -> bool:
    return not [i for i in instants_module.pending(table.storage) if not table.is_finished(i.id)]


def test_restore_makes_the_latest_snapshot_equal_the_target_and_keeps_history(table_path: str) -> None:
    table = make_table(table_path)
    e1, (f1, f2) = append(table, "a", files=2, disk=True)
    _, g1 = replace(table, f1)
    e3, (h1,) = append(table, "b", disk=True, rows=7)
    before = {seq: live_paths(table, seq) for seq in (1, 2, 3)}

    result = table.restore(to_seq=1)

    entry = result.entry
    assert entry is not None and (entry.action, entry.operation, entry.seq) == ("restore", "restore", 4)
    assert live_paths(table) == {f1.path, f2.path} == before[1]
    assert set(entry.removed) == {g1.path, h1.path} and [f.path for f in entry.added] == [f1.path]
    assert entry.added[0] == f1  # the target's record, stats included
    assert entry.metadata["restored_to"] == {"seq": 1, "instant": e1.instant}
    assert entry.metadata["spec"] == table.state(1).spec
    assert (entry.metrics["files_added"], entry.metrics["files_removed"], entry.metrics["rows_removed"]) == (1, 2, 17)
    assert (entry.metrics["restored_to_seq"], entry.metrics["restored_from_seq"]) == (1, 3)
    # history stays: every snapshot before the restore still reads as it did
    assert {seq: live_paths(table, seq) for seq in (1, 2, 3)} == before
    assert live_paths(table, e3.instant) == before[3]
    assert live_paths(LakeTable(table_path)) == before[1]  # a fresh reader folds the entry the same way
    # the re-added file is live again, not a tombstone: clean deletes the removed ones only
    state = table.state()
    assert set(state.tombstones) == {g1.path, h1.path}
    cleaned = clean(table, 0, force=True, now=time.time() + 1)
    assert cleaned is not None and set(cleaned.metadata["deleted"]) == {g1.path, h1.path}
    assert on_disk(table, f1) and on_disk(table, f2) and not on_disk(table, g1) and not on_disk(table, h1)
    assert [i.action for i in table.timeline()] == ["create", "commit", "replace", "commit", "restore", "clean"]


def test_targets_by_instant_and_by_time(table_path: str) -> None:
    table = make_table(table_path)
    e1, _ = append(table, "a", disk=True)
    time.sleep(0.02)
    e2, _ = append(table, "b", disk=True)
    time.sleep(0.02)
    append(table, "c", disk=True)
    dry = table.restore(to_instant=e2.instant, dry_run=True)
    assert (dry.plan.seq, dry.entry, table.commit_log.head()) == (2, None, 3)
    between = (e1.completed_at + e2.completed_at) / 2
    assert table.restore(to_timestamp=between, dry_run=True).plan.seq == 1
    assert table.restore(to_timestamp=e2.completed_at, dry_run=True).plan.seq == 2  # at or before
    iso = restore_module.iso(between)  # '...Z'
    assert table.restore(to_timestamp=iso, dry_run=True).plan.seq == 1
    assert table.restore(to_timestamp=iso.replace("Z", ""), dry_run=True).plan.seq == 1  # no zone: UTC
    with pytest.raises(LakeSpecError, match="before the table was created"):  # the same clock time, 2 h earlier
        table.restore(to_timestamp=iso.replace("Z", "+02:00"), dry_run=True)
    assert table.restore(to_timestamp=iso.replace("Z", "-02:00"), dry_run=True).plan.seq == 3
    assert table.restore(to_timestamp=f"{between:.3f}", dry_run=True).plan.seq == 1  # UNIX seconds as text
    assert table.restore(to_timestamp=time.time() + 60, dry_run=True).plan.noop
    done = table.restore(to_instant=e2.instant)
    assert done.entry is not None and live_paths(table) == live_paths(table, 2)


@pytest.mark.parametrize(("kwargs", "field", "text"), [
    ({}, "to_seq", "no snapshot to restore was given"),
    ({"to_seq": 1, "to_instant": "20260101000000000"}, "to_instant", "to_seq and to_instant were both given"),
    ({"to_seq": 9}, "to_seq", "snapshot 9 does not exist: the log"),
    ({"to_seq": -1}, "to_seq", "is not a log sequence number"),
    ({"to_seq": True}, "to_seq", "is not a log sequence number"),
    ({"to_instant": "2026"}, "to_instant", "is not an instant id"),
    ({"to_instant": "20200101000000000"}, "to_instant", "is not a completed instant"),
    ({"to_timestamp": "yesterday"}, "to_timestamp", "is not a point in time"),
    ({"to_timestamp": "2001-01-01T00:00:00Z"}, "to_timestamp", "is before the table was created"),
    ({"to_timestamp": float("nan")}, "to_timestamp", "is not a point in time"),
    ({"to_timestamp": 1e300}, "to_timestamp", "is after the year 9999"),  # was an OverflowError (issue 33)
    ({"to_timestamp": "253402300800"}, "to_timestamp", "is after the year 9999"),
])
def test_bad_targets_are_refused_before_anything_is_written(table_path: str, kwargs: dict[str, object], field: str,
                                                           text: str) -> None:
    table = make_table(table_path)
    append(table, "a", disk=True)
    with pytest.raises(LakeSpecError) as caught:
        table.restore(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field and text in str(caught.value) and "Fix:" in str(caught.value)
    assert table.commit_log.head() == 1 and no_pending(table)


def test_a_rolled_back_instant_is_no_target(table_path: str) -> None:
    table = make_table(table_path)
    doomed = table.begin("commit", "write")
    doomed.abort()
    with pytest.raises(LakeSpecError, match="was rolled back: it never changed the table"):
        table.restore(to_instant=doomed.instant)


def test_restoring_the_current_snapshot_commits_nothing(table_path: str) -> None:
    table = make_table(table_path)
    _, (f1,) = append(table, "a", disk=True)
    replace(table, f1)
    result = table.restore(to_seq=2, request_id="r-noop")
    assert result.entry is None and result.plan.noop
    metrics = result.metrics()
    assert (metrics["noop"], metrics["files_added"], metrics["files_removed"]) == (True, 0, 0)
    assert "already equals snapshot 2" in metrics["reason"]
    # a clean changes no live file: restoring the snapshot before it is a no-op too
    entry = clean(table, 0, force=True, now=time.time() + 1)
    assert entry is not None and table.restore(to_seq=2).entry is None
    assert table.commit_log.head() == 3 and table.find_request("r-noop") is None and no_pending(table)


def test_refused_when_clean_deleted_what_the_target_needs(table_path: str) -> None:
    table = make_table(table_path)
    _, (f1,) = append(table, "a", disk=True)
    e2, g1 = replace(table, f1)
    replace(table, g1)
    assert clean(table, 0, force=True, now=time.time() + 1) is not None  # f1 and g1 deleted
    head = table.commit_log.head()
    with pytest.raises(LakeSpecError) as caught:
        table.restore(to_seq=1)
    message = str(caught.value)
    assert caught.value.field == "to_seq" and "older than what `clean` kept" in message
    assert "The oldest restorable snapshot is seq 3" in message and "clean.retain.hours" in message
    with pytest.raises(LakeSpecError, match="older than what `clean` kept"):
        table.restore(to_instant=e2.instant)
    assert table.commit_log.head() == head and no_pending(table)
    assert table.restore(to_seq=3).entry is None  # the oldest restorable one (the current files here)


def test_refused_when_a_file_to_re_add_is_missing_on_disk(table_path: str) -> None:
    table = make_table(table_path)
    _, (f1, f2) = append(table, "a", files=2, disk=True)
    replace(table, f1)
    replace(table, f2)
    table.storage.delete(f2.path)  # by hand, or a clean that died before recording its deletes
    with pytest.raises(LakeSpecError) as caught:
        table.restore(to_seq=1)
    assert "needs 1 file(s) that are missing on disk" in str(caught.value) and repr(f2.path) in str(caught.value)
    assert table.commit_log.head() == 3 and no_pending(table)
    put_file(table, f2)  # back from a backup
    assert table.restore(to_seq=1).entry is not None and live_paths(table) == {f1.path, f2.path}


def test_refused_when_a_file_to_re_add_may_be_cleaned_right_now(table_path: str) -> None:
    table = make_table(table_path, {"clean.retain.hours": "2"})
    _, (f1,) = append(table, "a", disk=True)
    e2, _ = replace(table, f1)
    with pytest.raises(LakeSpecError) as caught:
        restore_module.restore(table, restore_module.target_of(to_seq=1), now=e2.completed_at + 3 * 3600)
    message = str(caught.value)
    assert "removed longer ago than the table's clean retention (clean.retain.hours = 2)" in message
    assert repr(f1.path) in message and "a `clean` may be deleting them right now" in message
    assert "Raise the table property clean.retain.hours above 3" in message and "alter_table" in message
    assert table.commit_log.head() == 2 and no_pending(table)
    ok = restore_module.restore(table, restore_module.target_of(to_seq=1), now=e2.completed_at + 3600)
    assert ok.entry is not None and live_paths(table) == {f1.path}


def test_a_restore_resets_the_request_index_so_undone_tasks_run_again(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "3"})
    txn = table.begin("commit", "write", request_id="dag/load/day1/-1")
    day1 = data_file(txn, "a")
    put_file(table, day1)
    e1 = txn.commit(added=[day1])
    txn = table.begin("commit", "write", request_id="dag/load/day2/-1")  # the bad load
    bad = data_file(txn, "b")
    put_file(table, bad)
    txn.commit(added=[bad])
    assert table.find_request("dag/load/day2/-1") is not None

    restored = table.restore(to_seq=e1.seq, request_id="dag/restore/day2/-1")  # seq 3: checkpointed

    assert restored.entry is not None and restored.entry.seq == 3 and table.storage.list_dir("_lake/checkpoints")
    for reader in (table, LakeTable(table_path)):  # folded, and read from the checkpoint taken at the restore
        assert reader.find_request("dag/load/day2/-1") is None  # its commit was undone
        assert reader.find_request("dag/load/day1/-1") == e1
        assert reader.find_request("dag/restore/day2/-1") == restored.entry
    # the retry of the undone task is not refused as a re-used request: it commits again
    txn = table.begin("commit", "write", request_id="dag/load/day2/-1")
    fixed = data_file(txn, "b")
    put_file(table, fixed)
    again = txn.commit(added=[fixed])
    assert LakeTable(table_path).find_request("dag/load/day2/-1") == again
    assert live_paths(table) == {day1.path, fixed.path}
    # a retry of the restore itself returns its commit
    retry = table.restore(to_seq=e1.seq, request_id="dag/restore/day2/-1")
    assert retry.already_committed and retry.entry == restored.entry and table.commit_log.head() == again.seq


@pytest.mark.parametrize("interval", ["2", "3", "100"])  # checkpoint before, at, and never around the restore
def test_a_restore_resets_the_upsert_version_index(table_path: str, interval: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": interval})
    for version in (5, 6):
        upsert(table, version)
    before_7 = table.commit_log.head()  # 2
    upsert(table, 7)
    upsert(table, 8)
    assert set(versions_module.applied(table, [6, 7, 8])) == {6, 7, 8}

    restored = table.restore(to_seq=before_7)

    assert restored.entry is not None and restored.entry.metrics["versions_changed"] is True
    assert restored.entry.metadata["versions"] == [[5, 1], [6, 2]]
    for reader in (table, LakeTable(table_path)):
        assert reader.state().versions == {5: 1, 6: 2}
        assert set(versions_module.applied(reader, [5, 6, 7, 8])) == {5, 6}
    redo = upsert(table, 7)  # applied again, not a duplicate
    for _ in range(3):
        append(table, "z")  # checkpoints after the restore too
    for reader in (table, LakeTable(table_path)):
        assert reader.state().versions == {5: 1, 6: 2, 7: redo.seq}
        assert versions_module.applied(reader, [7])[7].entry == redo
    # time travel to before the restore still sees the old index
    assert table.state(4).versions == {5: 1, 6: 2, 7: 3, 8: 4}


@contextmanager
def at_restore_commit(monkeypatch: pytest.MonkeyPatch, other: Callable[[], object]) -> Iterator[list[object]]:
    """Run `other` once, when the restore under test reached its `before_commit` step (after it read its base
    and planned): the other commit lands between the restore's read and its commit."""
    ran: list[object] = []
    real = faults.reach

    def reach(name: str) -> None:
        if name == "before_commit" and not ran:
            ran.append("running")
            ran[0] = other()
        real(name)

    monkeypatch.setattr(faults, "reach", reach)
    yield ran
    monkeypatch.undo()
    assert ran and ran[0] != "running", "the other commit did not run inside the restore"


@pytest.mark.parametrize("other", ["append", "replace", "restore"])
def test_a_commit_landing_between_the_restores_read_and_its_commit_is_a_retryable_conflict(
        table_path: str, monkeypatch: pytest.MonkeyPatch, other: str) -> None:
    table = make_table(table_path)
    _, (f1, f2) = append(table, "a", files=2, disk=True)
    append(table, "b", disk=True)
    racer = LakeTable(table_path)
    run_other: dict[str, Callable[[], object]] = {
        "append": lambda: append(racer, "c", disk=True),
        "replace": lambda: replace(racer, f2),  # a file the restore keeps
        "restore": lambda: racer.restore(to_seq=0),
    }
    with pytest.raises(LakeCommitConflict, match=r"Nothing was committed|changed the table spec|run the job again"), \
            at_restore_commit(monkeypatch, run_other[other]):
        table.restore(to_seq=1, request_id="dag/restore/run/-1")
    head = table.commit_log.head()
    assert table.commit_log.read(head).action == "rollback"  # the restore's own instant, rolled back
    assert all(e.action != "restore" or other == "restore" for e in table.commit_log.entries(-1))
    assert table.find_request("dag/restore/run/-1") is None and no_pending(table)
    # the retry (Airflow's) plans again from the new snapshot and lands
    retry = table.restore(to_seq=1, request_id="dag/restore/run/-1")
    assert retry.entry is not None and live_paths(table) == {f1.path, f2.path}


def test_a_forced_clean_racing_a_restore_never_leaves_a_deleted_file_live(table_path: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The clean records its deletes before it deletes: landing inside the restore, its entry conflicts with it."""
    table = make_table(table_path)
    _, (f1,) = append(table, "a", disk=True)
    replace(table, f1)
    racer = LakeTable(table_path)
    with pytest.raises(LakeCommitConflict, match=r"\(clean\) deleted 1 file\(s\) this job needs"), \
            at_restore_commit(monkeypatch, lambda: clean(racer, 0, force=True, now=time.time() + 1)):
        table.restore(to_seq=1)
    assert not on_disk(table, f1) and f1.path not in table.state().files
    with pytest.raises(LakeSpecError, match="older than what `clean` kept"):
        table.restore(to_seq=1)


def test_a_clean_planned_before_a_restore_lands_plans_again(table_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restore landing between a clean's read and its entry: the clean must not delete the re-added file."""
    table = make_table(table_path)
    _, (f1,) = append(table, "a", disk=True)
    _, g1 = replace(table, f1)
    racer = LakeTable(table_path)
    real = table.append_entry
    ran: list[object] = []

    def append_entry(*args: object, **kwargs: object) -> object:
        if not ran:
            ran.append(racer.restore(to_seq=1).entry)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(table, "append_entry", append_entry)
    entry = clean(table, 0, force=True, now=time.time() + 1)
    assert ran and ran[0] is not None
    assert entry is not None and entry.metadata["deleted"] == [g1.path]  # planned again after the restore
    assert on_disk(table, f1) and live_paths(table) == {f1.path} and not on_disk(table, g1)
