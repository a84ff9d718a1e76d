"""Optimistic concurrency: concurrent appends all land, conflicting replaces and overwrites abort cleanly."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeError, LakeInstantRolledBack, LakeTable
from airflow_lake.lake.commit.transaction import Transaction
from airflow_lake.lake.format import instants as instants_module
from airflow_lake.lake.format.instants import ROLLED_BACK
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table, on_disk, pending_names, put_file


def test_two_appends_from_the_same_snapshot_both_land(table_path: str) -> None:
    table = make_table(table_path)
    t1 = table.begin("commit", "write")
    t2 = table.begin("commit", "write")
    assert t1.base.seq == t2.base.seq == 0
    f1, f2 = data_file(t1, "a"), data_file(t2, "a")
    e2 = t2.commit(added=[f2])
    e1 = t1.commit(added=[f1])
    assert (e2.seq, e1.seq) == (1, 2)
    assert e1.base_seq == 0
    assert live_paths(table) == {f1.path, f2.path}
    assert live_paths(LakeTable(table_path)) == {f1.path, f2.path}


def test_appends_do_not_conflict_with_a_replace_of_other_files(table_path: str) -> None:
    table = make_table(table_path)
    _, (old,) = append(table, "a")
    replace = table.begin("replace", "compact")
    writer = table.begin("commit", "write")
    new = data_file(writer, "a")
    writer.commit(added=[new])
    merged = data_file(replace, "a")
    replace.commit(added=[merged], removed=[old.path])
    assert live_paths(table) == {new.path, merged.path}


def run_threads(table_path: str, threads: int, commits: int, shared: bool) -> list[str]:
    shared_table = LakeTable(table_path)
    barrier = threading.Barrier(threads)
    added: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        table = shared_table if shared else LakeTable(table_path)
        try:
            barrier.wait()
            for _ in range(commits):
                txn = table.begin("commit", "write")
                item = data_file(txn, "abcd"[n % 4])
                txn.commit(added=[item])
                with lock:
                    added.append(item.path)
        except BaseException as err:
            errors.append(err)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    return added


@pytest.mark.parametrize("shared", [False, True], ids=["table-per-thread", "shared-table"])
def test_threads_appending_concurrently_lose_nothing(table_path: str, shared: bool) -> None:
    make_table(table_path, {"heartbeat.timeout.seconds": "60"})  # no writer may look dead on a busy machine
    added = run_threads(table_path, threads=8, commits=5, shared=shared)
    table = LakeTable(table_path)
    assert table.commit_log.head() == 40
    entries = [table.commit_log.read(seq) for seq in range(1, 41)]
    assert [e.seq for e in entries] == list(range(1, 41))
    assert all(e.action == "commit" and len(e.added) == 1 for e in entries)
    assert len({e.instant for e in entries}) == 40
    assert len(added) == 40 and len(set(added)) == 40
    assert live_paths(table) == set(added)
    assert sorted(f.path for e in entries for f in e.added) == sorted(added)
    assert table.storage.list_dir("_lake/pending") == []


def test_instant_ids_are_never_reused(table_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that read the table before another one completed must not get that one's instant id.

    The clock is frozen, so both writers compute the same first candidate id; the first completes
    and removes its pending files before the second reserves an id (as with a fast commit or skewed
    clocks on two hosts).
    """
    table = make_table(table_path)
    frozen = time.time() + 5
    monkeypatch.setattr(instants_module, "time", SimpleNamespace(time=lambda: frozen))
    stale_base = table.state()
    first = table.begin("commit", "write")
    f1 = data_file(first, "a")
    first.commit(added=[f1])
    second = Transaction(table, "commit", "write", stale_base, metadata={}, request_id=None)
    assert second.instant != first.instant
    f2 = data_file(second, "a")
    put_file(table, f2)
    second.commit(added=[f2])  # two appends: no conflict
    assert live_paths(table) == {f1.path, f2.path}
    instants = [table.commit_log.read(seq).instant for seq in range(table.commit_log.head() + 1)]
    assert len(set(instants)) == len(instants)


