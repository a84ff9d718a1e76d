"""WriteSerializable: a job that reads its own table conflicts with a commit that lands between its read and
its commit and changes what it read; blind appends never conflict. Each race is made to happen: the other
commit runs at an exact step of the job (right after it read its source, or right before it commits)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.ops import versioned_upsert as upsert_op
from airflow_lake.jobs.ops import write as write_op
from airflow_lake.lake import LakeCommitConflict, LakeTable, faults
from airflow_lake.lake.upsert import upsert as lake_upsert
from airflow_lake.lake.write import append_overwrite as lake_write
from tests.support import write_source

POINTS = ["after_read", "before_commit"]


@contextlib.contextmanager
def interleave(monkeypatch: pytest.MonkeyPatch, point: str, other: Callable[[], object],
               module: Any = write_op) -> Iterator[list[object]]:
    """Run `other` (a whole concurrent job) once, inside the job under test: right after its source was
    read (`load` returned: files chosen, snapshot fixed) or at its `before_commit` step."""
    ran: list[object] = []

    def once() -> None:
        if not ran:
            ran.append("running")
            ran[0] = other()

    if point == "after_read":
        real = module.load

        def load(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)
            once()
            return out

        monkeypatch.setattr(module, "load", load)
    else:
        real_reach = faults.reach

        def reach(name: str) -> None:
            if name == "before_commit":
                once()
            real_reach(name)

        monkeypatch.setattr(faults, "reach", reach)
    yield ran
    monkeypatch.undo()
    assert ran and ran[0] != "running", "the concurrent job did not run inside the job under test"


def rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(path).read(spark).collect())


@pytest.mark.parametrize("point", POINTS)
def test_overwrite_dedupe_from_itself_conflicts_with_an_append_landing_after_its_read(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    path = str(tmp_path / "events")
    LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / "a.parquet", [1, 1, 2], "d1")}})
    dedupe = {"table": path, "mode": "overwrite", "partitions": [{"dt": "d1"}],
              "source": {"query": "SELECT DISTINCT id, dt, v FROM ev", "tables": {
                  "ev": {"path": path, "filters": [["dt", "=", "d1"]]}}}}
    late = write_source(tmp_path / "late.parquet", [99], "d1")

    with pytest.raises(LakeCommitConflict), \
            interleave(monkeypatch, point, lambda: run(spark, "write", {"table": path, "source": {"path": late}})):
        run(spark, "write", dedupe)
    assert rows(spark, path) == [(1, "d1", 1.0), (1, "d1", 1.0), (2, "d1", 2.0), (99, "d1", 99.0)]  # nothing lost
    run(spark, "write", dedupe)  # the retry reads the new snapshot
    assert rows(spark, path) == [(1, "d1", 1.0), (2, "d1", 2.0), (99, "d1", 99.0)]


def test_an_append_to_another_partition_does_not_conflict_with_a_filtered_self_read(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "events")
    LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / "a.parquet", [1, 1], "d1")}})
    other = write_source(tmp_path / "d2.parquet", [7], "d2")
    with interleave(monkeypatch, "after_read", lambda: run(spark, "write", {"table": path, "source": {"path": other}})):
        run(spark, "write", {"table": path, "mode": "overwrite", "partitions": [{"dt": "d1"}],
                             "source": {"query": "SELECT DISTINCT id, dt, v FROM ev", "tables": {
                                 "ev": {"path": path, "filters": [["dt", "=", "d1"]]}}}})
    assert rows(spark, path) == [(1, "d1", 1.0), (7, "d2", 7.0)]


@pytest.mark.parametrize("point", POINTS)
def test_two_anti_join_appends_at_once_add_the_row_once(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    target, staged = str(tmp_path / "users"), str(tmp_path / "staged")
    for path, ids in ((target, [1, 2]), (staged, [2, 3])):
        LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE"})
        run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / f"{ids[0]}.parquet", ids,
                                                                           "d1")}})
    insert_new = {"table": target, "source": {
        "query": "SELECT s.* FROM s WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.id = s.id)",
        "tables": {"s": staged, "t": target}}}

    with pytest.raises(LakeCommitConflict, match="could have seen"), \
            interleave(monkeypatch, point, lambda: run(spark, "write", insert_new)):
        run(spark, "write", insert_new)
    assert [r[0] for r in rows(spark, target)] == [1, 2, 3]
    retried = run(spark, "write", insert_new)  # the retry sees row 3: nothing more to add
    assert retried["rows_added"] == 0
    assert [r[0] for r in rows(spark, target)] == [1, 2, 3]


@pytest.mark.parametrize("point", POINTS)
def test_blind_appends_never_conflict(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      point: str) -> None:
    path = str(tmp_path / "events")
    LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    first, second = (write_source(tmp_path / f"{i}.parquet", [i], "d1") for i in (1, 2))
    with interleave(monkeypatch, point, lambda: run(spark, "write", {"table": path, "source": {"path": second}})):
        run(spark, "write", {"table": path, "source": {"path": first}})
    assert [r[0] for r in rows(spark, path)] == [1, 2]


def test_a_bucket_spec_committed_between_the_writes_spec_read_and_commit_is_a_conflict(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 item 7: the spec a write conformed its data to is part of what it read."""
    path = str(tmp_path / "orders")
    LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / "a.parquet", [1, 2], "d1")}})
    rewrite = {"table": path, "bucket": {"columns": ["id"], "count": 4}, "partitions": {"from": {"dt": "d1"}}}
    real_conform = lake_write.conform
    done: list[object] = []

    def conform(*args: Any, **kwargs: Any) -> Any:  # the write has read the spec; the rewrite lands now
        out = real_conform(*args, **kwargs)
        if not done:
            done.append("running")
            done[0] = run(spark, "bucket_rewrite", rewrite)
        return out

    monkeypatch.setattr(lake_write, "conform", conform)
    late = write_source(tmp_path / "b.parquet", [3, 4, 5, 6], "d2")
    with pytest.raises(LakeCommitConflict, match="spec"):
        run(spark, "write", {"table": path, "source": {"path": late}})
    monkeypatch.undo()
    assert done
    run(spark, "write", {"table": path, "source": {"path": late}})  # the retry writes buckets
    table = LakeTable.open(path)
    d2 = [f for f in table.snapshot().files if f.partition == {"dt": "d2"}]
    assert d2 and all(f.bucket is not None for f in d2)
    assert [r[0] for r in rows(spark, path)] == [1, 2, 3, 4, 5, 6]


