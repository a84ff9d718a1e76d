"""The spec's history (`format.spec_history`): indexed in the state and its checkpoints, so reading it costs one
log read per spec change; a checkpoint from before the index falls back to scanning the log (no Spark)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format import checkpoints, spec_history
from airflow_lake.lake.format.log import CommitLog, LogEntry
from airflow_lake.lake.spec.table_spec import TableSpec
from tests.lake.lake_core_helpers import append, make_table


def altered_table(path: str) -> tuple[LakeTable, TableSpec]:
    """A table created (entry 0), 12 appends, an alter_table (entry 13), 12 appends: head 25, a checkpoint there."""
    table = make_table(path, {"checkpoint.interval": "5"})
    created = table.spec
    for _ in range(12):
        append(table, "a")
    run(None, "alter_table", {"table": path, "changes": [{"add": "note", "type": "STRING"}]})
    for _ in range(12):
        append(table, "a")
    return table, created


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seqs of the log entries read from now on."""
    seen: list[int] = []
    real = CommitLog.read

    def read(self: CommitLog, seq: int) -> LogEntry:
        seen.append(seq)
        return real(self, seq)

    monkeypatch.setattr(CommitLog, "read", read)
    return seen


def test_the_history_is_indexed_and_costs_one_read_per_change(table_path: str, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    _, created = altered_table(table_path)
    table = LakeTable.open(table_path)  # a fresh object: its state comes from checkpoint 25
    assert table.storage.read_json("_lake/_last_checkpoint.json")["seq"] == 25
    reads = counting_reads(monkeypatch)
    assert table.state().spec_changes == [0, 13]
    reached = spec_history.reached_from(table, created)
    assert sorted(set(reads)) == [0, 13]  # not the 24 appends
    assert [(c.seq, c.operation) for c in reached.changes] == [(13, "alter_table")]
    assert [str(d) for d in reached.differences] == ["columns: added `note` string"]
    assert reached.since is not None and reached.since.seq == 0


def test_a_checkpoint_from_before_the_index_falls_back_to_the_log(table_path: str) -> None:
    table, created = altered_table(table_path)
    legacy = dataclasses.replace(table.state().copy(), spec_changes=None)
    checkpoints.write(table.storage, legacy)  # as written before the index: no `spec_changes`
    fresh = LakeTable.open(table_path)
    assert fresh.state().spec_changes is None
    assert [c.seq for c in spec_history.spec_changes(fresh)] == [0, 13]
    assert [c.operation for c in spec_history.reached_from(fresh, created).changes] == ["alter_table"]


def test_the_index_folds_the_same_as_the_log(table_path: str) -> None:
    table, _ = altered_table(table_path)
    entries: list[Any] = list(table.commit_log.entries(-1))
    assert table.state().spec_changes == [e.seq for e in entries if "spec" in e.metadata] == [0, 13]
    assert checkpoints.read(table.storage, 25, "parquet").spec_changes == [0, 13]
    assert checkpoints.read(table.storage, 10, "parquet").spec_changes == [0]
