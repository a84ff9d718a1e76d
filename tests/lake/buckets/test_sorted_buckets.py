"""Issue 20 item 9: files a bucket spec calls sorted are sorted, whatever the source — also when a partition
value or the bucket key is a literal of the query (Spark's optimizer drops a constant from a sort, and its
planned write then re-sorts by partition and bucket only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from tests.lake.buckets.bucket_helpers import file_rows_in_their_bucket

QUERIES = {
    "literal partition": "SELECT k, v, 'd1' AS dt FROM src",
    "literal partition and key": "SELECT 5L AS k, v, 'd1' AS dt FROM src",
    "partition from data": "SELECT k, v, dt FROM src",
}


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
@pytest.mark.parametrize("sort_column", ["v", "k"])
def test_every_bucket_file_is_sorted_by_the_sort_columns(spark: Any, tmp_path: Path, query: str,
                                                         sort_column: str) -> None:
    src = str(tmp_path / "src")
    LakeTable.create(src, {"schema": "k BIGINT, v BIGINT, dt STRING"})
    rows = [(i * 7919 % 1000, i * 104729 % 5000, "d1") for i in range(3000)]
    LakeTable.open(src).write(spark.createDataFrame(rows, "k BIGINT, v BIGINT, dt STRING").repartition(3))
    path = str(tmp_path / "bucketed")
    LakeTable.create(path, {"schema": "k BIGINT, v BIGINT, dt STRING", "partition_by": ["dt"],
                            "bucket": {"columns": ["k"], "count": 4, "sort_columns": [sort_column]}})

    metrics = run(spark, "write", {"table": path, "source": {"query": query, "tables": {"src": src}}})

    table = LakeTable.open(path)
    files = table.snapshot().files
    assert metrics["rows_added"] == 3000 and sum(f.rows for f in files) == 3000
    for data_file in files:
        values = pq.read_table(table.storage.path(data_file.path), columns=[sort_column]).column(0).to_pylist()
        assert values == sorted(values), f"{data_file.path} is not sorted by {sort_column}"
    file_rows_in_their_bucket(spark, table)


def test_files_of_varying_bucketings_and_plain_partitions_are_sorted(spark: Any, tmp_path: Path) -> None:
    """Per-partition bucket counts and plain partitions before `from_partition`: every file, bucketed or plain,
    holds its rows in the order of the sort columns (the writer leaves the bucketed sort to Spark's insert and
    sorts the plain files itself)."""
    path = str(tmp_path / "t")
    LakeTable.create(path, {"schema": "k BIGINT, v BIGINT, dt STRING", "partition_by": ["dt"],
                            "bucket": {"columns": ["k"], "count": 4, "sort_columns": ["v"],
                                       "from_partition": {"dt": "d2"},
                                       "partition_counts": [{"partition": {"dt": "d3"}, "count": 2}]}})
    rows = [(i * 7919 % 1000, i * 104729 % 5000, f"d{i % 3 + 1}") for i in range(3000)]

    LakeTable.open(path).write(spark.createDataFrame(rows, "k BIGINT, v BIGINT, dt STRING").repartition(3))

    table = LakeTable.open(path)
    files = table.snapshot().files
    assert sum(f.rows for f in files) == 3000
    by_dt: dict[str | None, set[int | None]] = {}
    for data_file in files:
        by_dt.setdefault(data_file.partition["dt"], set()).add(data_file.bucket)
        values = pq.read_table(table.storage.path(data_file.path), columns=["v"]).column(0).to_pylist()
        assert values == sorted(values), f"{data_file.path} is not sorted by v"
    assert by_dt["d1"] == {None} and by_dt["d2"] == {0, 1, 2, 3} and by_dt["d3"] == {0, 1}
