"""A classic read whose listing is exactly the scan's files reads with no per-row file filter (`listing`); anything
else listed keeps the filter, and a file landing after the read was made is never read (the listing is fixed)."""

from __future__ import annotations

import posixpath
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow_lake.lake.spark.listing import listed_exactly, listed_files
from airflow_lake.lake.spark.plan_text import plan_text
from airflow_lake.lake.table import LakeTable

SCHEMA = "id BIGINT, dt STRING"
# partition values Spark quotes in its URIs and escapes in directory names
DAYS = ("a b", "100%", "é/x".replace("/", "-"), "c:d", "e=f")


def day_table(spark: Any, path: Path) -> LakeTable:
    table = LakeTable.create(str(path), {"schema": SCHEMA, "partition_by": ["dt"]})
    for n, day in enumerate(DAYS):  # one write directory per day, two files in each
        rows = [(n * 100 + i, day) for i in range(40)]
        table.write(spark.createDataFrame(rows, SCHEMA).repartition(2))
    return table


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select("id", "dt").collect())


def filtered(df: Any) -> bool:
    """Whether the read keeps the per-row file filter (`scan.exactly`)."""
    return "file_path" in plan_text(df)


def test_a_read_that_listed_exactly_the_scans_files_has_no_file_filter(spark: Any, tmp_path: Path) -> None:
    table = day_table(spark, tmp_path / "t")
    scan = table.scan()
    df = scan.to_df(spark)
    assert not filtered(df)
    assert rows_of(df) == sorted((n * 100 + i, day) for n, day in enumerate(DAYS) for i in range(40))
    listed = listed_files(df)
    assert listed is not None and len(listed) == len(scan.files) == 2 * len(DAYS)
    # a partition's files; some files of several directories
    day = table.scan(filters=[("dt", "=", "a b")])
    some = table.scan().files[:3]
    narrowed = type(scan)(scan.storage, scan.snapshot, (), some)
    assert not filtered(day.to_df(spark))
    assert rows_of(day.to_df(spark)) == [(i, "a b") for i in range(40)]
    assert rows_of(narrowed.to_df(spark)) == sorted(r for f in some for r in rows_of(
        type(scan)(scan.storage, scan.snapshot, (), (f,)).to_df(spark)))


def test_anything_else_listed_keeps_the_filter_and_is_not_read(spark: Any, tmp_path: Path) -> None:
    table = day_table(spark, tmp_path / "t")
    expected = rows_of(table.scan().to_df(spark))
    files = table.snapshot().files
    first, other = files[0], next(f for f in files if f.partition != files[0].partition)
    # a copy of another day's file beside the first, under its own (live) name
    shutil.copyfile(table.storage.path(other.path),
                    Path(table.storage.path(first.path)).parent / posixpath.basename(other.path))
    df = table.scan().to_df(spark)
    assert not listed_exactly(df, table.storage, files)
    assert filtered(df)
    assert rows_of(df) == expected


def test_a_missing_live_file_is_not_taken_for_an_exact_listing(spark: Any, tmp_path: Path) -> None:
    table = day_table(spark, tmp_path / "t")
    files = table.snapshot().files
    reader = spark.read.parquet(*[table.storage.path(f.path) for f in files[1:]])
    assert not listed_exactly(reader, table.storage, files)
    assert listed_exactly(reader, table.storage, files[1:])


def test_a_file_landing_after_the_read_was_made_is_not_read(spark: Any, tmp_path: Path) -> None:
    """The listing the check saw is the one the query reads: a file dropped into a listed directory under a live name
    (another day's) between making the read and running it is never read."""
    table = day_table(spark, tmp_path / "t")
    df = table.scan().to_df(spark)
    assert not filtered(df)
    expected = rows_of(df)
    files = table.snapshot().files
    first, other = files[0], next(f for f in files if f.partition != files[0].partition)
    shutil.copyfile(table.storage.path(other.path),
                    Path(table.storage.path(first.path)).parent / posixpath.basename(other.path))
    assert rows_of(df) == expected  # the query planned after the file landed
    assert df.count() == len(expected)
    assert filtered(table.scan().to_df(spark))  # a read made now lists it, and filters it out
    assert rows_of(table.scan().to_df(spark)) == expected


def test_spark_connect_and_unknown_frames_keep_the_filter() -> None:
    """Over Spark Connect a plan's read is listed again per request: no listing is trusted there."""
    assert listed_files(SimpleNamespace()) is None  # type: ignore[arg-type]  # a Connect DataFrame has no _jdf
    broken = SimpleNamespace(_jdf=SimpleNamespace(inputFiles=lambda: 1 / 0),
                             sparkSession=SimpleNamespace(sparkContext=SimpleNamespace(_jvm=None)))
    assert listed_files(broken) is None  # type: ignore[arg-type]
