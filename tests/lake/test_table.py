"""Writes and reads with real Spark: time travel, file skipping, overwrites, buckets, types."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import functions as F

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from tests.support import parquet_files_on_disk, table_ids, write_source


def create(path: str, **extra: Any) -> LakeTable:
    return LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                   **extra})


def test_time_travel_returns_exactly_each_instants_rows(spark: Any, table_path: str, tmp_path: Path) -> None:
    create(table_path)
    writes = [
        ({"path": write_source(tmp_path / "a.parquet", range(0, 10), "d1")}, "append", None),
        ({"path": write_source(tmp_path / "b.parquet", range(10, 20), "d2")}, "append", None),
        ({"path": write_source(tmp_path / "c.parquet", range(100, 103), "d1")}, "overwrite", [{"dt": "d1"}]),
        ({"path": write_source(tmp_path / "d.parquet", range(200, 202), "d3")}, "overwrite", None),
    ]
    expected = [
        list(range(0, 10)),
        list(range(0, 20)),
        [*range(10, 20), *range(100, 103)],
        [200, 201],
    ]
    instants = []
    for source, mode, partitions in writes:
        spec: dict[str, Any] = {"table": table_path, "source": source, "mode": mode}
        if partitions:
            spec["partitions"] = partitions
        instants.append(run(spark, "write", spec)["instant"])
    table = LakeTable.open(table_path)
    for seq, (instant, rows) in enumerate(zip(instants, expected, strict=True), start=1):
        assert table_ids(spark, table_path, as_of=instant) == rows
        assert table_ids(spark, table_path, as_of=seq) == rows
        assert table.snapshot(as_of=instant).rows == len(rows)
    assert table_ids(spark, table_path, as_of=0) == []  # the empty table right after create
    assert table_ids(spark, table_path) == expected[-1]
    # replaced files stay on disk for time travel until clean; the live set is only the last write's
    assert len(parquet_files_on_disk(table_path)) > len(table.snapshot().files)


def test_filters_skip_files_with_disjoint_ranges(spark: Any, table_path: str, tmp_path: Path) -> None:
    create(table_path)
    for i in range(4):  # four files, ids [0,100), [100,200), ...
        source = write_source(tmp_path / f"s{i}.parquet", range(i * 100, i * 100 + 100), "d")
        run(spark, "write", {"table": table_path, "source": {"path": source}})
    table = LakeTable.open(table_path)
    assert len(table.snapshot().files) == 4
    cases = [
        ([("id", "=", 150)], 1, 1),
        ([("id", "in", [5, 305])], 2, 2),
        ([("id", "<", 100)], 1, 100),
        ([("id", "<=", 100)], 2, 101),
        ([("id", ">", 299)], 1, 100),
        ([("id", ">=", 299)], 2, 101),
        ([("id", "between", [120, 180])], 1, 61),
        ([("id", "between", [1000, 2000])], 0, 0),
        ([("dt", "=", "other")], 0, 0),
        ([("id", ">=", 50), ("id", "<", 150)], 2, 100),
    ]
    for filters, files_read, rows in cases:
        scan = table.scan(filters)
        assert (len(scan.files), scan.files_skipped) == (files_read, 4 - files_read), filters
        assert scan.to_df(spark).count() == rows, filters


def test_overwrite_modes(spark: Any, table_path: str, tmp_path: Path) -> None:
    create(table_path)
    run(spark, "write", {"table": table_path,
                         "source": {"path": write_source(tmp_path / "a.parquet", range(6), ["d1", "d2", "d3"] * 2)}})
    dyn = write_source(tmp_path / "b.parquet", [10, 11], "d2")
    metrics = run(spark, "write", {"table": table_path, "source": {"path": dyn}, "mode": "overwrite",
                                   "partitions": "dynamic"})
    assert (metrics["rows_removed"], metrics["rows_added"]) == (2, 2)
    rows = LakeTable.open(table_path).read(spark).select("id", "dt").collect()
    assert sorted((r["dt"], r["id"]) for r in rows) == [("d1", 0), ("d1", 3), ("d2", 10), ("d2", 11),
                                                        ("d3", 2), ("d3", 5)]


def test_bucketed_write_one_sorted_file_per_bucket(spark: Any, table_path: str, tmp_path: Path) -> None:
    buckets = 4
    create(table_path, bucket={"columns": ["id"], "count": buckets, "sort_columns": ["v"]})
    ids = list(range(500))
    source = write_source(tmp_path / "a.parquet", ids, ["x" if i % 2 else "y" for i in ids], value=-1.0)
    run(spark, "write", {"table": table_path, "source": {"path": source}})
    snap = LakeTable.open(table_path).snapshot()
    per_partition: dict[str, list[int]] = {}
    for f in snap.files:
        per_partition.setdefault(str(f.partition["dt"]), []).append(f.bucket or 0)
        assert f.path.endswith(f"_{f.bucket:05d}.c000.snappy.parquet")  # Spark's bucket id
        df = spark.read.parquet(str(Path(table_path) / f.path))
        got = {r["b"] for r in df.select(F.pmod(F.hash("id"), F.lit(buckets)).alias("b")).distinct().collect()}
        assert got == {f.bucket}  # every row is in the bucket its file name says (Spark's own hash)
        values = pq.read_table(str(Path(table_path) / f.path)).column("v").to_pylist()
        assert values == sorted(values)  # sorted by the sort column
    assert {k: sorted(v) for k, v in per_partition.items()} == {"x": list(range(buckets)), "y": list(range(buckets))}
    assert snap.rows == 500


def test_types_round_trip_and_skip_on_dates(spark: Any, table_path: str) -> None:
    LakeTable.create(table_path, {"schema": "id INT, day DATE, ts TIMESTAMP, amount DECIMAL(10,2), ok BOOLEAN, "
                                            "name STRING"})
    rows = [(1, dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC), decimal.Decimal("1.50"), True, "a"),
            (2, dt.date(2024, 2, 1), dt.datetime(2024, 2, 1, 12, tzinfo=dt.UTC), decimal.Decimal("2.25"), False, None)]
    table = LakeTable.open(table_path)
    for row in rows:
        df = spark.createDataFrame([row], "id INT, day DATE, ts TIMESTAMP, amount DECIMAL(10,2), ok BOOLEAN, "
                                          "name STRING")
        table.write(df)
    out = sorted(table.read(spark).collect(), key=lambda r: r["id"])
    assert [(r["id"], r["day"], r["amount"], r["ok"], r["name"]) for r in out] == [
        (1, dt.date(2024, 1, 1), decimal.Decimal("1.50"), True, "a"),
        (2, dt.date(2024, 2, 1), decimal.Decimal("2.25"), False, None)]
    assert table.scan([("day", ">=", "2024-01-15")]).files_skipped == 1
    assert table.scan([("ts", "<", "2024-01-15T00:00:00+00:00")]).files_skipped == 1
    assert table.scan([("name", "=", "a")]).files_skipped == 1  # the other file's name is all null
    assert table.read(spark, filters=[("day", "=", "2024-02-01")]).count() == 1


def test_retry_with_same_request_id_writes_once(spark: Any, table_path: str, tmp_path: Path) -> None:
    create(table_path)
    spec = {"table": table_path, "source": {"path": write_source(tmp_path / "a.parquet", range(5), "d")},
            "request_id": "dag/task/run/-1"}
    first, second = run(spark, "write", spec), run(spark, "write", spec)
    assert first["instant"] == second["instant"] and second["already_committed"] is True
    assert table_ids(spark, table_path) == list(range(5))
    assert len(LakeTable.open(table_path).timeline()) == 2  # create + one commit
