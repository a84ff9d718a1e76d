"""Checkpoints: Parquet round trip, legacy JSON ones, fallbacks, retention, lazily decoded stats (no Spark)."""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_lake.lake import ColumnStats, DataFile, LakeSpecError, LakeTable
from airflow_lake.lake.format import checkpoints, paths
from airflow_lake.lake.format.stats_columns import LazyStats
from airflow_lake.lake.format.table_state import TableState
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table

SCHEMA = "id BIGINT, x DOUBLE, s STRING, b BOOLEAN, dt STRING"


def fold(table: LakeTable, seq: int) -> TableState:
    """The state after `seq` folded from the log alone (the truth a checkpoint must equal)."""
    state = TableState()
    for entry in table.commit_log.entries(-1, seq):
        state.apply(entry)
    return state


def stored(table: LakeTable, seq: int) -> TableState:
    """The state as the Parquet checkpoint of `seq` holds it."""
    return checkpoints.read(table.storage, seq, "parquet")


def assert_same_state(got: TableState, want: TableState) -> None:
    assert (got.seq, got.instant, got.spec, got.completed_at, got.cleaned_before, got.table_id) == (
        want.seq, want.instant, want.spec, want.completed_at, want.cleaned_before, want.table_id)
    assert (got.instants, got.requests, got.rolled_back, got.tombstones, got.versions) == (
        want.instants, want.requests, want.rolled_back, want.tombstones, want.versions)
    assert got.files == want.files  # DataFile equality includes the stats
    assert stats_types(got) == stats_types(want)  # 1 stays an int, 1.0 a float, True a bool


def stats_types(state: TableState) -> dict[str, dict[str, tuple[type, type, type]]]:
    return {path: {k: (type(v.min), type(v.max), type(v.null_count)) for k, v in f.stats.items()}
            for path, f in state.files.items()}


def varied_stats(i: int) -> dict[str, ColumnStats]:
    """Stats of every kind a file can carry; keys come and go, and `v` changes type half way."""
    stats = {
        "id": ColumnStats(i * 10, i * 10 + 9, 0),
        "x": ColumnStats(-1.5 * i, 2.25 * i + 0.1, i % 3),
        "s": ColumnStats(f"a{i:03d}", None if i % 4 == 0 else f"z{i:03d}", 0),  # no max: a long string
        "b": ColumnStats(False, i % 2 == 0, 1),
        "v": ColumnStats(i, i + 1, 0) if i < 6 else ColumnStats(i + 0.5, 2**70, 0),  # int, then float / huge int
    }
    if i % 5 == 0:
        stats["only_some"] = ColumnStats(None, None, 7)  # a key without values
    if i == 3:
        stats = {}  # a file without stats
    return stats


def build(table: LakeTable, commits: int, *, start: int = 0) -> None:
    """Appends with varied stats and a bucket, compactions (tombstones), rollbacks and request ids."""
    for i in range(start, start + commits):
        if i % 4 == 3:  # compact the oldest two live files of dt=a
            live = sorted((f for f in table.snapshot().files if f.partition == {"dt": "a"}), key=lambda f: f.instant)
            txn = table.begin("replace", "compact", request_id=f"compact-{i}")
            txn.commit(added=[data_file(txn, "a", rows=20, stats=varied_stats(i))],
                       removed=[f.path for f in live[:2]])
        elif i % 7 == 6:
            table.begin("commit", "write").abort()  # a rollback entry
        else:
            txn = table.begin("commit", "write")
            item = data_file(txn, "ab"[i % 2], rows=i + 1, stats=varied_stats(i))
            item = DataFile(item.path, item.partition, item.rows, item.bytes, i % 4, item.instant, item.stats)
            txn.commit(added=[item])


