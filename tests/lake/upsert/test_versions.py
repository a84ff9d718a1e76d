"""The upsert version index (version -> the live upsert that applied it): folded with the state, stored in
checkpoints, rebuilt from the log for checkpoints written before it, and what lets an upsert look up the
versions it clashes with by reading only those upserts' log entries. Metadata only: no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeError, LakeTable
from airflow_lake.lake.format import checkpoints, paths
from airflow_lake.lake.format.log import CommitLog
from airflow_lake.lake.format.table_state import UPSERT_ACTION, TableState
from airflow_lake.lake.upsert import versions as versions_module
from tests.lake.lake_core_helpers import append, data_file, make_table


def upsert(table: LakeTable, versions: list[int], fingerprint: str, removed: tuple[str, ...] = ()) -> list[str]:
    """An upsert commit as `versioned_upsert` records it (one synthetic delta file); returns its files."""
    txn = table.begin(UPSERT_ACTION, "versioned_upsert")
    added = [data_file(txn, "a")]
    txn.commit(added=added, removed=removed, versions=versions,
               metadata={"versions": versions, "fingerprint": fingerprint, "columns": ["v"]})
    return [f.path for f in added]


def history(table: LakeTable, upto: int | None = None) -> dict[int, tuple[int, str]]:
    """Version -> (seq, fingerprint) of the upsert that applies it after entry `upto` (default: the head), by
    reading every log entry (the truth)."""
    out: dict[int, tuple[int, str]] = {}
    for entry in table.commit_log.entries(-1, upto):
        if entry.action == UPSERT_ACTION:
            for version in entry.metadata["versions"]:
                out[int(version)] = (entry.seq, entry.metadata["fingerprint"])
    return out


def build(table: LakeTable) -> None:
    """Upserts in any order, a multi-version one, plain appends between them, one upsert replaced by a later one,
    and versions that need all 64 bits."""
    replaced: list[str] = []
    for i, version in enumerate([7, 3, 20240101, -(2**63), 2**63 - 1, 11]):
        files = upsert(table, [version], f"f{version}")
        if version == 3:
            replaced = files
        if i % 2:
            append(table)
    upsert(table, [30, 31, 32], "batch")
    upsert(table, [3], "f3-corrected", removed=tuple(replaced))  # replace_version: the later upsert wins


def test_the_index_is_folded_checkpointed_and_equals_the_log(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "4"})
    build(table)
    want = {v: seq for v, (seq, _) in history(table).items()}
    assert table.state().versions == want
    assert table.state().versions[3] == table.commit_log.head()  # the replacing upsert
    stored = [checkpoints.read(table.storage, seq, "parquet")
              for seq in range(4, table.commit_log.head() + 1, 4)]
    assert len(stored) == 2  # after entries 4 and 8
    for state in stored:
        assert state.versions == {v: seq for v, (seq, _) in history(table, state.seq).items()}, state.seq
    assert LakeTable.open(table_path).state().versions == want  # a fresh process: from the newest checkpoint


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_checkpoint_written_before_the_index_gets_it_from_the_log(table_path: str, fmt: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "1000"})
    build(table)
    head = table.commit_log.head()
    old = table.state().copy()
    old.versions = None  # what the writers before the index stored
    if fmt == "json":
        table.storage.write_json(paths.checkpoint_file(head, "json"), old.to_dict())
    else:
        table.storage.write_bytes(paths.checkpoint_file(head), checkpoints.encode(old))
    table.storage.write_json(paths.LAST_CHECKPOINT, {"seq": head, "format": fmt})
    assert checkpoints.read(table.storage, head, fmt).versions is None
    fresh = LakeTable.open(table_path)
    assert fresh.state().versions == {v: seq for v, (seq, _) in history(table).items()}
    upsert(fresh, [40], "f40")  # and from there on it is folded as usual
    assert fresh.state().versions is not None and fresh.state().versions[40] == fresh.commit_log.head()


def test_without_the_log_before_an_old_checkpoint_an_upsert_says_what_is_missing(table_path: str) -> None:
    """If the entries before an index-less checkpoint are gone (the log is the truth: they never should be), the
    index stays unknown and looking up versions fails naming the missing entry, rather than missing a clash."""
    table = make_table(table_path, {"checkpoint.interval": "1000"})
    upsert(table, [1], "f1")
    head = table.commit_log.head()
    old = table.state().copy()
    old.versions = None
    table.storage.write_bytes(paths.checkpoint_file(head), checkpoints.encode(old))
    table.storage.write_json(paths.LAST_CHECKPOINT, {"seq": head, "format": "parquet"})
    Path(table.storage.path(paths.log_file(0))).unlink()  # only the checkpoint can give the state now
    fresh = LakeTable.open(table_path)
    assert fresh.state().versions is None and fresh.snapshot().seq == head  # reads still work
    with pytest.raises(LakeError, match=r"00000000000000000000\.json is missing"):
        versions_module.applied(fresh, [1])


def test_applied_reads_only_the_clashing_upserts_entries(table_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_table(table_path, {"checkpoint.interval": "10"})
    for version in range(60):
        upsert(table, [version], f"f{version}")
    build(table)
    expected = history(table)
    fresh = LakeTable.open(table_path)
    fresh.state()  # resolve the snapshot first: what `applied` adds is the cost under test
    reads: list[int] = []
    original = CommitLog.read

    def counting(log: CommitLog, seq: int) -> Any:
        reads.append(seq)
        return original(log, seq)

    monkeypatch.setattr(CommitLog, "read", counting)
    got = versions_module.applied(fresh, [3, 30, 31, 59, 999])
    assert {v: (a.entry.seq, a.fingerprint) for v, a in got.items()} == {
        v: expected[v] for v in (3, 30, 31, 59)}  # 999 was never upserted
    assert sorted(reads) == sorted({expected[v][0] for v in (3, 30, 59)})  # 30 and 31: one entry
    assert table.commit_log.head() > 60


def test_the_state_round_trips_through_json_with_the_index() -> None:
    state = TableState(versions={-(2**63): 3, 2**63 - 1: 4, 7: 5})
    assert TableState.from_dict(state.to_dict()).versions == state.versions
    assert TableState.from_dict({k: v for k, v in state.to_dict().items() if k != "versions"}).versions is None


@pytest.mark.parametrize(("value", "shown"), [(1e300, "1e+300"), (2**70, str(2**70)), (float("inf"), "inf"),
                                              ("1e300", "'1e300'")])
def test_a_version_out_of_range_is_named_shortly(value: object, shown: str) -> None:
    """A float like 1e300 was printed as its 301 digits."""
    from airflow_lake.lake.errors import LakeSpecError
    from airflow_lake.lake.upsert.versions import parse_version

    with pytest.raises(LakeSpecError) as caught:
        parse_version(value)
    assert str(caught.value).startswith(f"version: {shown} is not a ") and len(str(caught.value)) < 120
