"""What README.md ("Buckets", "Shuffle guard") says of joins between bucketed lake tables, checked on the plans
Spark 4 makes for them: Exchange nodes counted, in a session set up as a job's (`jobs.session.DEFAULT_CONF`,
which holds `READ_CONF`). Tables are bucketed by `k` and partitioned by `dt` (two days)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeShuffleError
from airflow_lake.lake.spark.bucketed_read import READ_CONF
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from airflow_lake.lake.spark.session_conf import session_conf
from tests.lake.buckets.bucket_helpers import make, rows_df

NO_BROADCAST = {"spark.sql.autoBroadcastJoinThreshold": "-1"}
# Spark's own defaults for what READ_CONF changes, to show what a session without it plans
SPARK_DEFAULTS = {"spark.sql.bucketing.coalesceBucketsInJoin.enabled": "false",
                  "spark.sql.requireAllClusterKeysForCoPartition": "true"}
COUNTS = {"a8": 8, "b8": 8, "c16": 16, "e64": 64}


def bucket(count: int) -> dict[str, Any]:
    return {"columns": ["k"], "count": count, "sort_columns": ["k"]}


@pytest.fixture(scope="module")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, LakeTable]:
    root = tmp_path_factory.mktemp("joins")
    out = {}
    for offset, (name, count) in enumerate(COUNTS.items()):
        table = make(root / name, bucket=bucket(count))
        table.write(rows_df(spark, 200, offset=offset))
        out[name] = table
    return out


def job_session(spark: Any, extra: Mapping[str, str] = NO_BROADCAST) -> AbstractContextManager[None]:
    """The settings a job's session has (plus `extra`), for the length of a block."""
    return session_conf(spark, {**DEFAULT_CONF, **extra})


def plan(spark: Any, tables: dict[str, LakeTable], sql: str, **filters: str) -> str:
    """The physical plan of `sql` over the tables registered as views (each read with `dt = filters['dt']`)."""
    for name, table in tables.items():
        table.register(spark, name, filters=[("dt", "=", filters["dt"])] if filters else None)
    return plan_text(spark.sql(sql))


def exchange_sides(text: str) -> list[str]:
    """The shuffle Exchange lines of a plan."""
    return [line.strip() for line in text.splitlines() if shuffles(line)]


def test_same_count_on_the_bucket_keys_needs_no_shuffle(spark: Any, tables: dict[str, LakeTable]) -> None:
    sql = "SELECT * FROM a8 JOIN b8 ON a8.k = b8.k"
    with job_session(spark):
        assert shuffles(plan(spark, tables, sql)) == 0
    with job_session(spark, {**NO_BROADCAST, **SPARK_DEFAULTS}):
        assert shuffles(plan(spark, tables, sql)) == 0  # no setting needed for this one


def test_same_count_on_more_keys_needs_read_conf(spark: Any, tables: dict[str, LakeTable]) -> None:
    sql = "SELECT * FROM a8 JOIN b8 ON a8.k = b8.k AND a8.dt = b8.dt"
    with job_session(spark):
        assert shuffles(plan(spark, tables, sql)) == 0
    # Spark's default (requireAllClusterKeysForCoPartition=true) shuffles both sides by (k, dt)
    with job_session(spark, {**NO_BROADCAST, **SPARK_DEFAULTS}):
        assert shuffles(plan(spark, tables, sql)) == 2


def test_8_by_16_coalesces_on_exactly_the_bucket_keys(spark: Any, tables: dict[str, LakeTable]) -> None:
    sql = "SELECT * FROM a8 JOIN c16 ON a8.k = c16.k"
    with job_session(spark):
        text = plan(spark, tables, sql)
        assert shuffles(text) == 0 and "SelectedBucketsCount: 16 out of 16 (Coalesced to 8)" in text, text
        assert spark.sql(sql).count() == 800  # a key is in both days of each side: 200 keys x 2 x 2
    with job_session(spark, {**NO_BROADCAST, **SPARK_DEFAULTS}):
        assert shuffles(plan(spark, tables, sql)) == 1  # without coalescing: the 8 side re-hashed into 16


def test_8_by_16_on_more_keys_shuffles_the_side_with_fewer_buckets(spark: Any, tables: dict[str, LakeTable]) -> None:
    sql = "SELECT * FROM a8 JOIN c16 ON a8.k = c16.k AND a8.dt = c16.dt"
    with job_session(spark):
        text = plan(spark, tables, sql)
        assert "Coalesced" not in text
        (exchange,) = exchange_sides(text)
        assert ", 16)" in exchange, exchange  # the 8-bucket side shuffled into the 16 side's buckets
        assert spark.sql(sql).count() == 400


def test_one_partition_of_each_joins_on_more_keys_without_a_shuffle(spark: Any, tables: dict[str, LakeTable]
                                                                    ) -> None:
    # read with `filters` on dt, dt is one value on each side: the join is on k alone, coalesced
    sql = "SELECT * FROM a8 JOIN c16 ON a8.k = c16.k AND a8.dt = c16.dt"
    with job_session(spark):
        text = plan(spark, tables, sql, dt="d1")
        assert shuffles(text) == 0 and "Coalesced to 8" in text, text
        assert spark.sql(sql).count() == 200


