"""The window of a change read (`lake.changes.window`): which commits change data, the files they removed as they
were live before them, bounds by seq, instant and time, bad bounds, and starts older than what `clean` kept. No
Spark: synthetic commits (`tests/lake/lake_core_helpers.py`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from airflow_lake.lake import LakeChangesUnavailable, LakeSnapshotNotFound, LakeSpecError, LakeTable
from airflow_lake.lake.buckets import rewrite
from airflow_lake.lake.changes.window import FROM_EMPTY, LAYOUT_OPERATIONS, change_window, oldest_start
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION
from airflow_lake.lake.format.operation_names import current_name
from airflow_lake.lake.maintenance.clean import clean
from airflow_lake.lake.upsert import compact
from tests.lake.format.test_log_open import build
from tests.lake.lake_core_helpers import append, data_file, make_table, put_file


def test_the_layout_only_operations_are_the_operations_own_names() -> None:
    assert {EXECUTE_OPERATION, rewrite.OPERATION, compact.OPERATION} == LAYOUT_OPERATIONS
    assert current_name("compact") in LAYOUT_OPERATIONS  # entries written before the rename


def replace(table: LakeTable, operation: str, removed: list[str], part: str = "a") -> int:
    txn = table.begin("replace", operation)
    return txn.commit(added=[data_file(txn, part)], removed=removed).seq


@pytest.fixture
def history(tmp_path: Path) -> LakeTable:
    """1: append a; 2: append b; 3: delete rewrites 1's file; 4: clustering of b; 5: alter; 6: append a."""
    table = make_table(str(tmp_path / "t"))
    _, first = append(table, "a")
    _, second = append(table, "b")
    replace(table, "delete", [first[0].path])
    replace(table, "execute_clustering", [second[0].path], part="b")
    table.alter_table([{"set_properties": {"user.note": "x"}}])
    append(table, "a")
    return table


def test_a_window_lists_the_data_changing_commits_and_skips_the_rest(history: LakeTable) -> None:
    window = change_window(history, 0)
    assert (window.start, window.end) == (0, 6)
    assert [c.seq for c in window.commits] == [1, 2, 3, 6] and window.skipped == (4, 5)
    assert [c.operation for c in window.commits] == ["write", "write", "delete", "write"]
    rewrite_ = window.commits[2]
    assert rewrite_.removed == window.commits[0].added  # the DataFile as it was live before: stats and all
    assert rewrite_.completed_at == history.commit_log.read(3).completed_at
    assert window.partitions() == [{"dt": "a"}, {"dt": "b"}] and not window.empty and window.initial == ()
    assert window.spec == history.spec

    layout = change_window(history, 3, 5)  # a clustering and an alter: nothing to read
    assert layout.empty and layout.commits == () and layout.skipped == (4, 5) and layout.partitions() == []
    assert change_window(history, 6, 6).empty  # start == end: no change

    whole = change_window(history, -1)
    assert whole.start == FROM_EMPTY and whole.commits == ()
    assert {f.path for f in whole.initial} == set(history.state().files) and whole.end_completed_at > 0


def test_bounds_by_seq_instant_and_time(history: LakeTable) -> None:
    entries = {e.seq: e for e in history.entries_since(-1)}
    window = change_window(history, entries[2].instant, entries[5].instant)
    assert (window.start, window.end) == (2, 5)
    assert (change_window(history, "2", " 5 ").start, change_window(history, "2", "5").end) == (2, 5)
    at = entries[3].completed_at
    assert change_window(history, at, at + 0.0001).start == 3  # the last snapshot completed at or before it
    later = at + 1e-5  # (text holds microseconds: a time rounded down would be before entry 3)
    assert later < entries[4].completed_at
    iso = dt.datetime.fromtimestamp(later, tz=dt.UTC).isoformat()
    assert change_window(history, iso).start == 3
    assert change_window(history, iso.replace("+00:00", "")).start == 3  # without a zone: UTC
    assert change_window(history, f"{later:.6f}").start == 3  # UNIX seconds as text, with a decimal point
    before = entries[0].completed_at - 60
    assert change_window(history, before).start == FROM_EMPTY  # before the table: everything is new since
    with pytest.raises(LakeSpecError, match="before the table was created"):
        change_window(history, 0, before)


@pytest.mark.parametrize(("start", "end", "problem"), [
    (4, 2, "starts after it ends"),
    (0, 7, "does not exist: the log .* ends at 6"),
    (-2, None, "-2 is no snapshot"),
    (True, None, "is not a snapshot"),
    ("yesterday", None, "neither a snapshot nor a point in time"),
    ("20991231235959999", None, "not a completed instant"),
    (1_772_344_800, None, r"give it as a float: 1772344800\.0"),
])
def test_bad_windows_are_refused_naming_the_fix(history: LakeTable, start: object, end: object,
                                                problem: str) -> None:
    with pytest.raises(LakeSpecError, match=problem) as err:
        change_window(history, start, end)  # type: ignore[arg-type]
    assert "Fix:" in str(err.value)


def test_a_start_before_what_clean_kept_names_the_oldest_start(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "t"))
    _, files = append(table, "a", disk=True)
    append(table, "b", disk=True)
    txn = table.begin("replace", "delete")
    added = data_file(txn, "a")
    put_file(table, added)
    removing = txn.commit(added=[added], removed=[files[0].path]).seq  # 3
    append(table, "a", disk=True)
    assert clean(table, 0, force=True) is not None  # deletes the removed file: snapshots before 3 lost it
    assert oldest_start(table) == removing
    for start in (0, 1, removing - 1):
        with pytest.raises(LakeChangesUnavailable) as err:
            change_window(table, start)
        assert isinstance(err.value, LakeSnapshotNotFound) and err.value.oldest == removing
        message = str(err.value)
        assert f"oldest snapshot changes can start from is seq {removing}" in message
        assert f"start at seq {removing} or later" in message and "clean.retain.hours" in message
    assert [c.seq for c in change_window(table, removing).commits] == [4]
    assert len(change_window(table, -1).initial) == 3  # the whole table as inserts still works


def test_a_start_before_the_log_retention_names_the_oldest_start(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = build(path, 30, hours_apart=1.0, properties={"log.retain.hours": "10.5", "clean.retain.hours": "1"})
    clean(table)
    table = LakeTable(path)
    oldest = table.oldest_reachable()
    assert table.commit_log.start() > 1 and oldest_start(table) == oldest
    with pytest.raises(LakeChangesUnavailable) as err:
        change_window(table, 5)
    assert err.value.oldest == oldest and "log.retain.hours" in str(err.value)
    assert f"is seq {oldest}" in str(err.value)
    first = table.commit_log.read(0).completed_at
    with pytest.raises(LakeChangesUnavailable, match="expired the log entries"):
        change_window(table, first + 60)  # a time whose snapshot the log no longer holds
    window = change_window(table, oldest)
    assert [c.seq for c in window.commits] == list(range(oldest + 1, 31))
    with pytest.raises(LakeChangesUnavailable, match=f"end at seq {oldest} or later"):
        change_window(table, -1, 5)
