"""The native write path with real Spark: staging, footer stats checked against the data, Hive-style
files, placing, bad data refused before the commit, tables written by the previous writer still read."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.lake import LakeSchemaError, LakeTable
from airflow_lake.lake.format.data_files import ColumnStats
from airflow_lake.lake.format.instants import pending
from airflow_lake.lake.spec.types import STRING_STATS_PREFIX
from tests.support import parquet_files_on_disk

SCHEMA = ("id BIGINT NOT NULL, small SMALLINT, tiny TINYINT, n INT, d DOUBLE, f FLOAT, s STRING, day DATE, "
          "ts TIMESTAMP, ntz TIMESTAMP_NTZ, ok BOOLEAN, amount DECIMAL(10,2), raw BINARY, dt STRING")


def rows(count: int) -> list[tuple[Any, ...]]:
    """Rows with nulls, NaN, long strings and every type, across three partitions."""
    out = []
    for i in range(count):
        long = "x" * (STRING_STATS_PREFIX + 5) + str(i)
        out.append((
            i, None if i % 7 == 0 else i % 300 - 150, i % 100 - 50, None if i % 5 == 0 else i * 3,
            float("nan") if i == 11 else (None if i % 9 == 0 else i / 4), float(i % 13),
            long if i % 17 == 0 else (None if i % 4 == 0 else f"s{i:05d}"),
            dt.date(2024, 1, 1) + dt.timedelta(days=i % 40),
            dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i * 37),
            dt.datetime(2024, 2, 1) + dt.timedelta(minutes=i),
            None if i % 6 == 0 else i % 2 == 0, decimal.Decimal(i) / 100, bytes([i % 256]),
            ["a", "b", "c"][i % 3],
        ))
    return out


def expected_stats(values: list[Any], type_name: str) -> list[Any]:
    """[min, max, nulls] of one column of one file, by the rules the table keeps stats by."""
    nulls = sum(v is None for v in values)
    present = [v for v in values if v is not None]
    if type_name in ("decimal", "binary") or not present:
        return [None, None, nulls]
    if type_name in ("double", "float") and any(math.isnan(v) for v in present):
        finite = [v for v in present if not math.isnan(v)]
        return [min(finite), None, nulls]  # NaN sorts last in Parquet's order: the max is unknown
    low, high = min(present), max(present)
    if type_name == "string":
        low = low[:STRING_STATS_PREFIX]
        high = None if len(high) > STRING_STATS_PREFIX else high
    if type_name == "date":
        low, high = low.isoformat(), high.isoformat()
    if type_name in ("timestamp", "timestamp_ntz"):
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        low, high = ((v if v.tzinfo else v.replace(tzinfo=dt.UTC)) - epoch for v in (low, high))
        low, high = (v // dt.timedelta(microseconds=1) for v in (low, high))
    return [low, high, nulls]


@pytest.mark.parametrize("bucketed", [False, True])
def test_footer_stats_match_the_data_of_every_file(spark: Any, table_path: str, bucketed: bool) -> None:
    extra = {"bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]}} if bucketed else {}
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"], **extra})
    df = spark.createDataFrame(rows(600), SCHEMA)
    entry = table.write(df)
    files = table.snapshot().files
    assert entry.metrics["rows_added"] == 600 == sum(f.rows for f in files)
    assert len(files) == (12 if bucketed else len(files)) and {f.partition["dt"] for f in files} == {"a", "b", "c"}
    types = {c.name: c.type.split("(")[0] for c in table.spec.columns}
    for data_file in files:
        content = pq.read_table(table.storage.path(data_file.path))
        # Hive convention: the partition column lives in the path only
        assert "dt" not in content.column_names
        assert content.num_rows == data_file.rows
        assert data_file.bytes == Path(table.storage.path(data_file.path)).stat().st_size
        for name in content.column_names:
            got = data_file.stats[name]
            assert got.to_list() == expected_stats(content.column(name).to_pylist(), types[name]), name
        if bucketed:
            assert data_file.path.endswith(f"_{data_file.bucket:05d}.c000.snappy.parquet")  # Spark's bucket id
            ids = content.column("id").to_pylist()
            assert ids == sorted(ids)  # sorted by the bucket's sort columns
    assert parquet_files_on_disk(table_path) == {f.path for f in files}  # nothing else, no staging left
    assert not any(Path(table_path, "_lake", "staging").rglob("*"))
    # written once under final names in the write's own directory; Spark's .crc and _SUCCESS files deleted
    assert {f.path.split("/")[1] for f in files} == {files[0].path.split("/")[1]}
    assert {str(q.relative_to(table_path)) for q in Path(table_path, "data").rglob("*") if q.is_file()} \
        == {f.path for f in files}
    assert sorted(r["id"] for r in table.read(spark).collect()) == list(range(600))


def test_bucket_ids_in_names_are_sparks(spark: Any, table_path: str) -> None:
    """Each file holds exactly the rows Spark's own bucketing puts in the bucket its name says."""
    table = LakeTable.create(table_path, {"schema": "k BIGINT, v STRING", "bucket": {"columns": ["k"], "count": 8}})
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "100")  # would split each bucket into several files
    try:
        table.write(spark.range(0, 2000).selectExpr("id AS k", "CAST(id AS STRING) AS v"))
    finally:
        spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    files = table.snapshot().files
    assert sorted(f.bucket for f in files) == list(range(8))  # one file per bucket
    for data_file in files:
        ks = pq.read_table(table.storage.path(data_file.path)).column("k").to_pylist()
        buckets = {r[0] for r in spark.createDataFrame([(k,) for k in ks], "k BIGINT")
                   .selectExpr("pmod(hash(k), 8)").collect()}
        assert buckets == {data_file.bucket}


