"""Clean: removed files past the retention are deleted; time travel before them is refused (no Spark)."""

from __future__ import annotations

import os
import time
from typing import NamedTuple

import pytest

from airflow_lake.lake import LakeSnapshotNotFound, LakeTable
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.maintenance.clean import clean
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table, on_disk, put_file


def replace(table: LakeTable, old: DataFile, part: str = "a") -> tuple[LogEntry, DataFile]:
    """Replace `old` by a new file on disk."""
    txn = table.begin("replace", "compact")
    new = data_file(txn, part)
    put_file(table, new)
    return txn.commit(added=[new], removed=[old.path]), new


class History(NamedTuple):
    e1: LogEntry
    e2: LogEntry
    e3: LogEntry
    f1: DataFile
    f2: DataFile
    f3: DataFile
    g1: DataFile
    g2: DataFile


def history(table: LakeTable) -> History:
    """seq 1 adds f1, f2, f3; seq 2 replaces f1 by g1; seq 3 (a bit later) replaces f2 by g2."""
    e1, (f1, f2, f3) = append(table, "a", files=3, disk=True)
    e2, g1 = replace(table, f1)
    time.sleep(0.05)
    e3, g2 = replace(table, f2)
    assert e2.completed_at < e3.completed_at
    return History(e1, e2, e3, f1, f2, f3, g1, g2)


def test_clean_deletes_only_files_removed_before_the_retention(table_path: str) -> None:
    table = make_table(table_path)
    h = history(table)
    e2, e3, f1, f2, f3, g1, g2 = h.e2, h.e3, h.f1, h.f2, h.f3, h.g1, h.g2
    size_f1 = os.path.getsize(table.storage.path(f1.path))
    # the retention window ends between the two replaces: f1 is expired, f2 was removed recently
    now = (e2.completed_at + e3.completed_at) / 2 + 3600
    entry = clean(table, retain_hours=1, force=True, now=now)

    assert entry is not None and entry.seq == 4 and entry.action == "clean"
    assert entry.metadata["deleted"] == [f1.path]
    assert entry.metadata["cleaned_before"] == e2.seq
    assert entry.metadata["retain_hours"] == 1
    assert entry.metrics["files_deleted"] == 1 and entry.metrics["bytes_freed"] == size_f1
    assert not on_disk(table, f1)
    assert all(on_disk(table, f) for f in (f2, f3, g1, g2))
    assert live_paths(table) == {f3.path, g1.path, g2.path}
    state = table.state()
    assert set(state.tombstones) == {f2.path}
    assert state.cleaned_before == e2.seq

    # time travel: snapshots before the removal of f1 needed it and are gone; later ones resolve
    for as_of in (0, 1, h.e1.instant):
        with pytest.raises(LakeSnapshotNotFound, match="retention"):
            table.snapshot(as_of)
    with pytest.raises(LakeSnapshotNotFound):
        table.scan(as_of=1)
    assert live_paths(table, 2) == {f2.path, f3.path, g1.path}
    assert live_paths(table, e3.instant) == {f3.path, g1.path, g2.path}
    fresh = LakeTable(table_path)
    with pytest.raises(LakeSnapshotNotFound):
        fresh.snapshot(1)
    assert live_paths(fresh, 2) == live_paths(table, 2)

    # the same clean again: nothing to do
    assert clean(table, retain_hours=1, force=True, now=now) is None
    assert table.commit_log.head() == 4
    # later, f2 expires too
    entry = clean(table, retain_hours=1, force=True, now=e3.completed_at + 3601)
    assert entry is not None and entry.metadata["deleted"] == [f2.path]
    assert not on_disk(table, f2) and table.state().tombstones == {}
    with pytest.raises(LakeSnapshotNotFound):
        table.snapshot(2)
    assert live_paths(table, 3) == {f3.path, g1.path, g2.path}


def test_clean_with_zero_retention_and_nothing_to_do(table_path: str) -> None:
    table = make_table(table_path)
    assert table.clean(retain_hours=0, force=True) is None
    _, (f1, f2) = append(table, "a", files=2, disk=True)
    assert table.clean(retain_hours=0, force=True) is None  # live files are never cleaned
    _, g = replace(table, f1)
    time.sleep(0.01)
    entry = table.clean(retain_hours=0, request_id="clean-1", force=True)
    assert entry is not None and entry.metrics["files_deleted"] == 1
    assert table.find_request("clean-1") == entry
    assert not on_disk(table, f1) and on_disk(table, f2) and on_disk(table, g)
    assert table.clean(retain_hours=0, force=True) is None
    assert [i.action for i in table.timeline()] == ["create", "commit", "replace", "clean"]


def test_default_retention_comes_from_the_table_property(table_path: str) -> None:
    table = make_table(table_path, {"clean.retain.hours": "2"})
    _, (f1,) = append(table, "a", disk=True)
    replace(table, f1)
    assert table.clean() is None  # removed seconds ago, kept for two hours
    assert on_disk(table, f1)
    entry = clean(table, now=time.time() + 2 * 3600 + 1)
    assert entry is not None and entry.metadata["retain_hours"] == 2.0
    assert not on_disk(table, f1)


def test_clean_tolerates_files_already_gone(table_path: str) -> None:
    table = make_table(table_path)
    _, (f1, f2) = append(table, "a", files=2, disk=True)
    txn = table.begin("replace", "compact")
    txn.commit(added=[], removed=[f1.path, f2.path])
    os.unlink(table.storage.path(f1.path))
    size_f2 = os.path.getsize(table.storage.path(f2.path))
    entry = clean(table, retain_hours=0, force=True, now=time.time() + 1)
    assert entry is not None
    assert entry.metrics == {"files_deleted": 2, "bytes_freed": size_f2}
    assert not on_disk(table, f2)
    assert live_paths(table) == set()


def test_clean_survives_checkpoints(table_path: str) -> None:
    table = make_table(table_path, {"checkpoint.interval": "5"})
    _, (f1,) = append(table, "a", disk=True)
    e2, _ = replace(table, f1)
    entry = clean(table, retain_hours=0, force=True, now=time.time() + 1)
    assert entry is not None and entry.seq == 3
    for _ in range(3):
        append(table, "b")
    assert table.storage.list_dir("_lake/checkpoints")  # seq 5 was checkpointed after the clean
    fresh = LakeTable(table_path)
    assert fresh.state().cleaned_before == e2.seq
    with pytest.raises(LakeSnapshotNotFound):
        fresh.snapshot(1)
    assert len(fresh.snapshot(2).files) == 1
