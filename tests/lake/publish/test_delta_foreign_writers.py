"""A Delta writer that does not know our table must not damage it: the protocol's writer feature of our own
(`airflowLakeOwned`) makes delta-rs refuse every write — append, overwrite, delete, optimize — and `VACUUM`,
before anything is written or deleted (files on disk compared byte for byte), with or without column mapping."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_lake.lake.table import LakeTable
from tests.lake.publish.arrow_commits import commit, delta_rows, make_table, rows


def files_on_disk(root: str) -> dict[str, str]:
    """Every file under the table root with the hash of its bytes."""
    out = {}
    for directory, _, names in os.walk(root):
        for name in names:
            full = Path(directory, name)
            out[str(full.relative_to(root))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return out


def foreign_writes(path: str) -> dict[str, Callable[[], Any]]:
    one_row = pa.table({"id": pa.array([99], pa.int64()), "v": ["foreign"], "dt": ["a"]})
    return {
        "append": lambda: write_deltalake(path, one_row, mode="append"),
        "overwrite": lambda: write_deltalake(path, one_row, mode="overwrite"),
        "delete": lambda: DeltaTable(path).delete("id = 3"),
        "optimize": lambda: DeltaTable(path).optimize.compact(),  # noqa: PLW0108 (opened at the call, not before)
        "vacuum": lambda: DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False,
                                                  dry_run=False, full=True),
    }


@pytest.fixture
def table(tmp_path: Path) -> LakeTable:
    """Live files in two partitions, a file the log removed (still on disk: time travel and restore need it) and
    a stray Parquet file: what a foreign VACUUM would delete."""
    table = make_table(str(tmp_path / "table"))
    first = commit(table, [1, 2])
    second = commit(table, [3], "b")
    commit(table, [4], "a", removed=[first.added[0].path])
    live = Path(table.storage.path(second.added[0].path))
    shutil.copyfile(live, live.parent / "part-stray-00000.parquet")
    return table


def refuse_all(table: LakeTable) -> None:
    before, ours, theirs = files_on_disk(table.url), rows(table), delta_rows(table.url)
    would_vacuum = DeltaTable(table.url).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True,
                                               full=True)
    assert len(would_vacuum) == 2  # the removed file and the stray: a vacuum that ran would delete both
    for name, write in foreign_writes(table.url).items():
        with pytest.raises(Exception, match="airflowLakeOwned"):
            write()
        assert (name, files_on_disk(table.url)) == (name, before)  # nothing written, nothing deleted
    assert rows(table) == ours and delta_rows(table.url) == theirs


def test_foreign_delta_writers_and_vacuum_are_refused(table: LakeTable) -> None:
    refuse_all(table)
    assert rows(table) == [(3, "v3", "b"), (4, "v4", "a")]
    assert rows(table, as_of=1) == [(1, "v1", "a"), (2, "v2", "a")]  # the removed file is still there


def test_foreign_writers_are_refused_on_a_column_mapped_table(table: LakeTable) -> None:
    table.alter_table([{"rename": "v", "to": "w"}])
    table = LakeTable.open(table.url)
    before = files_on_disk(table.url)
    for name, write in foreign_writes(table.url).items():
        with pytest.raises(Exception, match=r"(?i)airflowLakeOwned|column ?mapping"):
            write()
        assert (name, files_on_disk(table.url)) == (name, before)
