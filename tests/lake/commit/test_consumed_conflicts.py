"""A commit that records consumed positions conflicts with an entry since its base that moved one of them (another
run of the consumer, a restore): the retryable `LakeCommitConflict`, nothing committed."""

from __future__ import annotations

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeTable
from airflow_lake.lake.format.consumed import CONSUMED
from tests.lake.lake_core_helpers import append, data_file, make_table, put_file


def positions(**seqs: int) -> dict[str, dict[str, dict[str, int | str]]]:
    return {CONSUMED: {u: {"seq": s, "table": f"/lake/{u}", "view": u} for u, s in seqs.items()}}


def test_two_runs_of_one_consumer_from_one_base_commit_once(table_path: str) -> None:
    table = make_table(table_path)
    base = table.state()
    first = table.begin("commit", "write", positions(up=3), base=base)
    second = table.begin("commit", "write", positions(up=3), base=base)
    mine = data_file(second, "a")
    put_file(table, mine)
    first.commit()
    head = table.commit_log.head()
    with pytest.raises(LakeCommitConflict, match=r"'/lake/up' at seq 3 \(this job read its changes since its first"):
        second.commit(added=[mine])
    second.abort()
    fresh = LakeTable.open(table_path)
    assert fresh.consumed() == {"up": 3}
    assert mine.path not in {f.path for f in fresh.snapshot().files}
    assert [fresh.commit_log.read(s).action for s in range(head + 1, fresh.commit_log.head() + 1)] == ["rollback"]


def test_positions_recorded_at_commit_are_checked_too_and_other_upstreams_do_not_conflict(table_path: str) -> None:
    table = make_table(table_path)
    base = table.state()
    other = table.begin("commit", "write", positions(up_a=5), base=base)
    mine = table.begin("commit", "write", base=base)
    other.commit()
    append(table)  # an append that consumed nothing
    mine.commit(metadata=positions(up_b=2))  # another upstream: no conflict
    late = table.begin("commit", "write", base=base)
    with pytest.raises(LakeCommitConflict, match="another run consumed them"):
        late.commit(metadata=positions(up_a=5))  # (given to commit, not begin)
    late.abort()
    assert LakeTable.open(table_path).consumed() == {"up_a": 5, "up_b": 2}


def test_a_restore_since_the_base_conflicts_and_the_retry_starts_from_its_positions(table_path: str) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write", positions(up=1))
    kept = data_file(txn, "a")
    put_file(table, kept)
    target = txn.commit(added=[kept]).seq
    txn = table.begin("commit", "write", positions(up=4))
    later = data_file(txn, "b")
    put_file(table, later)
    txn.commit(added=[later])
    base = table.state()  # the consumer read position 4
    moved = table.begin("commit", "write", positions(up=9), base=base)
    table.restore(to_seq=target)  # position back to 1: the changes after 1 are to be consumed again
    with pytest.raises(LakeCommitConflict):  # (a restore conflicts with every commit since its base)
        moved.commit()
    moved.abort()
    assert LakeTable.open(table_path).consumed() == {"up": 1}
    retry = table.begin("commit", "write", positions(up=9))  # the retry reads position 1: no conflict
    retry.commit()
    assert LakeTable.open(table_path).consumed() == {"up": 9}