def test_parquet_checkpoint_equals_the_fold_of_the_log(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"}, schema=SCHEMA)
    build(table, 10)
    assert table.commit_log.head() >= 10
    for seq in (5, 10):
        state = stored(table, seq)
        want = fold(table, seq)
        assert_same_state(state, want)
        assert all(isinstance(f.stats, LazyStats) for f in state.files.values())
    assert want.tombstones and want.rolled_back and want.requests  # every part of the state is exercised
    meta = json.loads(pq.read_metadata(table.storage.path(paths.checkpoint_file(10))).metadata[b"lake.state"])
    assert {encoding for _, encoding in meta["stats"]} == {"int", "float", "string", "bool", "json"}


def test_a_checkpoint_written_from_a_checkpoint_copies_its_stats(table_path: str) -> None:
    """The next checkpoint mixes stats read lazily from the previous one with stats from log entries."""
    make_table(table_path, {"checkpoint.interval": "5"}, schema=SCHEMA)
    build(LakeTable.open(table_path), 5)
    head = LakeTable.open(table_path).commit_log.head()
    table = LakeTable.open(table_path)  # resolves from checkpoint 5: its files' stats are lazy
    assert any(isinstance(f.stats, LazyStats) for f in table.state().files.values())
    build(table, 9, start=5)  # `v` turns from int into float / huge int: stored as JSON from then on
    for seq in range(5, table.commit_log.head() + 1, 5):
        assert_same_state(stored(table, seq), fold(table, seq))
    assert head >= 5


def test_snapshots_equal_with_and_without_checkpoints(table_path: str, tmp_path: Path) -> None:
    table = make_table(table_path, {"checkpoint.interval": "3"}, schema=SCHEMA)
    build(table, 12)
    plain = LakeTable.create(str(tmp_path / "plain"), table.spec)  # the same log, no checkpoints
    for seq in range(1, table.commit_log.head() + 1):
        assert plain.commit_log.try_append(table.commit_log.read(seq))
    for seq in range(table.commit_log.head() + 1):
        a, b = LakeTable.open(table_path).snapshot(seq), LakeTable.open(str(tmp_path / "plain")).snapshot(seq)
        assert (a.seq, a.files) == (b.seq, b.files)
        scan_a = LakeTable.open(table_path).scan([("id", "<", 40)], as_of=seq)
        scan_b = LakeTable.open(str(tmp_path / "plain")).scan([("id", "<", 40)], as_of=seq)
        assert scan_a.files == scan_b.files


def test_legacy_json_checkpoints_are_still_read(table_path: str) -> None:
    """A table written before checkpoints were Parquet: JSON checkpoint, hint without a format."""
    table = make_table(table_path, {"checkpoint.interval": "100"}, schema=SCHEMA)
    build(table, 6)
    seq = table.commit_log.head()
    want = fold(table, seq)
    table.storage.write_json(paths.checkpoint_file(seq, "json"), want.to_dict())  # what the old writer wrote
    table.storage.write_json(paths.LAST_CHECKPOINT, {"seq": seq})
    for older in range(1, seq):  # only the checkpoint can give the state now
        os.unlink(table.storage.path(paths.log_file(older)))
    fresh = LakeTable.open(table_path)
    assert_same_state(fresh.state(), want)
    assert not any(isinstance(f.stats, LazyStats) for f in fresh.state().files.values())
    assert {f.path for f in fresh.snapshot().files} == set(want.files)


def test_the_next_checkpoint_of_a_legacy_table_is_parquet_and_retention_removes_json(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2", "checkpoint.retain.count": "2"})
    for _ in range(2):
        append(table)
    os.unlink(table.storage.path(paths.checkpoint_file(2)))  # as if written by the old code
    table.storage.write_json(paths.checkpoint_file(2, "json"), fold(table, 2).to_dict())
    table.storage.write_json(paths.LAST_CHECKPOINT, {"seq": 2})
    table = LakeTable.open(table_path)
    for _ in range(4):
        append(table)
    assert table.storage.list_dir(paths.CHECKPOINTS) == [
        os.path.basename(paths.checkpoint_file(s)) for s in (4, 6)]
    assert table.storage.read_json(paths.LAST_CHECKPOINT)["format"] == "parquet"


def _corrupt(path: str, how: str) -> None:
    data = bytearray(Path(path).read_bytes())
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "garbage":
        data = bytearray(b"not a parquet file" * 10)
    elif how == "empty":
        data = bytearray()
    elif how == "flipped":  # inside the `path` column's pages: only the page checksums notice
        column = pq.ParquetFile(path).metadata.row_group(0).column(0)
        middle = column.data_page_offset + column.total_compressed_size // 2
        for i in range(middle, middle + 8):
            data[i] ^= 0xFF
    elif how == "metadata":  # the state JSON in the footer: its CRC-32 no longer matches
        at = bytes(data).rindex(b'"cleaned_before":')
        data[at + 17] = ord("7") if data[at + 17] != ord("7") else ord("8")
    Path(path).write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["missing", "truncated", "garbage", "empty", "flipped", "metadata"])
def test_a_damaged_or_missing_checkpoint_falls_back(tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
                                                    ) -> None:
    path = str(tmp_path / "t")
    table = make_table(path, {"checkpoint.interval": "3"})
    expected = {0: set()}
    for i in range(8):
        _, (item,) = append(table, f"p{i % 2}", lo=i * 100)
        expected[i + 1] = expected[i] | {item.path}
    newest = table.storage.path(paths.checkpoint_file(6))
    if how == "missing":
        os.unlink(newest)
    else:
        _corrupt(newest, how)
    with caplog.at_level(logging.WARNING, logger="airflow_lake.lake.format.snapshots"):
        for seq in (8, 7, 6, 5):
            assert live_paths(LakeTable.open(path), seq) == expected[seq]
    if how != "missing":
        assert "checkpoint _lake/checkpoints/00000000000000000006.parquet is unreadable" in caplog.text
    # the fallback is the older checkpoint 3: entries before it are not needed
    for seq in (1, 2):
        os.unlink(table.storage.path(paths.log_file(seq)))
    assert live_paths(LakeTable.open(path)) == expected[8]
    scan = LakeTable.open(path).scan([("id", "<", 300)])
    assert scan.files_skipped == 5 and len(scan.files) == 3


def _damage_stats_columns(path: str) -> None:
    """Flip bytes inside every stats column's pages, leaving the footer and the other columns intact."""
    data = bytearray(Path(path).read_bytes())
    group = pq.ParquetFile(path).metadata.row_group(0)
    for i in range(group.num_columns):
        column = group.column(i)
        if column.path_in_schema.startswith("stats_") and column.path_in_schema.endswith(".min"):
            middle = column.data_page_offset + column.total_compressed_size // 2
            for j in range(middle, middle + 4):
                data[j] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def test_a_plain_snapshot_never_reads_stats(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"}, schema=SCHEMA)
    build(table, 5)
    seq = table.commit_log.head()
    assert seq == 5
    want = {(f.path, f.rows, f.bytes, f.bucket, f.instant, tuple(f.partition.items()))
            for f in fold(table, seq).files.values()}
    _damage_stats_columns(table.storage.path(paths.checkpoint_file(seq)))
    for older in range(1, seq):  # no fold can stand in for the checkpoint either
        os.unlink(table.storage.path(paths.log_file(older)))
    snap = LakeTable.open(table_path).snapshot()
    assert {(f.path, f.rows, f.bytes, f.bucket, f.instant, tuple(f.partition.items())) for f in snap.files} == want
    lazy = snap.files[0].stats
    assert isinstance(lazy, LazyStats) and lazy.columns.loads == 0


def test_a_filtered_scan_reads_only_the_stats_it_needs(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "4"}, schema=SCHEMA)
    for i in range(4):
        append(table, "ab"[i % 2], lo=i * 100, rows=10)
    fresh = LakeTable.open(table_path)
    scan = fresh.scan([("id", "<", 150)])
    assert (len(scan.files), scan.files_skipped) == (2, 2)
    stats = scan.files[0].stats
    assert isinstance(stats, LazyStats) and stats.columns.loads == 1  # `id` only
    assert fresh.scan([("dt", "=", "a")]).files_skipped == 2  # partition values need no stats
    assert stats.columns.loads == 1


def test_damaged_stats_are_taken_from_the_log(table_path: str, caplog: pytest.LogCaptureFixture) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"}, schema=SCHEMA)
    build(table, 5)
    want = fold(table, 5)
    _damage_stats_columns(table.storage.path(paths.checkpoint_file(5)))
    fresh = LakeTable.open(table_path)
    with caplog.at_level(logging.WARNING):
        scan = fresh.scan([("id", "<", 20)])
        assert {f.path for f in scan.files} == {p for p, f in want.files.items()
                                                if "id" not in f.stats or f.stats["id"].min < 20}
        assert fresh.state().files == want.files
    assert "taking the stats from the log" in caplog.text


def test_lazy_stats_behave_like_a_dict(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"}, schema=SCHEMA)
    build(table, 5)
    want = fold(table, 5).files
    for path, f in LakeTable.open(table_path).state().files.items():
        plain = want[path].stats
        assert isinstance(f.stats, LazyStats)
        assert f.stats == plain and dict(f.stats) == plain and len(f.stats) == len(plain)
        assert set(f.stats) == set(plain)
        assert ("id" in f.stats) == ("id" in plain) and "nope" not in f.stats
        assert f.stats.get("nope") is None and f.stats.get("nope", 1) == 1
        assert pickle.loads(pickle.dumps(f)) == f and type(pickle.loads(pickle.dumps(f)).stats) is dict
        assert copy.deepcopy(f) == f and repr(f.stats) == repr(dict(f.stats))
        assert DataFile.from_dict(f.to_dict()) == f


def test_retention_keeps_the_newest_checkpoints_and_time_travel_still_works(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2", "checkpoint.retain.count": "3"})
    expected = {0: set()}
    for i in range(12):
        _, (item,) = append(table, "ab"[i % 2])
        expected[i + 1] = expected[i] | {item.path}
    assert [paths.checkpoint_of(n) for n in table.storage.list_dir(paths.CHECKPOINTS)] == [
        (8, "parquet"), (10, "parquet"), (12, "parquet")]
    for seq in range(13):  # before checkpoint 8 the log is folded from entry 0
        assert live_paths(LakeTable.open(table_path), seq) == expected[seq]
    assert live_paths(LakeTable.open(table_path)) == expected[12]


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "x"])
def test_checkpoint_retain_count_is_validated(table_path: str, value: str) -> None:
    with pytest.raises(LakeSpecError) as info:
        make_table(table_path, {"checkpoint.retain.count": value})
    assert info.value.field == "properties.checkpoint.retain.count"


def test_retain_keeps_at_least_one(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "1", "checkpoint.retain.count": "1"})
    for _ in range(3):
        append(table)
    assert table.storage.list_dir(paths.CHECKPOINTS) == [os.path.basename(paths.checkpoint_file(3))]
    assert checkpoints.retain(table.storage, 0, table.commit_log.start) == []
    assert live_paths(LakeTable.open(table_path), 1) == live_paths(table, 1)