def test_files_of_the_previous_writer_still_read_and_time_travel(spark: Any, table_path: str) -> None:
    """Before the native writer, files held the partition columns too; both kinds read right, side by side."""
    table = LakeTable.create(table_path, {"schema": "id BIGINT, dt DATE, v DOUBLE", "partition_by": ["dt"]})
    txn = table.begin("commit", "write")
    rel = f"dt=2024-01-01/part-{txn.instant}-legacy-00000.parquet"
    Path(table.storage.path(rel)).parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "dt": [dt.date(2024, 1, 1)] * 2, "v": [1.0, 2.0]}),
                   table.storage.path(rel))
    from airflow_lake.lake.format.data_files import DataFile

    old = txn.commit(added=[DataFile(rel, {"dt": "2024-01-01"}, 2, 100, instant=txn.instant,
                                     stats={"id": ColumnStats(1, 2, 0)})])
    table.write(spark.createDataFrame([(3, dt.date(2024, 1, 2), 3.0)], "id BIGINT, dt DATE, v DOUBLE"))
    got = sorted(tuple(r) for r in table.read(spark).collect())
    assert got == [(1, dt.date(2024, 1, 1), 1.0), (2, dt.date(2024, 1, 1), 2.0), (3, dt.date(2024, 1, 2), 3.0)]
    assert table.read(spark).columns == ["id", "dt", "v"]
    assert sorted(tuple(r.values()) for r in table.to_arrow().to_pylist()) == got  # pyarrow, no Spark
    assert table.to_arrow(as_of=old.seq, columns=["dt", "id"]).to_pylist() == [
        {"dt": dt.date(2024, 1, 1), "id": 1}, {"dt": dt.date(2024, 1, 1), "id": 2}]
    assert sorted(tuple(r) for r in table.read(spark, as_of=old.seq).collect())[0] == (1, dt.date(2024, 1, 1), 1.0)
    assert [r["id"] for r in table.read(spark, filters=[("dt", "=", "2024-01-02")]).collect()] == [3]


