"""One identity per table (issue 33 item 2): a job whose query names its own table under another spelling of its
URL (a symlinked path, a trailing '/', a file:// URL) is pinned to its base and checked at its commit as when it
names it the same way. Each race is made to happen at its exact step: the other commit lands after the job took
its base and before it read its source (then the pin shows), or right after it read its source."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.ops import write as write_op
from airflow_lake.lake import LakeCommitConflict, LakeTable
from airflow_lake.lake.errors import LakeSpecError
from tests.lake.commit.test_isolation import interleave, rows
from tests.support import write_source

SPELLINGS = ["symlink", "trailing_slash", "file_url"]


def spelled(path: Path, how: str, tmp_path: Path) -> str:
    """`path` (a table directory) as another spelling of the same table."""
    if how == "symlink":
        link = tmp_path / "link"
        if not link.exists():
            os.symlink(path.parent, link)
        return str(link / path.name)
    if how == "trailing_slash":
        return f"{path}/"
    return f"file://{path}"


def tables(spark: Any, tmp_path: Path) -> tuple[Path, str]:
    target, staged = tmp_path / "lake" / "users", str(tmp_path / "lake" / "staged")
    for path, ids in ((str(target), [1, 2]), (staged, [2, 3])):
        LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE"})
        run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / f"{ids[0]}.parquet", ids,
                                                                           "d1")}})
    return target, staged


def insert_new(target: str, staged: str, query_target: str) -> dict[str, Any]:
    """'Insert the staged rows that are not there yet' into `target`, whose query names it `query_target`."""
    return {"table": target, "source": {
        "query": "SELECT s.* FROM s WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.id = s.id)",
        "tables": {"s": staged, "t": query_target}}}


@pytest.mark.parametrize("how", SPELLINGS)
def test_two_anti_join_appends_naming_their_table_in_another_spelling_add_the_row_once(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Before: the job's own read was recorded under the other spelling, so its commit was checked as a blind
    append: both appends committed and row 3 was doubled."""
    target, staged = tables(spark, tmp_path)
    job = insert_new(str(target), staged, spelled(target, how, tmp_path))

    with pytest.raises(LakeCommitConflict, match="could have seen"), \
            interleave(monkeypatch, "after_read", lambda: run(spark, "write", job)):
        run(spark, "write", job)
    assert [r[0] for r in rows(spark, str(target))] == [1, 2, 3]
    assert run(spark, "write", job)["rows_added"] == 0  # the retry reads the new snapshot
    assert [r[0] for r in rows(spark, str(target))] == [1, 2, 3]


def test_a_query_naming_its_table_through_a_symlink_reads_it_at_the_jobs_base(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other append lands after the job took its base and before it read its source: pinned, the query
    reads the base (row 3 absent), and the commit conflicts. Before: the query read the newer snapshot, unchecked."""
    target, staged = tables(spark, tmp_path)
    job = insert_new(str(target), staged, spelled(target, "symlink", tmp_path))
    real = write_op.normalize_partitions  # called once the base is taken, before the source is read
    landed: list[object] = []

    def other_lands(*args: Any, **kwargs: Any) -> Any:
        if not landed:
            landed.append("running")
            landed[0] = run(spark, "write", insert_new(str(target), staged, str(target)))
        return real(*args, **kwargs)

    monkeypatch.setattr(write_op, "normalize_partitions", other_lands)
    with pytest.raises(LakeCommitConflict, match="could have seen"):
        run(spark, "write", job)
    monkeypatch.undo()
    assert landed and [r[0] for r in rows(spark, str(target))] == [1, 2, 3]


def test_an_overwrite_from_its_own_table_through_a_symlink_conflicts_with_an_append_after_its_read(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dedupe that names its table through a symlink and a late append: nothing lost."""
    path = tmp_path / "lake" / "events"
    LakeTable.create(str(path), {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    run(spark, "write", {"table": str(path), "source": {"path": write_source(tmp_path / "a.parquet", [1, 1], "d1")}})
    dedupe = {"table": str(path), "mode": "overwrite", "partitions": [{"dt": "d1"}],
              "source": {"query": "SELECT DISTINCT id, dt, v FROM ev",
                         "tables": {"ev": spelled(path, "symlink", tmp_path)}}}
    late = write_source(tmp_path / "late.parquet", [99], "d1")
    with pytest.raises(LakeCommitConflict), interleave(
            monkeypatch, "before_commit", lambda: run(spark, "write", {"table": str(path), "source": {"path": late}})):
        run(spark, "write", dedupe)
    assert rows(spark, str(path)) == [(1, "d1", 1.0), (1, "d1", 1.0), (99, "d1", 99.0)]  # nothing lost


def test_a_copy_of_the_target_made_by_copying_its_files_is_refused_in_its_query(
        spark: Any, tmp_path: Path) -> None:
    """A copy keeps the table id of its original: which snapshot to read cannot be told, so it is refused clearly
    before anything runs (a copy is not a table of its own)."""
    import shutil

    target, staged = tables(spark, tmp_path)
    copy = tmp_path / "lake" / "users_copy"
    shutil.copytree(target, copy)
    with pytest.raises(LakeSpecError, match=r"source\.tables\.t.*the table id of the table this job writes"):
        run(spark, "write", insert_new(str(target), staged, str(copy)))
    assert LakeTable.open(str(target)).commit_log.head() == 1  # nothing committed
    fixed = insert_new(str(target), staged, str(copy))
    fixed["source"]["tables"]["t"] = {"path": str(copy), "as_of": 1}  # a fixed snapshot of the copy needs no pin
    run(spark, "write", fixed)
    assert [r[0] for r in rows(spark, str(target))] == [1, 2, 3]
