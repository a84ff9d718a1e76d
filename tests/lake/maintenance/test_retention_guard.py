"""The retention guard: `clean` and orphan removal refuse a retention shorter than the table's `clean.retain.hours`
unless forced (delta-rs' enforce_retention_duration); a forced run warns and is recorded (no Spark)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.maintenance.clean import clean
from airflow_lake.lake.maintenance.orphans import remove_orphan_files
from tests.lake.lake_core_helpers import append, data_file, make_table, on_disk, put_file


def replaced(table: LakeTable) -> str:
    """A file replaced just now: removed, on disk, what clean would delete."""
    _, (old,) = append(table, "a", disk=True)
    txn = table.begin("replace", "compact")
    new = data_file(txn, "a")
    put_file(table, new)
    txn.commit(added=[new], removed=[old.path])
    return old.path


def debris(table: LakeTable, hours_old: float) -> Path:
    path = Path(table.storage.path("dt=a/debris.parquet"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    when = time.time() - hours_old * 3600
    os.utime(path, (when, when))
    return path


def test_clean_below_the_table_retention_is_refused_unless_forced(table_path: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    table = make_table(table_path, {"clean.retain.hours": "24"})
    old = replaced(table)
    head = table.commit_log.head()
    later = time.time() + 3 * 3600  # the file was removed 3 h before "now"
    with pytest.raises(LakeSpecError) as caught:
        clean(table, retain_hours=1, now=later)
    message = str(caught.value)
    assert caught.value.field == "retain_hours"
    assert "1 h is shorter than the table's retention (clean.retain.hours = 24 h)" in message
    assert "Nothing was deleted" in message and "Fix: Give retain_hours >= 24" in message
    assert "at create in `properties`" in message and "alter_table" in message and "force: true" in message
    assert on_disk(table, old) and table.commit_log.head() == head
    with pytest.raises(LakeSpecError, match="retain_hours"):
        run(None, "clean", {"table": table_path, "retain_hours": 0})
    # the table's own retention or longer needs nothing
    assert clean(table, retain_hours=24, now=later) is None and clean(table, now=later) is None
    with caplog.at_level(logging.WARNING, logger="airflow_lake.lake.maintenance.retention"):
        entry = clean(table, retain_hours=1, now=later, force=True)
    assert entry is not None and entry.metadata["forced"] is True and entry.metadata["deleted"] == [old]
    assert any("forced" in r.getMessage() and "clean.retain.hours = 24 h" in r.getMessage() for r in caplog.records)
    assert not on_disk(table, old)


def test_a_table_with_a_short_retention_cleans_without_force(table_path: str) -> None:
    table = make_table(table_path, {"clean.retain.hours": "0.001"})  # the fix the message names, at create
    old = replaced(table)
    entry = clean(table, retain_hours=0.001, now=time.time() + 10)
    assert entry is not None and "forced" not in entry.metadata and not on_disk(table, old)
    done = run(None, "clean", {"table": table_path})  # the property is the default
    assert done["files_deleted"] == 0


def test_orphan_removal_below_the_table_retention_is_refused_unless_forced(table_path: str) -> None:
    table = make_table(table_path, {"clean.retain.hours": "24"})
    path = debris(table, hours_old=2)
    with pytest.raises(LakeSpecError) as caught:
        remove_orphan_files(table, 1)
    message = str(caught.value)
    assert caught.value.field == "older_than_hours" and "clean.retain.hours = 24 h" in message
    assert "a running writer" in message and "force" in message
    assert path.exists() and table.commit_log.head() == 0
    assert remove_orphan_files(table).orphans == ()  # by default it keeps what is younger than the retention
    dry = remove_orphan_files(table, 1, dry_run=True)  # a dry run deletes nothing: not refused
    assert dry.orphans == ("dt=a/debris.parquet",) and path.exists()
    spec = {"table": table_path, "older_than_hours": 1, "request_id": "r-1"}
    with pytest.raises(LakeSpecError, match="older_than_hours"):
        run(None, "remove_orphan_files", spec)
    done = run(None, "remove_orphan_files", {**spec, "force": True})
    assert done["files_deleted"] == 1 and not path.exists()
    assert table.commit_log.read(done["seq"]).metadata["forced"] is True
    with pytest.raises(LakeSpecError, match="force: expected true or false"):
        run(None, "remove_orphan_files", {**spec, "force": "yes"})