PK = {"schema": "id BIGINT NOT NULL, n BIGINT", "primary_key": ["id"], "bucket": {"columns": ["id"], "count": 2}}


def test_an_upsert_from_its_own_table_conflicts_with_an_upsert_landing_after_its_read(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "counters")
    LakeTable.create(path, PK)
    run(spark, "versioned_upsert", {"table": path, "version": 1, "source": {"query": "SELECT 1L AS id, 10L AS n",
                                                                            "tables": {}}})
    bump = {"table": path, "version": 3, "source": {"query": "SELECT id, n + 1 AS n FROM c", "tables": {"c": path}}}
    other = {"table": path, "version": 2, "source": {"query": "SELECT 1L AS id, 20L AS n", "tables": {}}}
    with pytest.raises(LakeCommitConflict), \
            interleave(monkeypatch, "after_read", lambda: run(spark, "versioned_upsert", other), module=upsert_op):
        run(spark, "versioned_upsert", bump)
    run(spark, "versioned_upsert", bump)  # the retry reads n = 20
    assert rows(spark, path) == [(1, 21)]


def test_replace_version_racing_the_upsert_it_replaces_is_a_retryable_conflict(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 item 6: the upsert of version 5 commits while the replacing one writes its files."""
    path = str(tmp_path / "dim")
    LakeTable.create(path, PK)
    first = {"table": path, "version": 5, "source": {"query": "SELECT 1L AS id, 1L AS n", "tables": {}}}
    fix = {"table": path, "version": 5, "replace_version": True,
           "source": {"query": "SELECT 1L AS id, 2L AS n", "tables": {}}}
    real_write = lake_upsert.write_dataframe
    done: list[object] = []

    def write_dataframe(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append("running")
            done[0] = run(spark, "versioned_upsert", first)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(lake_upsert, "write_dataframe", write_dataframe)
    with pytest.raises(LakeCommitConflict, match="version 5"):
        run(spark, "versioned_upsert", fix)
    monkeypatch.undo()
    assert rows(spark, path) == [(1, 1)]
    out = run(spark, "versioned_upsert", fix)  # the retry replaces it
    assert out["replaced_files"] >= 1 and rows(spark, path) == [(1, 2)]


def test_a_no_op_upsert_says_why_it_was_rolled_back(spark: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_lake.cli import main

    path = str(tmp_path / "dim")
    LakeTable.create(path, PK)
    spec = {"table": path, "version": 7, "source": {"query": "SELECT 1L AS id, 1L AS n", "tables": {}}}
    first = run(spark, "versioned_upsert", spec)
    again = run(spark, "versioned_upsert", spec)
    assert again["already_committed"] and again["instant"] == first["instant"]
    assert first["versions"] == [7] and LakeTable.open(path).commit_log.read(first["seq"]).metrics["versions"] == [7]
    rolled = [i for i in LakeTable.open(path).timeline() if i.state == "rolled_back"]
    assert len(rolled) == 1 and f"duplicate of instant {first['instant']}" in rolled[0].metadata["reason"]
    capsys.readouterr()
    assert main(["timeline", path]) == 0
    assert f"rolled back: a duplicate of instant {first['instant']}" in capsys.readouterr().out


def test_a_bucket_rewrite_conflicts_with_an_append_into_a_partition_it_rewrites(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain files appended into a partition being bucketed would stay plain under a bucketed spec."""
    path = str(tmp_path / "orders")
    LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / "a.parquet", [1, 2], "d1")}})
    late = write_source(tmp_path / "late.parquet", [3], "d1")
    rewrite = {"table": path, "bucket": {"columns": ["id"], "count": 4}, "partitions": [{"dt": "d1"}]}
    with pytest.raises(LakeCommitConflict), \
            interleave(monkeypatch, "before_commit",
                       lambda: run(spark, "write", {"table": path, "source": {"path": late}})):
        run(spark, "bucket_rewrite", rewrite)
    assert [r[0] for r in rows(spark, path)] == [1, 2, 3]
    run(spark, "bucket_rewrite", rewrite)  # the retry buckets all three rows
    files = LakeTable.open(path).snapshot().files
    assert all(f.bucket is not None for f in files) and sum(f.rows for f in files) == 3


def test_compaction_and_an_upsert_landing_meanwhile_keep_every_version(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction rewrites exactly its inputs: an upsert committed meanwhile stays live and merges on top."""
    path = str(tmp_path / "dim")
    LakeTable.create(path, PK)
    for version, n in ((1, 10), (2, 20)):
        run(spark, "versioned_upsert", {"table": path, "version": version, "source": {
            "query": f"SELECT 1L AS id, {n}L AS n UNION ALL SELECT 2L, {n}L", "tables": {}}})
    newer = {"table": path, "version": 3, "source": {"query": "SELECT 1L AS id, 30L AS n", "tables": {}}}
    with interleave(monkeypatch, "before_commit", lambda: run(spark, "versioned_upsert", newer)):
        out = run(spark, "compact_upserts", {"table": path})
    assert out["files_before"] > out["files_after"]
    assert rows(spark, path) == [(1, 30), (2, 20)]
    late = {"table": path, "version": 0, "source": {"query": "SELECT 1L AS id, 0L AS n", "tables": {}}}
    run(spark, "versioned_upsert", late)  # a backfill below every compacted version changes nothing
    assert rows(spark, path) == [(1, 30), (2, 20)]
