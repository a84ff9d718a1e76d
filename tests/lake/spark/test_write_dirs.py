"""Data files written once under final names in write directories (`data/<instant>-<write id>.../`): Spark's names
repeat across the partition directories of one write, and reads stay exact when some of them are replaced; the
data path runs with renames and links forbidden (the suite sets AIRFLOW_LAKE_FORBID_RENAME=1, conftest.py)."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import no_rename
from airflow_lake.lake.spark.bucketed_read import scan_df
from airflow_lake.lake.spark.file_uris import spark_file_uri, table_path
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.plan_text import plan_text
from airflow_lake.lake.spark.session_conf import session_conf
from tests.lake.buckets.bucket_helpers import PLAN_CONF
from tests.lake.spark.write_helpers import one_task_write

SCHEMA = "k BIGINT, v BIGINT, dt STRING"



@pytest.mark.parametrize("bucketed", [False, True], ids=["plain", "bucketed"])
def test_a_partial_replace_of_a_write_whose_names_repeat_reads_exactly_the_live_files(
        spark: Any, tmp_path: Path, bucketed: bool) -> None:
    spec: dict[str, Any] = {"schema": SCHEMA, "partition_by": ["dt"]}
    if bucketed:
        spec["bucket"] = {"columns": ["k"], "count": 4}
    table = LakeTable.create(str(tmp_path / "t"), spec)
    rows = [(k, k * 10, day) for day in ("d1", "d2") for k in range(200)]
    one_task_write(spark, table, rows, SCHEMA)
    files = table.snapshot().files
    names = Counter(posixpath.basename(f.path) for f in files)
    assert all(count == 2 for count in names.values()), names  # each name in d1 and in d2
    entry = table.delete(spark, filters=[("dt", "=", "d1"), ("k", "=", 7)])  # rewrites one file of d1 only
    assert entry is not None
    dead = list(entry.removed)
    live_names = {posixpath.basename(f.path) for f in table.snapshot().files}
    assert len(dead) == 1 and "/dt=d1/" in dead[0] and Path(table.storage.path(dead[0])).exists()
    assert posixpath.basename(dead[0]) in live_names  # its name is live in d2: a name glob alone would read it
    expected = sorted(r for r in rows if r[:3] != (7, 70, "d1"))
    got = sorted(tuple(r) for r in table.read(spark).select("k", "v", "dt").collect())
    assert got == expected  # without the filter, the replaced file (same name as a live one of d2) is read
    day = table.read(spark, filters=[("dt", "=", "d1")])
    assert sorted(tuple(r) for r in day.select("k", "v", "dt").collect()) == [r for r in expected if r[2] == "d1"]
    if bucketed:
        with session_conf(spark, PLAN_CONF):
            df = scan_df(spark, table.scan())
            assert "Bucketed: true" in plan_text(df)
            assert df.count() == len(expected)


def test_spark_reports_files_as_the_uris_we_compute(spark: Any, tmp_path: Path) -> None:
    """`_metadata.file_path` of files under a root and partition values with characters URIs quote."""
    root = tmp_path / "a root %20 é"
    table = LakeTable.create(str(root), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    values = ["a b", "50%", "x#y", "c{d}e,f", "é日", "nb\u00a0sp", "q?r", "semi;colon", "a+b=c&d", "[br]"]
    table.write(spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id BIGINT, dt STRING"))
    files = table.snapshot().files
    df = spark.read.option("basePath", table.storage.uri("")).option("ignoreInvalidPartitionPaths", "true") \
        .parquet(*[table.storage.uri(posixpath.dirname(f.path)) for f in files])
    reported = {r[0] for r in df.select("_metadata.file_path").distinct().collect()}
    assert len(reported) == len(values)
    assert reported == {spark_file_uri(table.storage, f.path) for f in files}
    assert {table_path(table.storage, uri) for uri in reported} == {f.path for f in files}


def test_a_rename_or_link_of_a_data_file_is_refused_in_the_mode(tmp_path: Path) -> None:
    assert no_rename.enabled()  # conftest.py: the whole suite runs in the mode
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT"})
    data = Path(table.storage.path("data/x/part-0.parquet"))
    data.parent.mkdir(parents=True)
    data.write_bytes(b"PAR1")
    for move in (os.rename, os.replace, os.link):
        with pytest.raises(LakeError, match="renames and links of data files are forbidden"):
            move(data, data.with_name("part-1.parquet"))
    assert data.exists() and not data.with_name("part-1.parquet").exists()
    before = table.snapshot().seq
    table.append_entry("commit", "write", metadata={})  # metadata keeps its atomic replace and exclusive create
    assert table.snapshot().seq == before + 1


@pytest.mark.parametrize("bucketed", [False, True], ids=["plain", "bucketed"])
def test_files_at_the_root_of_a_table_written_before_write_directories_read_with_new_ones(
        spark: Any, tmp_path: Path, bucketed: bool) -> None:
    """An unpartitioned table kept its files at the root before write directories; new writes go below `data/`."""
    spec: dict[str, Any] = {"schema": "id BIGINT"}
    if bucketed:
        spec["bucket"] = {"columns": ["id"], "count": 2}
    table = LakeTable.create(str(tmp_path / "t"), spec)
    txn = table.begin("commit", "write")
    files = write_dataframe(spark.range(0, 10), table.storage, table.spec, txn.instant)
    old = []
    for number, data_file in enumerate(files):  # as the writer before issue 24 named and placed them
        suffix = "" if data_file.bucket is None else f"_{data_file.bucket:05d}"
        name = f"part-{txn.instant}-abcdef01-{number:05d}{suffix}.parquet"
        shutil.copyfile(table.storage.path(data_file.path), table.storage.path(name))
        old.append(dataclasses.replace(data_file, path=name))
    txn.commit(added=old)
    table.write(spark.range(10, 25))
    assert {posixpath.dirname(f.path) == "" for f in table.snapshot().files} == {True, False}
    assert sorted(r[0] for r in table.read(spark).collect()) == list(range(25))


def test_a_delete_on_a_bucketed_table_keeps_each_rewritten_files_row_order(spark: Any, tmp_path: Path) -> None:
    """The order by a helper column (the delete's row index, not written) survives Spark's bucketed insert, which
    sorts by (partition, bucket) itself: the concurrent writers write rows in the order they come."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    table = LakeTable.create(str(tmp_path / "t"), {"schema": SCHEMA, "partition_by": ["dt"],
                                                  "bucket": {"columns": ["k"], "count": 2}})
    rows = spark.range(0, 4000).select(F.col("id").alias("k"), (F.rand(7) * 1e9).cast("bigint").alias("v"),
                                       F.lit("d1").alias("dt"))
    txn = table.begin("commit", "write")  # rows in some order of v inside each bucket (no sort columns)
    files = write_dataframe(rows.orderBy("v").coalesce(1), table.storage, table.spec, txn.instant,
                            bucket_shuffle=False)
    txn.commit(added=files)
    before = {f.bucket: pq.read_table(table.storage.path(f.path)).column("v").to_pylist() for f in files}
    assert all(len(order) > 1000 for order in before.values())
    victim = before[0][1234]
    table.delete(spark, filters=[("v", "=", victim)])
    after = {f.bucket: pq.read_table(table.storage.path(f.path)).column("v").to_pylist()
             for f in table.snapshot().files}
    assert after[0] == [v for v in before[0] if v != victim] and after[1] == before[1]


def test_an_order_by_a_helper_column_survives_the_bucketed_insert(spark: Any, tmp_path: Path) -> None:
    """Rows come in ascending v; the write orders each bucket by a helper column (-v, dropped, as clustering's
    curve values are): Spark's own sort of a bucketed insert would keep the ascending order, ours is descending."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    table = LakeTable.create(str(tmp_path / "t"), {"schema": SCHEMA, "partition_by": ["dt"],
                                                  "bucket": {"columns": ["k"], "count": 2}})
    rows = spark.range(0, 3000).select(F.col("id").alias("k"), (F.rand(3) * 1e9).cast("bigint").alias("v"),
                                       F.lit("d1").alias("dt")).orderBy("v").withColumn("h", -F.col("v"))
    txn = table.begin("commit", "write")
    files = write_dataframe(rows.coalesce(1), table.storage, table.spec, txn.instant, sort_within=["h"],
                            drop_columns=["h"], bucket_shuffle=False)
    txn.commit(added=files)
    for data_file in files:
        order = pq.read_table(table.storage.path(data_file.path)).column("v").to_pylist()
        assert len(order) > 1000 and order == sorted(order, reverse=True)
