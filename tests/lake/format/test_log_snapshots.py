"""The commit log and snapshots: numbering, folding, time travel, checkpoints, request ids (no Spark)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_lake.lake import (
    ColumnStats,
    DataFile,
    LakeError,
    LakeSnapshotNotFound,
    LakeSpecError,
    LakeTable,
    LakeTableNotFound,
)
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.instants import COMPLETED, INFLIGHT, format_id, id_millis, is_instant_id
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table


def test_new_table_is_entry_zero(table_path: str) -> None:
    table = make_table(table_path)
    assert table.commit_log.head() == 0
    snap = table.snapshot()
    assert (snap.seq, snap.files, snap.rows, snap.bytes) == (0, (), 0, 0)
    entry = table.commit_log.read(0)
    assert entry.action == "create" and is_instant_id(entry.instant)
    assert [(i.seq, i.action, i.state) for i in table.timeline()] == [(0, "create", COMPLETED)]


def test_commits_are_numbered_in_order_with_increasing_instants(table_path: str) -> None:
    table = make_table(table_path)
    entries = [append(table, part, rows=5)[0] for part in ("a", "b", "a", "c")]
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert [e.base_seq for e in entries] == [0, 1, 2, 3]
    instants = [table.commit_log.read(0).instant, *(e.instant for e in entries)]
    assert instants == sorted(instants) and len(set(instants)) == 5
    assert all(e.metrics["files_added"] == 1 and e.metrics["rows_added"] == 5 for e in entries)
    assert [(i.seq, i.id) for i in table.timeline()][1:] == [
        (e.seq, e.instant) for e in entries]
    assert [i.id for i in table.timeline(limit=2)] == [e.instant for e in entries[-2:]]
    assert [e.seq for e in table.entries_since(2)] == [3, 4]


def test_fold_of_adds_and_removes(table_path: str) -> None:
    table = make_table(table_path)
    _, (a1, a2) = append(table, "a", files=2, rows=10)
    _, (b1,) = append(table, "b", rows=7)
    txn = table.begin("replace", "compact")
    merged = data_file(txn, "a", rows=20, size=150)
    entry = txn.commit(added=[merged], removed=[a1.path, a2.path])
    assert entry.seq == 3 and entry.removed == tuple(sorted([a1.path, a2.path]))
    assert entry.metrics["files_removed"] == 2 and entry.metrics["rows_removed"] == 20
    assert entry.metrics["bytes_removed"] == 200 and entry.metrics["bytes_added"] == 150
    snap = table.snapshot()
    assert {f.path for f in snap.files} == {merged.path, b1.path}
    assert snap.rows == 27 and snap.bytes == 250
    assert {k: [f.path for f in v] for k, v in snap.partitions().items()} == {
        (("dt", "a"),): [merged.path], (("dt", "b"),): [b1.path]}
    state = table.state()
    assert set(state.tombstones) == {a1.path, a2.path}
    assert state.tombstones[a1.path][0] == 3


def test_data_file_facts_survive_the_log(table_path: str) -> None:
    table = make_table(table_path, schema="id BIGINT, name STRING, d DATE, dt STRING")
    txn = table.begin("commit", "write")
    original = DataFile(path=f"dt=x/part-{txn.instant}-0_00003.parquet", partition={"dt": "x"}, rows=3, bytes=42,
                        bucket=3, instant=txn.instant,
                        stats={"id": ColumnStats(1, 3, 0), "name": ColumnStats("a", None, 1),
                               "d": ColumnStats("2024-01-01", "2024-02-01", 0)})
    txn.commit(added=[original])
    fresh = LakeTable.open(table_path)
    assert fresh.snapshot().files == (original,)


def test_removing_a_file_that_is_not_live_is_refused(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "a")
    txn = table.begin("replace", "compact")
    with pytest.raises(LakeError, match="not live"):
        txn.commit(added=[data_file(txn, "a")], removed=["dt=a/never-written.parquet"])
    assert table.commit_log.head() == 1
    txn.abort()
    assert txn.instant in table.state().rolled_back


def test_time_travel_by_seq_and_instant(table_path: str) -> None:
    table = make_table(table_path)
    e1, f1 = append(table, "a")
    e2, f2 = append(table, "b")
    txn = table.begin("replace", "overwrite")
    g = data_file(txn, "a")
    e3 = txn.commit(added=[g], removed=[f1[0].path])
    expected = {0: set(), 1: {f1[0].path}, 2: {f1[0].path, f2[0].path}, 3: {f2[0].path, g.path}}
    for seq, want in expected.items():
        assert live_paths(table, seq) == want
        assert live_paths(table, str(seq)) == want
        snap = table.snapshot(seq)
        assert snap.seq == seq and snap.instant == table.commit_log.read(seq).instant
    for entry in (e1, e2, e3):
        assert live_paths(table, entry.instant) == expected[entry.seq]
        assert table.resolve(entry.instant) == entry.seq
    assert live_paths(table) == expected[3]
    assert table.resolve(None) == 3
    assert table.snapshot(1).rows == 10
    # the latest state is unaffected by time travel
    assert table.state().seq == 3


def test_unknown_snapshots_raise(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "a")
    for bad in (2, 99, -1, "2", "20000101000000000", "29991231235959999"):
        with pytest.raises(LakeSnapshotNotFound):
            table.snapshot(bad)
    with pytest.raises(LakeSnapshotNotFound):
        table.scan(as_of=5)
    for bad_text in ("abc", "2024-01-01", True):
        with pytest.raises(LakeSpecError) as info:
            table.resolve(bad_text)
        assert info.value.field == "as_of"


def test_rolled_back_instant_is_not_a_snapshot(table_path: str) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write")
    txn.abort()
    with pytest.raises(LakeSnapshotNotFound):
        table.snapshot(txn.instant)


def test_pending_instants_show_on_the_timeline(table_path: str) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write", metadata={"mode": "append"}, request_id="req-1")
    try:
        last = table.timeline()[-1]
        assert (last.id, last.state, last.action, last.operation, last.request_id) == (
            txn.instant, INFLIGHT, "commit", "write", "req-1")
        assert last.metadata == {"mode": "append"}
    finally:
        entry = txn.commit(added=[data_file(txn)])
    last = table.timeline()[-1]
    assert (last.id, last.state, last.seq) == (txn.instant, COMPLETED, entry.seq)
    assert last.metrics["files_added"] == 1


# -- checkpoints -----------------------------------------------------------------------------------


def build_history(table: LakeTable, commits: int) -> dict[int, set[str]]:
    """Appends and replaces; returns the expected live paths after every seq, folded by hand."""
    expected = {0: set()}
    live: list[DataFile] = []
    for i in range(commits):
        txn = table.begin("commit" if i % 3 else "replace", "op")
        added = [data_file(txn, "ab"[i % 2], rows=i + 1)]
        removed = [live[0].path] if i % 3 == 0 and live else []
        entry = txn.commit(added=added, removed=removed,
                           metrics={"i": i}) if i % 4 else None
        if entry is None:  # every fourth one carries a request id
            txn.abort()
            entry = table.begin("commit", "op", request_id=f"req-{i}").commit(added=[], removed=removed)
            added = []
        live = [f for f in live if f.path not in removed] + added
        expected[entry.seq] = {f.path for f in live}
    return expected


def test_checkpoints_every_interval_and_identical_resolution(table_path: str, tmp_path: Path) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"})
    expected = build_history(table, 11)
    head = table.commit_log.head()
    assert head == max(expected) and head >= 12  # aborts add rollback entries too
    # every seq has an expected state: fill the gaps of rollback entries
    for seq in range(1, head + 1):
        if seq not in expected:
            expected[seq] = expected[seq - 1]
    listed = [paths.checkpoint_of(n) for n in table.storage.list_dir(paths.CHECKPOINTS)]
    checkpoints = [seq for seq, _ in listed]
    assert listed == [(s, "parquet") for s in range(5, head + 1, 5)]
    hint = table.storage.read_json(paths.LAST_CHECKPOINT)
    assert (hint["seq"], hint["format"]) == (checkpoints[-1], "parquet")
    for seq in checkpoints:
        stored = pq.read_table(table.storage.path(paths.checkpoint_file(seq)), columns=["path", "removed_seq"])
        live = {p for p, removed in zip(stored["path"].to_pylist(), stored["removed_seq"].to_pylist(),
                                        strict=True) if removed is None}
        assert live == expected[seq]

    plain = tmp_path / "no_checkpoints"
    shutil.copytree(table_path, plain)
    shutil.rmtree(plain / paths.CHECKPOINTS)
    (plain / paths.LAST_CHECKPOINT).unlink()
    seqs = list(range(head + 1))
    for order in (seqs, list(reversed(seqs)), [7, 2, head, 5, 4, 10, 0, 9]):
        with_cp, without_cp = LakeTable(table_path), LakeTable(str(plain))
        for seq in order:
            assert live_paths(with_cp, seq) == expected[seq], seq
            assert live_paths(without_cp, seq) == expected[seq], seq
            a, b = with_cp.state(seq), without_cp.state(seq)
            assert (a.instants, a.requests, a.rolled_back, set(a.tombstones)) == (
                b.instants, b.requests, b.rolled_back, set(b.tombstones))
    fresh = LakeTable(table_path)
    assert fresh.find_request("req-4") is not None
    assert fresh.find_request("req-4").seq == LakeTable(str(plain)).find_request("req-4").seq


def test_resolution_starts_from_the_newest_checkpoint(table_path: str, tmp_path: Path) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"})
    written = [append(table, "ab"[i % 2])[1][0].path for i in range(7)]
    assert table.commit_log.head() == 7
    assert paths.checkpoint_of(table.storage.list_dir(paths.CHECKPOINTS)[-1]) == (5, "parquet")
    copy = tmp_path / "pruned"
    shutil.copytree(table_path, copy)
    for seq in range(1, 5):  # entries before the checkpoint are not needed for newer snapshots
        (copy / paths.log_file(seq)).unlink()
    pruned = LakeTable(str(copy))
    assert live_paths(pruned) == set(written)
    assert live_paths(pruned, 6) == set(written[:6])
    assert pruned.spec == table.spec


def test_find_request_returns_the_committed_entry(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"})
    assert table.find_request("job-1") is None
    txn = table.begin("commit", "write", request_id="job-1")
    assert table.find_request("job-1") is None  # not completed yet
    entry = txn.commit(added=[data_file(txn)])
    found = table.find_request("job-1")
    assert found is not None and (found.seq, found.instant, found.request_id) == (entry.seq, entry.instant, "job-1")
    for _ in range(6):
        append(table)
    fresh = LakeTable(table_path)
    found = fresh.find_request("job-1")
    assert found is not None and found.instant == entry.instant
    assert fresh.find_request("job-2") is None


def test_missing_table(table_path: str) -> None:
    assert not LakeTable.exists(table_path)
    with pytest.raises(LakeTableNotFound):
        LakeTable.open(table_path)
    with pytest.raises(LakeTableNotFound):
        LakeTable(table_path).snapshot()


def test_stray_files_in_the_log_are_ignored(table_path: str) -> None:
    """A crash mid-create leaves at most a temporary file; it is never mistaken for an entry."""
    table = make_table(table_path)
    _, (item,) = append(table, "a")
    log_dir = Path(table.storage.path(paths.LOG))
    (log_dir / f"{paths.log_file(2).rsplit('/', 1)[1]}.0123abcd.tmp").write_text('{"seq": 2')
    (log_dir / "notes.txt").write_text("x")
    fresh = LakeTable(table_path)
    assert fresh.commit_log.head() == 1
    assert live_paths(fresh) == {item.path}
    entry, _ = append(fresh, "b")
    assert entry.seq == 2


def test_instant_ids() -> None:
    ms = 1_732_000_000_123
    assert format_id(ms) == "20241119070640123"
    assert id_millis(format_id(ms)) == ms
    assert is_instant_id(format_id(ms)) and not is_instant_id("2024") and not is_instant_id("2024111907064012x")


def test_a_missing_checkpoint_falls_back_to_the_log(tmp_path: Path) -> None:
    """Checkpoints only speed resolution up: without the newest one the table still resolves the same."""
    path = str(tmp_path / "t")
    table = make_table(path, {"checkpoint.interval": "3"})
    for i in range(8):
        txn = table.begin("commit", "write")
        txn.commit(added=[data_file(txn, f"p{i % 2}")])
    expected = {f.path for f in LakeTable.open(path).snapshot().files}
    os.unlink(os.path.join(path, "_lake", "checkpoints", f"{6:020d}.parquet"))  # the one the hint names
    assert {f.path for f in LakeTable.open(path).snapshot().files} == expected
    for name in os.listdir(os.path.join(path, "_lake", "checkpoints")):
        os.unlink(os.path.join(path, "_lake", "checkpoints", name))
    assert {f.path for f in LakeTable.open(path).snapshot().files} == expected
    assert len(LakeTable.open(path).snapshot(as_of=4).files) == 4


def test_head_sees_entries_appended_by_other_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    reader = make_table(path)
    assert reader.commit_log.head() == 0
    writer = LakeTable.open(path)  # another process, in effect
    for _ in range(3):
        txn = writer.begin("commit", "write")
        txn.commit(added=[data_file(txn, "a")])
    assert reader.commit_log.head() == 3 and len(reader.snapshot().files) == 3


@pytest.mark.parametrize(("damage", "problem"), [
    ("empty", r"00000000000000000002\.json is damaged \(not JSON"),
    ("cut", r"00000000000000000002\.json is damaged \(not JSON"),
    ("no fields", r"00000000000000000002\.json is damaged \(a missing or malformed field"),
    ("other seq", r"00000000000000000002\.json says it is entry 7"),
    ("stray ahead", r"00000000000000000003\.json is missing, but the log goes on to .*00000000000000000040\.json"),
])
def test_damaged_log_entries_are_named_in_the_error(table_path: str, damage: str, problem: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_lake.cli import main

    table = make_table(table_path, {"checkpoint.interval": "100"})
    append(table, "a")
    append(table, "b")
    entry = Path(table.storage.path(paths.log_file(2)))
    if damage == "empty":
        entry.write_text("")
    elif damage == "cut":
        entry.write_text(entry.read_text()[:40])
    elif damage == "no fields":
        entry.write_text('{"seq": 2}')
    elif damage == "other seq":
        entry.write_text(entry.read_text().replace('"seq":2', '"seq":7'))
    else:
        shutil.copy(entry, table.storage.path(paths.log_file(40)))
    with pytest.raises(LakeError, match=problem):
        LakeTable(table_path).snapshot()
    assert main(["timeline", table_path]) == 2  # the CLI: one line naming the file, no traceback
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "_lake/log/" in err