@pytest.mark.parametrize(("data", "problem"), [
    ([(1, ""), (2, "b")], "empty string"),
    ([(1, "../x"), (2, "b")], "could address a path outside"),
    ([(1, None), (2, "b")], "NOT NULL"),
])
def test_bad_partition_values_from_data_commit_nothing(spark: Any, table_path: str, data: list[Any],
                                                       problem: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING NOT NULL", "partition_by": ["dt"]})
    with pytest.raises(Exception, match=problem):
        table.write(spark.createDataFrame(data, "id BIGINT, dt STRING"))
    assert table.commit_log.head() == 1  # create + the rollback of the failed write
    assert table.snapshot().files == () and pending(table.storage) == []
    assert parquet_files_on_disk(table_path) == set()
    assert not any(Path(table_path, "_lake", "staging").rglob("*.parquet"))


def test_null_in_a_not_null_data_column_is_found_in_the_footers(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT NOT NULL, v STRING"})
    with pytest.raises(LakeSchemaError, match="'id' is NOT NULL"):
        table.write(spark.createDataFrame([(1, "a"), (None, "b")], "id BIGINT, v STRING"))
    assert parquet_files_on_disk(table_path) == set() and table.snapshot().files == ()


def test_empty_source_adds_no_file(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT, v STRING"})
    entry = table.write(spark.createDataFrame([], "id BIGINT, v STRING"))
    assert entry.metrics["files_added"] == 0 and parquet_files_on_disk(table_path) == set()


def test_the_session_keeps_its_timestamp_setting(spark: Any, table_path: str) -> None:
    before = spark.conf.get("spark.sql.parquet.outputTimestampType")
    table = LakeTable.create(table_path, {"schema": "ts TIMESTAMP"})
    table.write(spark.createDataFrame([(dt.datetime(2024, 1, 1, tzinfo=dt.UTC),)], "ts TIMESTAMP"))
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == before
    assert table.snapshot().files[0].stats["ts"].min == 1_704_067_200_000_000


RETRY_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from airflow_lake.lake import LakeTable

    table_path, evidence = sys.argv[1], Path(sys.argv[2])
    spark = (SparkSession.builder.master("local[2,2]").config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20000").getOrCreate())

    def fail_first_attempt(batches):
        context = TaskContext.get()
        for number, batch in enumerate(batches):
            yield batch
            if context.partitionId() == 0 and context.attemptNumber() == 0 and number == 1:
                # wait until this attempt's output file exists (Spark names the attempt's directory
                # attempt_<job>_m_<task>_<attempt>), then fail the task
                staging = Path(table_path, "data")  # the write directory: Spark's _temporary is inside
                deadline = time.monotonic() + 60
                mine = []
                while time.monotonic() < deadline and not mine:
                    mine = [p for p in staging.rglob("*.parquet") if "_m_000000_0/" in str(p)]
                    time.sleep(0.05)
                (evidence / "failed-attempt-files.txt").write_text("\\n".join(str(p) for p in mine))
                raise RuntimeError("injected failure of the first attempt")

    table = LakeTable.create(table_path, {"schema": "id BIGINT, v BIGINT"})
    df = spark.range(0, 200000, numPartitions=2).selectExpr("id", "id * 2 AS v")
    table.write(df.mapInArrow(fail_first_attempt, df.schema))
    print("rows", table.snapshot().rows)
""")


@pytest.mark.slow
def test_a_task_that_fails_once_and_is_retried_leaves_no_file_behind(tmp_path: Path) -> None:
    table_path = str(tmp_path / "table")
    script = tmp_path / "retry.py"
    script.write_text(RETRY_SCRIPT)
    done = subprocess.run([sys.executable, str(script), table_path, str(tmp_path)], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows 200000" in done.stdout
    failed = (tmp_path / "failed-attempt-files.txt").read_text().split()
    assert failed, "the first attempt failed before writing a file"  # the attempt really wrote one...
    table = LakeTable.open(table_path)
    live = {f.path for f in table.snapshot().files}
    assert parquet_files_on_disk(table_path) == live  # ...and after the commit only live files remain
    assert not any(Path(table_path, "_lake", "staging").rglob("*")) and not any(Path(p).exists() for p in failed)
    assert not [q for q in Path(table_path, "data").rglob("*") if q.is_file() and str(q.relative_to(table_path))
                not in live]  # no _temporary, .crc or _SUCCESS left in the write directory


def test_partition_values_too_long_for_a_directory_name_are_refused(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    fits = ["x" * 252, "%" * 84, "é" * 126]  # with "dt=": 255 bytes each (% is escaped as %25, é is 2 bytes)
    table.write(spark.createDataFrame([(i, v) for i, v in enumerate(fits)], "id BIGINT, dt STRING"))
    assert {f.partition["dt"] for f in table.snapshot().files} == set(fits)
    for value in ("x" * 253, "%" * 85, "é" * 127):
        with pytest.raises(LakeSchemaError, match="too long for a directory name"):
            table.write(spark.createDataFrame([(9, value)], "id BIGINT, dt STRING"))
    assert len(table.snapshot().files) == 3 and parquet_files_on_disk(table_path) == {
        f.path for f in table.snapshot().files}
    assert not any(Path(table_path, "_lake", "staging").rglob("*"))
    assert sorted(r["dt"] for r in table.read(spark).collect()) == sorted(fits)