def test_checkpoints_are_written_whole(table_path: str) -> None:
    """The bytes are built in memory and renamed into place: no temporary file stays behind."""
    table = make_table(table_path, {"checkpoint.interval": "2"})
    for _ in range(4):
        append(table)
    names = table.storage.list_dir(paths.CHECKPOINTS)
    assert all(paths.checkpoint_of(n) is not None for n in names) and len(names) == 2
    hint = table.storage.read_json(paths.LAST_CHECKPOINT)
    assert hint["seq"] == 4 and hint["bytes"] == table.storage.size(paths.checkpoint_file(4))


@pytest.mark.parametrize("hint", ['{"seq": null}', '{"seq": "x"}', "[]", "null", '{"seq": true}', '{"seq": 99}',
                                  '{"seq": 2, "format": "nope"}', "{", ""])
def test_a_malformed_hint_falls_back_and_the_table_still_writes(table_path: str, hint: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2"})
    for part in "abc":
        append(table, part)
    Path(table.storage.path(paths.LAST_CHECKPOINT)).write_text(hint)
    fresh = LakeTable(table_path)
    assert live_paths(fresh) == live_paths(table) and len(live_paths(fresh)) == 3
    append(fresh, "d")
    assert len(live_paths(LakeTable(table_path))) == 4


def test_a_legacy_checkpoint_with_null_files_falls_back_to_the_log(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2"})
    for part in "abc":
        append(table, part)
    raw = fold(table, 2).to_dict()
    raw["files"] = None
    for name in os.listdir(table.storage.path(paths.CHECKPOINTS)):
        os.unlink(os.path.join(table.storage.path(paths.CHECKPOINTS), name))
    table.storage.write_json(paths.checkpoint_file(2, "json"), raw)
    table.storage.write_json(paths.LAST_CHECKPOINT, {"seq": 2})
    fresh = LakeTable(table_path)
    assert live_paths(fresh) == live_paths(table)
    append(fresh, "d")
    assert len(live_paths(LakeTable(table_path))) == 4
