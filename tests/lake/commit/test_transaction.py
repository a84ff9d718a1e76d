"""A commit is what its log entry says: housekeeping after the entry landed never turns it into a failure."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format import paths
from tests.lake.lake_core_helpers import append, live_paths, make_table
from tests.stores import without_gcsfs


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


@pytest.mark.parametrize(("path", "problem"), [
    ("foo://bucket/t", "table: cannot open 'foo://bucket/t'"),
    ("gs://bucket/t", "table: cannot open 'gs://bucket/t'"),  # gcsfs made uninstalled below
])
def test_unknown_or_uninstalled_stores_are_a_spec_error(path: str, problem: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    without_gcsfs(monkeypatch)
    with pytest.raises(LakeSpecError, match=problem):
        LakeTable.create(path, {"schema": "id BIGINT"})
    with pytest.raises(LakeSpecError, match=problem):
        LakeTable.open(path)


def test_a_table_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(LakeSpecError, match="is a file, not a directory"):
        LakeTable.create(str(target), {"schema": "id BIGINT"})
    assert target.read_text() == "x"


def test_writing_something_else_than_a_spark_dataframe_is_refused(table_path: str) -> None:
    import pandas as pd

    table = LakeTable.create(table_path, {"schema": "id BIGINT"})
    with pytest.raises(LakeSpecError, match=r"df: a pandas\.core\.frame\.DataFrame is not a Spark DataFrame"):
        table.write(pd.DataFrame({"id": [1]}))  # type: ignore[arg-type]
    assert table.commit_log.head() == 0
