"""What a restore costs, as a user of a big table meets it (no Spark): the checkpoint it needs is decoded once,
and the files it re-adds from a checkpoint keep their exact stats (every kind of value, missing keys) when the
restore entry writes them; folding the log leaves stats exact too (`JsonStats`)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from airflow_lake.lake import ColumnStats, LakeTable
from airflow_lake.lake.format import checkpoints
from airflow_lake.lake.format.data_files import DataFile
from tests.lake.lake_core_helpers import data_file, make_table, put_file

# every encoding a checkpoint stores stats in: int, float, bool, string, and json (mixed types); and a key that
# only some files have
STATS: list[dict[str, ColumnStats]] = [
    {"id": ColumnStats(1, 9, 0), "f": ColumnStats(-1.5, 2.25, 1), "b": ColumnStats(False, True, 0),
     "s": ColumnStats("a", "zz", 2), "m": ColumnStats(3, "x", 0)},
    {"id": ColumnStats(10, 19, 0), "f": ColumnStats(0.0, 0.5, 0), "b": ColumnStats(True, True, 3),
     "s": ColumnStats(None, None, 10), "m": ColumnStats([1, 2], {"k": 1}, 1), "only": ColumnStats(7, 7, 0)},
]


def commit_files(table: LakeTable, stats: list[dict[str, ColumnStats]], part: str = "a") -> list[DataFile]:
    txn = table.begin("commit", "write")
    files = [data_file(txn, part, stats=s) for s in stats]
    for f in files:
        put_file(table, f)
    txn.commit(added=files)
    return files


def plain(data: DataFile) -> dict[str, tuple[Any, Any, int]]:
    return {k: (v.min, v.max, v.null_count) for k, v in data.stats.items()}


def test_restoring_a_checkpointed_snapshot_decodes_its_checkpoint_once(table_path: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2"})
    commit_files(table, STATS)  # seq 1
    target = commit_files(table, STATS[:1], "b")  # seq 2: checkpointed
    bad = table.begin("replace", "compact")
    new = data_file(bad, "c")
    put_file(table, new)
    bad.commit(added=[new], removed=[target[0].path])  # seq 3: the bad load
    reads: list[int] = []
    real_read = checkpoints.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[1])
        return real_read(*args, **kwargs)

    monkeypatch.setattr(checkpoints, "read", counted)
    fresh = LakeTable.open(table_path)  # a fresh process's table: nothing decoded yet
    result = fresh.restore(to_seq=2)
    assert result.entry is not None and result.entry.seq == 4
    assert reads == [2]  # the latest state and the target both come from checkpoint 2, decoded once
    assert {f.path for f in fresh.snapshot().files} == {f.path for f in table.snapshot(2).files}


def test_files_re_added_from_a_checkpoint_keep_their_exact_stats(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "1"})  # every state is a checkpoint
    files = commit_files(table, STATS)  # seq 1
    txn = table.begin("replace", "compact")
    merged = data_file(txn, "a")
    put_file(table, merged)
    txn.commit(added=[merged], removed=[f.path for f in files])  # seq 2
    fresh = LakeTable.open(table_path)
    result = fresh.restore(to_seq=1)
    assert result.entry is not None
    readded = {f.path: f for f in result.entry.added}
    assert set(readded) == {f.path for f in files}
    for original in files:  # the entry as written, and as read back from the log by another reader
        assert plain(readded[original.path]) == plain(original)
        assert plain(LakeTable.open(table_path).commit_log.read(result.entry.seq).added[
            [f.path for f in result.entry.added].index(original.path)]) == plain(original)
    assert {f.path: plain(f) for f in LakeTable.open(table_path).snapshot().files} == \
        {f.path: plain(f) for f in files}


def test_stats_read_from_the_log_behave_as_the_dict_that_was_written(table_path: str) -> None:
    table = make_table(table_path)  # no checkpoint: every file comes from folding the log
    written = commit_files(table, STATS)
    read = {f.path: f for f in LakeTable.open(table_path).snapshot().files}
    for original in written:
        back = read[original.path]
        assert back == original and dict(back.stats) == dict(original.stats)
        assert set(back.stats) == set(original.stats) and len(back.stats) == len(original.stats)
        assert "only" in back.stats if "only" in original.stats else "only" not in back.stats
        assert back.stats.get("missing") is None and back.stats.get("id") == original.stats["id"]
        with pytest.raises(KeyError):
            back.stats["missing"]
        assert pickle.loads(pickle.dumps(back)).stats == dict(original.stats)  # Spark ships files to tasks
        assert back.to_dict() == original.to_dict()
