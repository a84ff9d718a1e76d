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


def test_max_exchanges_refuses_a_shuffling_write_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    import pytest

    from airflow_lake.lake.errors import LakeShuffleError

    source = make(tmp_path / "src", bucket={"columns": ["k"], "count": 8})
    source.write(rows_df(spark, 200, days=("d1",)))
    query = "SELECT k, sum(v) AS total, max(dt) AS dt FROM s GROUP BY k"
    other = make(tmp_path / "other", bucket={"columns": ["k"], "count": 16}, schema="k BIGINT, total BIGINT, dt STRING")
    spec = {"table": other.url, "source": {"query": query, "tables": {"s": source.url}}, "max_exchanges": 0}
    with pytest.raises(LakeShuffleError, match=r"1 shuffle Exchange\(s\) \(0 in the query, 1 added by the write\)"):
        run(spark, "write", spec)
    assert not other.snapshot().files and all(e.action != "commit" for e in other.entries_since(0))
    assert not list(Path(other.url).rglob("*.parquet"))
    same = make(tmp_path / "same", bucket={"columns": ["k"], "count": 8}, schema="k BIGINT, total BIGINT, dt STRING")
    metrics = run(spark, "write", {**spec, "table": same.url})  # bucket to bucket: allowed
    assert (metrics["query_exchanges"], metrics["write_exchanges"], metrics["rows_added"]) == (0, 0, 200)


def test_a_join_that_coalesces_buckets_writes_into_the_coalesced_count_without_a_shuffle(
        spark: Any, tmp_path: Path) -> None:
    big = make(tmp_path / "big", bucket={"columns": ["k"], "count": 16})
    big.write(rows_df(spark, 300, days=("d1",)))
    small = make(tmp_path / "small", bucket={"columns": ["k"], "count": 8})
    small.write(rows_df(spark, 300, days=("d1",)))
    out = make(tmp_path / "out", bucket={"columns": ["k"], "count": 8}, schema="k BIGINT, total BIGINT, dt STRING")
    query = "SELECT b.k, b.v + s.v AS total, b.dt FROM b JOIN s ON b.k = s.k"
    from airflow_lake.lake.spark.bucketed_read import READ_CONF
    from airflow_lake.lake.spark.session_conf import session_conf

    # as a job's session reads (READ_CONF: coalescing on), with a bucketed join rather than a broadcast
    with session_conf(spark, {**READ_CONF, "spark.sql.autoBroadcastJoinThreshold": "-1"}):
        metrics = run(spark, "write", {"table": out.url, "max_exchanges": 0,
                                       "source": {"query": query, "tables": {"b": big.url, "s": small.url}}})
    assert (metrics["query_exchanges"], metrics["write_exchanges"]) == (0, 0)  # 16 coalesced to 8 in the join
    file_rows_in_their_bucket(spark, out)
    assert out.read(spark).count() == 300


def test_an_unpartitioned_bucketed_write_shuffles_one_task_per_bucket_as_spark_bucket_by(spark: Any,
                                                                                         tmp_path: Path) -> None:
    """Spark's hash partitioning of the bucket columns into the bucket count is the bucket id: the shuffle
    carries no helper column and is not coalesced into tasks of several buckets (as `repartition(n, keys)`
    before `bucketBy`); the write is still one sorted file per bucket."""
    import re

    from airflow_lake.lake.spark.bucket_assign import assign_buckets
    from airflow_lake.lake.spark.plan_text import plan_text
    from airflow_lake.lake.spec.table_spec import stored_spec

    table = make(tmp_path / "t", partitioned=False, bucket={"columns": ["k"], "count": 8, "sort_columns": ["v"]})
    rows = rows_df(spark, 50, days=("d1", "d2"))
    plan = plan_text(assign_buckets(rows, stored_spec(table.state().spec), "n", "b", sort=False).drop("b"))
    assert len(re.findall(r"Exchange hashpartitioning\(k#\d+L, 8\), REPARTITION_BY_NUM", plan)) == 1, plan
    metrics = table.write(rows).metrics
    assert metrics["write_exchanges"] == 1 and metrics["rows_added"] == 100
    files = table.snapshot().files
    assert sorted(f.bucket for f in files) == list(range(8))
    file_rows_in_their_bucket(spark, table)
    for f in files:
        values = pq.read_table(table.storage.path(f.path)).column("v").to_pylist()
        assert values == sorted(values)


def test_sized_tasks_shuffle_by_the_bucket_id_and_keep_one_sorted_file_per_bucket(spark: Any, tmp_path: Path) -> None:
    """`sized_tasks` (an upsert's write): the shuffle goes by the bucket id without a partition count, so adaptive
    execution may put several whole buckets in one task; each bucket is still one file, sorted, in its bucket."""
    import re

    from airflow_lake.lake.spark.bucket_assign import assign_buckets
    from airflow_lake.lake.spark.file_writer import write_dataframe
    from airflow_lake.lake.spark.plan_text import plan_text
    from airflow_lake.lake.spec.table_spec import stored_spec

    table = make(tmp_path / "t", partitioned=False, bucket={"columns": ["k"], "count": 8, "sort_columns": ["v"]})
    spec = stored_spec(table.state().spec)
    rows = rows_df(spark, 50, days=("d1", "d2"))
    plan = plan_text(assign_buckets(rows, spec, "n", "b", sort=False, sized_tasks=True))
    assert re.search(r"Exchange hashpartitioning\(b#\d+, \d+\), REPARTITION_BY_COL", plan), plan
    assert "REPARTITION_BY_NUM" not in plan, plan
    files = write_dataframe(rows, table.storage, spec, "20260101000000000", sized_tasks=True)
    assert sorted(f.bucket for f in files) == list(range(8)) and sum(f.rows for f in files) == 100
    for f in files:
        values = pq.read_table(table.storage.path(f.path)).column("v").to_pylist()
        assert values == sorted(values)
        ids = spark.read.parquet(table.storage.path(f.path)).selectExpr("pmod(hash(k), 8) AS b").distinct().collect()
        assert [r.b for r in ids] == [f.bucket]