def test_counts_more_than_4_apart_shuffle_one_side(spark: Any, tables: dict[str, LakeTable]) -> None:
    # spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio is 4: 8 x 64 does not coalesce
    with job_session(spark):
        text = plan(spark, tables, "SELECT * FROM a8 JOIN e64 ON a8.k = e64.k")
        assert "Coalesced" not in text
        (exchange,) = exchange_sides(text)
        assert ", 64)" in exchange, exchange


def test_a_join_without_the_bucket_keys_shuffles_both_sides(spark: Any, tables: dict[str, LakeTable]) -> None:
    with job_session(spark):
        assert shuffles(plan(spark, tables, "SELECT * FROM a8 JOIN b8 ON a8.dt = b8.dt AND a8.v = b8.v")) == 2


def test_small_tables_broadcast_and_hide_the_buckets(spark: Any, tables: dict[str, LakeTable]) -> None:
    sql = "SELECT * FROM a8 JOIN c16 ON a8.k = c16.k AND a8.dt = c16.dt"
    with job_session(spark, {}):  # Spark's default threshold (10 MB): these tables are far below it
        broadcast = plan(spark, tables, sql)
        assert "BroadcastHashJoin" in broadcast and shuffles(broadcast) == 0
    with job_session(spark):  # -1: the plan the same join gets once the tables are big
        assert shuffles(plan(spark, tables, sql)) == 1


# ---- max_exchanges: what the guard counts, as a write job sees it ----

def write(spark: Any, table: LakeTable, sql: str, tables: dict[str, LakeTable], extra: Mapping[str, str]
          ) -> dict[str, Any]:
    with job_session(spark, extra):
        return run(spark, "write", {"table": table.url, "mode": "overwrite", "max_exchanges": 0, "source": {
            "query": sql, "tables": {name: t.url for name, t in tables.items()}}})


def committed(table: LakeTable) -> tuple[list[str], int]:
    """Actions of the log entries other than rollbacks (a refused write records one), and the live files."""
    fresh = LakeTable.open(table.url)
    log = fresh.commit_log
    actions = [e.action for e in (log.read(seq) for seq in range(log.head() + 1)) if e.action != "rollback"]
    return actions, len(fresh.snapshot().files)


JOINED = "SELECT a8.k, a8.v + c16.v AS v, a8.dt FROM a8 JOIN c16 ON a8.k = c16.k"
JOINED_MORE_KEYS = JOINED + " AND a8.dt = c16.dt"


def test_guard_passes_a_coalesced_join_into_a_table_of_its_buckets(spark: Any, tables: dict[str, LakeTable],
                                                                   tmp_path: Path) -> None:
    into8 = make(tmp_path / "into8", bucket=bucket(8))
    metrics = write(spark, into8, JOINED, tables, NO_BROADCAST)
    assert (metrics["query_exchanges"], metrics["write_exchanges"], metrics["rows_added"]) == (0, 0, 800)


def test_guard_counts_the_exchange_the_write_adds(spark: Any, tables: dict[str, LakeTable], tmp_path: Path) -> None:
    # the join's rows are in 8 buckets; a 16-bucket table needs them re-hashed: one Exchange, added by the write
    into16 = make(tmp_path / "into16", bucket=bucket(16))
    with pytest.raises(LakeShuffleError) as caught:
        write(spark, into16, JOINED, tables, NO_BROADCAST)
    assert (caught.value.query_exchanges, caught.value.write_exchanges) == (0, 1)
    assert committed(into16) == (["create"], 0)


def test_guard_fails_a_join_that_shuffles_and_passes_it_once_broadcast(spark: Any, tables: dict[str, LakeTable],
                                                                       tmp_path: Path) -> None:
    plain = make(tmp_path / "plain")  # no buckets: the write adds no Exchange
    with pytest.raises(LakeShuffleError) as caught:
        write(spark, plain, JOINED_MORE_KEYS, tables, NO_BROADCAST)
    assert caught.value.query_exchanges == 1 and "hashpartitioning" in str(caught.value)
    assert committed(plain) == (["create"], 0)
    # a broadcast is no shuffle: small tables pass the guard that the same join fails at full size
    metrics = write(spark, plain, JOINED_MORE_KEYS, tables, {})
    assert (metrics["query_exchanges"], metrics["rows_added"]) == (0, 400)


def test_read_conf_is_what_the_readme_says() -> None:
    assert READ_CONF == {"spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
                         "spark.sql.bucketing.coalesceBucketsInJoin.enabled": "true",
                         "spark.sql.requireAllClusterKeysForCoPartition": "false"}
    assert all(DEFAULT_CONF[key] == value for key, value in READ_CONF.items())
