"""Consumed positions: folded from the log entries' metadata, kept by checkpoints (Parquet and JSON), reset by a
restore to the restored snapshot's, read back with `LakeTable.consumed`."""

from __future__ import annotations

from typing import Any

from airflow_lake.lake import LakeTable
from airflow_lake.lake.format import checkpoints
from airflow_lake.lake.format.consumed import CONSUMED
from airflow_lake.lake.format.table_state import TableState
from tests.lake.lake_core_helpers import append, data_file, make_table, put_file


def consume(table: LakeTable, positions: dict[str, int], *, files: int = 0) -> int:
    """A commit that records `positions` (upstream identity -> seq), as an incremental job's does."""
    metadata = {CONSUMED: {u: {"seq": s, "table": f"/lake/{u}", "view": f"v_{u}"} for u, s in positions.items()}}
    txn = table.begin("commit", "write", metadata)
    added = [data_file(txn, "a") for _ in range(files)]
    for item in added:
        put_file(table, item)
    return txn.commit(added=added).seq


def test_positions_fold_per_upstream_and_time_travel(table_path: str) -> None:
    table = make_table(table_path)
    assert table.consumed() == {}
    first = consume(table, {"up1": 3})
    append(table)  # a commit that consumed nothing keeps the positions
    consume(table, {"up2": 0})
    last = consume(table, {"up1": 7})
    assert LakeTable.open(table_path).consumed() == {"up1": 7, "up2": 0}
    assert table.consumed(first) == {"up1": 3}
    assert table.consumed(last - 1) == {"up1": 3, "up2": 0}
    assert table.consumed(0) == {}


def test_checkpoints_keep_the_positions_and_older_ones_read_as_none(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2"})
    consume(table, {"up1": 4, "up2": 9}, files=1)  # seq 1
    consume(table, {"up1": 5})  # seq 2: a checkpoint
    fresh = LakeTable.open(table_path)
    assert fresh.storage.exists("_lake/checkpoints/00000000000000000002.parquet")
    from_checkpoint = checkpoints.read(fresh.storage, 2, "parquet")
    assert from_checkpoint.consumed == {"up1": 5, "up2": 9}
    assert fresh.consumed() == {"up1": 5, "up2": 9}
    # the JSON form (the legacy checkpoint format) keeps them too
    assert TableState.from_dict(from_checkpoint.to_dict()).consumed == {"up1": 5, "up2": 9}
    # a state written before positions existed: no key, so nothing consumed
    legacy: dict[str, Any] = from_checkpoint.to_dict()
    legacy.pop(CONSUMED)
    assert TableState.from_dict(legacy).consumed == {}
    bare = TableState(seq=0, instant="x")
    assert checkpoints.decode(checkpoints.encode(bare)).consumed == {}


def test_restore_sets_the_positions_of_the_restored_snapshot(table_path: str) -> None:
    table = make_table(table_path)
    target = consume(table, {"up1": 2}, files=1)
    consume(table, {"up1": 6, "up2": 1}, files=1)
    restored = table.restore(to_seq=target)
    assert restored.entry is not None and restored.entry.metrics["consumed_changed"] is True
    assert LakeTable.open(table_path).consumed() == {"up1": 2}
    # only the positions differ (a commit that recorded positions and no files): still restored, not a no-op
    before = LakeTable.open(table_path).commit_log.head()
    consume(table, {"up1": 8})
    again = table.restore(to_seq=before)
    assert again.entry is not None and not again.plan.removed and not again.plan.readded
    assert LakeTable.open(table_path).consumed() == {"up1": 2}
    assert table.restore(to_seq=before).entry is None  # now it is the target: nothing to commit