def test_replace_conflicts_with_a_replace_of_the_same_file(table_path: str) -> None:
    table = make_table(table_path)
    _, (base_file,) = append(table, "a", disk=True)
    _, (other,) = append(table, "b", disk=True)
    winner = table.begin("replace", "cluster")
    loser = table.begin("replace", "compact")
    won_file = data_file(winner, "a")
    put_file(table, won_file)
    lost_files = [data_file(loser, "a"), data_file(loser, "a")]
    for item in lost_files:
        put_file(table, item)
    winner.commit(added=[won_file], removed=[base_file.path])

    with pytest.raises(LakeCommitConflict) as info:
        loser.commit(added=lost_files, removed=[base_file.path])
    assert info.value.retryable is True
    assert base_file.path in str(info.value)
    head = table.commit_log.head()
    loser.abort()

    rolled = [i for i in table.timeline() if i.id == loser.instant]
    assert [(i.state, i.seq) for i in rolled] == [(ROLLED_BACK, head + 1)]
    assert loser.instant in table.state().rolled_back
    assert not any(on_disk(table, f) for f in lost_files)  # its own files are gone
    assert on_disk(table, won_file) and on_disk(table, other)  # nobody else's
    assert on_disk(table, base_file)  # replaced, but only clean may delete it
    assert pending_names(table, loser.instant) == []
    assert live_paths(table) == {won_file.path, other.path}
    loser.abort()  # a second abort does nothing
    assert table.commit_log.head() == head + 1


def test_a_commit_that_read_a_replaced_file_conflicts(table_path: str) -> None:
    table = make_table(table_path)
    _, (source,) = append(table, "a")
    reader = table.begin("commit", "derive")
    replace = table.begin("replace", "cluster")
    replace.commit(added=[data_file(replace, "a")], removed=[source.path])
    with pytest.raises(LakeCommitConflict, match="replaced 1 file"):
        reader.commit(added=[data_file(reader, "b")], reads=[source.path])
    reader.abort()
    assert reader.instant in table.state().rolled_back


def test_replace_conflicts_with_an_upsert_that_removed_the_file(table_path: str) -> None:
    table = make_table(table_path)
    _, (old,) = append(table, "a")
    cluster = table.begin("replace", "cluster")
    upsert = table.begin("upsert", "upsert")
    upsert.commit(added=[data_file(upsert, "a")], removed=[old.path])
    with pytest.raises(LakeCommitConflict):
        cluster.commit(added=[data_file(cluster, "a")], removed=[old.path])
    cluster.abort()
    assert table.snapshot().files[0].instant == upsert.instant


def overwrite(txn: Transaction, part: str) -> list[str]:
    """Commit an overwrite of partition dt=`part`; returns the paths it added."""
    new = data_file(txn, part)
    removed = [f.path for f in txn.base_files if f.partition == {"dt": part}]
    txn.commit(added=[new], removed=removed, overwrites=[{"dt": part}])
    return [new.path]


def test_overwrite_of_a_partition_conflicts_with_an_append_into_it(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "p")
    _, (q_file,) = append(table, "q")
    over = table.begin("commit", "write")
    _, (late,) = append(table, "p")
    with pytest.raises(LakeCommitConflict, match="partitions this job overwrites"):
        overwrite(over, "p")
    over.abort()
    assert late.path in live_paths(table) and q_file.path in live_paths(table)
    assert over.instant in table.state().rolled_back


def test_overwrite_of_a_partition_ignores_appends_elsewhere(table_path: str) -> None:
    table = make_table(table_path)
    _, (p_old,) = append(table, "p")
    over = table.begin("commit", "write")
    _, (q_new,) = append(table, "q")
    added = overwrite(over, "p")
    assert live_paths(table) == {q_new.path, *added}
    assert p_old.path in table.state().tombstones


def test_whole_table_overwrite_conflicts_with_any_append(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "p")
    over = table.begin("commit", "write")
    _, (q_new,) = append(table, "q")
    with pytest.raises(LakeCommitConflict, match="whole table"):
        over.commit(added=[data_file(over, "z")], removed=[f.path for f in over.base_files], whole_table=True)
    over.abort()
    assert q_new.path in live_paths(table)


def test_whole_table_overwrite_without_concurrent_appends(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "p")
    append(table, "q")
    over = table.begin("commit", "write")
    new = data_file(over, "z")
    over.commit(added=[new], removed=[f.path for f in over.base_files], whole_table=True)
    assert live_paths(table) == {new.path}


def test_a_finished_transaction_cannot_commit_again(table_path: str) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write")
    item = data_file(txn)
    txn.commit(added=[item])
    with pytest.raises(LakeError, match="already finished"):
        txn.commit(added=[data_file(txn)])
    txn.abort()  # after a commit: nothing to roll back
    assert table.commit_log.head() == 1 and live_paths(table) == {item.path}
    aborted = table.begin("commit", "write")
    aborted.abort()
    with pytest.raises(LakeError, match="already finished"):
        aborted.commit(added=[data_file(aborted)])


def test_rolled_back_error_is_a_retryable_conflict() -> None:
    assert issubclass(LakeInstantRolledBack, LakeCommitConflict)
    assert LakeInstantRolledBack.retryable is True
