"""A table never lies inside or above another table: create refuses both, and vacuum never deletes a file under
another table's root (tables made by hand there, or before create refused them)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format.table_roots import tables_below
from tests.support import parquet_files_on_disk

SCHEMA = "k BIGINT, dt STRING"


def filled(spark: Any, path: Path, days: tuple[str, ...] = ("x", "y"), n: int = 5) -> LakeTable:
    table = LakeTable.create(str(path), {"schema": SCHEMA, "partition_by": ["dt"]})
    table.write(spark.createDataFrame([(k, d) for d in days for k in range(n)], SCHEMA))
    return table


def rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(str(path)).read(spark).collect())


def lake_dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("_lake"))


def make_old(root: Path) -> None:
    """Age every file under `root` by two hours (vacuum keeps files younger than its cutoff)."""
    when = time.time() - 7200
    for path in root.rglob("*"):
        os.utime(path, (when, when))


@pytest.mark.parametrize("inside", ["dt=x", "dt=x/deeper", "new/sub", "_lake/log/t"])
def test_create_inside_a_table_is_refused(spark: Any, tmp_path: Path, inside: str) -> None:
    outer = filled(spark, tmp_path / "outer")
    before = (lake_dirs(tmp_path), parquet_files_on_disk(outer.url), outer.snapshot().seq)
    target = tmp_path / "outer" / inside
    existed = target.exists()
    with pytest.raises(LakeSpecError) as err:
        run(None, "create_table", {"table": str(target), "schema": "k BIGINT"})
    assert err.value.field == "table" and f"lies inside the lake table {outer.url!r}" in str(err.value)
    assert "Fix: Create the table in a directory outside every other table" in str(err.value)
    assert (lake_dirs(tmp_path), parquet_files_on_disk(outer.url), outer.snapshot().seq) == before
    assert target.exists() == existed and not LakeTable.exists(str(target))


def test_create_inside_a_table_through_a_symlink_is_refused(spark: Any, tmp_path: Path) -> None:
    outer = filled(spark, tmp_path / "outer")
    (tmp_path / "link").symlink_to(tmp_path / "outer" / "dt=x")
    with pytest.raises(LakeSpecError, match="lies inside the lake table"):
        LakeTable.create(str(tmp_path / "link" / "t"), {"schema": "k BIGINT"})
    assert lake_dirs(tmp_path) == ["outer/_lake"] and outer.snapshot().seq == 1


@pytest.mark.parametrize("where", ["inner", "a/b/inner"])
def test_create_over_a_directory_that_holds_a_table_is_refused(spark: Any, tmp_path: Path, where: str) -> None:
    inner = filled(spark, tmp_path / "data" / where)
    with pytest.raises(LakeSpecError) as err:
        run(None, "create_table", {"table": str(tmp_path / "data"), "schema": SCHEMA, "partition_by": ["dt"]})
    assert err.value.field == "table" and f"holds the lake table {inner.url!r}" in str(err.value)
    assert lake_dirs(tmp_path) == [f"data/{where}/_lake"]  # no `_lake` left behind
    assert rows(spark, tmp_path / "data" / where) == sorted((k, d) for d in ("x", "y") for k in range(5))
    LakeTable.create(str(tmp_path / "data" / "sibling"), {"schema": "k BIGINT"})  # beside it: fine


def test_an_existing_table_is_opened_and_a_retry_of_its_creation_passes(tmp_path: Path) -> None:
    spec = {"table": str(tmp_path / "t"), "schema": "k BIGINT", "request_id": "dag/create/run1/-1"}
    assert run(None, "create_table", spec)["created"] is True
    assert run(None, "create_table", spec)["created"] is True  # the Airflow retry of the same request
    assert run(None, "create_table", {**spec, "request_id": None, "if_exists": "ignore"})["created"] is False


def test_the_check_below_is_bounded(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / "big" / f"d{i}").mkdir(parents=True)
    assert tables_below(str(tmp_path / "big"), limit=20) == []
    with pytest.raises(LakeSpecError, match="holds more than 5 directories"):
        tables_below(str(tmp_path / "big"), limit=5)


def outer_rows(table: LakeTable) -> list[tuple[Any, ...]]:
    """The outer table's rows, read with pyarrow from exactly its live files. (Spark cannot read a table with
    another table in one of its partition directories: it lists the directory and finds conflicting
    partition directories. One more reason `create` refuses it.)"""
    return sorted((r["k"], r["dt"]) for r in table.to_arrow().to_pylist())


@pytest.mark.parametrize("where", ["nested", "dt=x/nested"])
@pytest.mark.parametrize("how", ["moved-in", "outer-made-by-hand"])
def test_vacuum_never_deletes_another_tables_files(spark: Any, tmp_path: Path, how: str, where: str) -> None:
    outer_path, nested_path = tmp_path / "outer", tmp_path / "outer" / where
    if how == "moved-in":  # a table made elsewhere and moved into the outer one's partition by hand
        outer = filled(spark, outer_path)
        filled(spark, tmp_path / "elsewhere", days=("n1", "n2"), n=7)
        nested_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(tmp_path / "elsewhere"), str(nested_path))
    else:  # the nested table came first; the outer `_lake` was copied over its parent (as before the check)
        filled(spark, nested_path, days=("n1", "n2"), n=7)
        template = filled(spark, tmp_path / "template")
        shutil.copytree(Path(template.url, "_lake"), outer_path / "_lake")
        shutil.copytree(Path(template.url, "data"), outer_path / "data")  # its write directories
        outer = LakeTable.open(str(outer_path))
    nested_files = parquet_files_on_disk(str(nested_path))
    expected_nested = sorted((k, d) for d in ("n1", "n2") for k in range(7))
    assert len(nested_files) >= 2 and rows(spark, nested_path) == expected_nested
    debris = outer_path / "dt=y" / "debris.parquet"  # a real orphan of the outer table: still deleted
    debris.parent.mkdir(parents=True, exist_ok=True)
    debris.write_bytes(b"x")
    make_old(tmp_path)

    dry = run(None, "vacuum", {"table": outer.url, "older_than_hours": 1, "dry_run": True})
    assert dry["nested_tables_skipped"] == [where] and dry["paths"] == ["dt=y/debris.parquet"]
    result = outer.vacuum(0, force=True)
    assert result.nested_tables == (where,) and result.orphans == ("dt=y/debris.parquet",)
    assert result.entry is not None and result.entry.metrics["nested_tables_skipped"] == [where]
    assert not debris.exists()
    assert parquet_files_on_disk(str(nested_path)) == nested_files  # the nested table's live files stay
    assert rows(spark, nested_path) == expected_nested
    assert outer_rows(outer) == sorted((k, d) for d in ("x", "y") for k in range(5))
    # and the nested table's own vacuum leaves the outer table alone (it only looks below its root)
    assert LakeTable.open(str(nested_path)).vacuum(0, force=True).orphans == ()
    assert outer_rows(outer) == sorted((k, d) for d in ("x", "y") for k in range(5))
