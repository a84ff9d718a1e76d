"""A commit is what its log entry says: housekeeping after the entry landed never turns it into a failure."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from airflow_lake.lake import LakeSpecError, LakeTable, paths
from tests.lake.lake_core_helpers import append, live_paths, make_table


def test_a_failed_checkpoint_after_the_entry_landed_is_not_a_failed_commit(
        table_path: str, caplog: pytest.LogCaptureFixture) -> None:
    table = make_table(table_path, {"checkpoint.interval": "2"})
    append(table, "a")
    # a regular file where the checkpoint directory should be: writing the checkpoint fails for real
    checkpoints = Path(table.storage.path(paths.CHECKPOINTS))
    if checkpoints.exists():
        for item in checkpoints.iterdir():
            item.unlink()
        checkpoints.rmdir()
    checkpoints.write_text("not a directory")
    with caplog.at_level(logging.WARNING):
        entry, added = append(table, "b")  # seq 2: a checkpoint is due and fails
    assert entry.seq == 2 and "writing its checkpoint failed" in caplog.text
    fresh = LakeTable(table_path)
    assert fresh.commit_log.head() == 2 and {f.path for f in added} <= live_paths(fresh)
    checkpoints.unlink()  # the disk has room again: the next checkpoint is written
    append(table, "c")
    entry, _ = append(table, "d")
    assert entry.seq == 4 and any(Path(table.storage.path(paths.CHECKPOINTS)).iterdir())
    assert len(live_paths(LakeTable(table_path))) == 4


def test_tables_only_on_paths_the_writer_can_write(tmp_path: Path) -> None:
    with pytest.raises(LakeSpecError, match="not a local or mounted path"):
        LakeTable.create("memory://lake/t", {"schema": "id BIGINT"})
    assert not LakeTable.exists("memory://lake/t")
    assert LakeTable.create(f"file://{tmp_path}/t", {"schema": "id BIGINT"}).url == f"{tmp_path}/t"
