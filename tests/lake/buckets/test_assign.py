"""Bucket assignment of written rows: one sorted file per bucket, and no extra shuffle when the rows are
already hash-partitioned like the buckets (LAS write-side shuffle elimination)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from airflow_lake.jobs import run
from tests.lake.buckets.bucket_helpers import file_rows_in_their_bucket, make, rows_df


def test_a_write_from_rows_hashed_like_its_buckets_adds_no_shuffle(spark: Any, tmp_path: Path) -> None:
    source = make(tmp_path / "src", bucket={"columns": ["k"], "count": 8})
    source.write(rows_df(spark, 400, days=("d1", "d2", "d3")))
    query = "SELECT k, sum(v) AS total, max(dt) AS dt FROM s GROUP BY k"
    same = make(tmp_path / "same", bucket={"columns": ["k"], "count": 8, "sort_columns": ["total"]},
                schema="k BIGINT, total BIGINT, dt STRING")
    metrics = run(spark, "write", {"table": same.url, "source": {"query": query, "tables": {"s": source.url}}})
    assert (metrics["query_exchanges"], metrics["write_exchanges"]) == (0, 0)  # no shuffle at all
    files = same.snapshot().files
    assert sorted(f.bucket for f in files) == list(range(8))  # still one file per bucket (all in dt=d3)
    file_rows_in_their_bucket(spark, same)
    for f in files:
        totals = pq.read_table(same.storage.path(f.path)).column("total").to_pylist()
        assert totals == sorted(totals)
    assert sorted(tuple(r) for r in same.read(spark).collect()) == sorted(
        (k, 3 * 10 * k, "d3") for k in range(400))

    other = make(tmp_path / "other", bucket={"columns": ["k"], "count": 16}, schema="k BIGINT, total BIGINT, dt STRING")
    metrics = run(spark, "write", {"table": other.url, "source": {"query": query, "tables": {"s": source.url}}})
    assert (metrics["query_exchanges"], metrics["write_exchanges"]) == (0, 1)  # another count: shuffled
    assert sorted(f.bucket for f in other.snapshot().files) == list(range(16))
    file_rows_in_their_bucket(spark, other)
    renamed = make(tmp_path / "renamed", bucket={"columns": ["total"], "count": 8},
                   schema="k BIGINT, total BIGINT, dt STRING")
    metrics = run(spark, "write", {"table": renamed.url, "source": {"query": query, "tables": {"s": source.url}}})
    assert metrics["write_exchanges"] == 1  # other bucket columns: shuffled
    file_rows_in_their_bucket(spark, renamed)
