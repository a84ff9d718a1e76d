"""Bucketed reads: Spark plans lake tables as bucketed tables, over exactly the snapshot's live files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.spark.bucketed_read import split_by_bucketing
from airflow_lake.lake.spark.globs import name_glob
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from tests.lake.buckets.bucket_helpers import make, rows_df, session_conf

B8 = {"columns": ["k"], "count": 8, "sort_columns": ["k"]}
B16 = {"columns": ["k"], "count": 16, "sort_columns": ["k"]}


@pytest.fixture(scope="module")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Bucketed (8, 8, 16) and plain tables with the same rows, registered as views."""
    out = {}
    root = tmp_path_factory.mktemp("tables")
    for name, bucket in (("a8", B8), ("b8", B8), ("c16", B16), ("pa", None), ("pb", None)):
        table = make(root / name, bucket=bucket)
        table.write(rows_df(spark, 200, offset=len(out)))
        table.register(spark, name)
        out[name] = table
    return out


def plan(spark: Any, sql: str) -> str:
    return plan_text(spark.sql(sql))


def test_point_and_in_filters_read_only_their_buckets(spark: Any, tables: dict[str, Any]) -> None:
    with session_conf(spark):
        assert "SelectedBucketsCount: 1 out of 8" in plan(spark, "SELECT * FROM a8 WHERE k = 5")
        assert "SelectedBucketsCount: 2 out of 8" in plan(spark, "SELECT * FROM a8 WHERE k IN (5, 6)")
        assert "SelectedBucketsCount" not in plan(spark, "SELECT * FROM pa WHERE k = 5")
        assert sorted(r["v"] for r in spark.sql("SELECT v FROM a8 WHERE k = 5").collect()) == [50, 50]
        # files actually read: the scan keeps 1 of the 8 files per partition
        df = tables["a8"].read(spark).where("k = 5")
        assert "SelectedBucketsCount: 1 out of 8" in plan_text(df)
        assert df.count() == 2


@pytest.mark.parametrize(("sql", "plain_sql"), [
    ("SELECT * FROM a8 JOIN b8 ON a8.k = b8.k", "SELECT * FROM pa JOIN pb ON pa.k = pb.k"),
    # join keys a superset of the bucket keys
    ("SELECT * FROM a8 JOIN b8 ON a8.k = b8.k AND a8.dt = b8.dt AND a8.v = b8.v",
     "SELECT * FROM pa JOIN pb ON pa.k = pb.k AND pa.dt = pb.dt AND pa.v = pb.v"),
    # 8 x 16 buckets: the 16-bucket side is coalesced to 8
    ("SELECT * FROM a8 JOIN c16 ON a8.k = c16.k", "SELECT * FROM pa JOIN pb ON pa.k = pb.k"),
    ("SELECT k, count(*), sum(v) FROM a8 GROUP BY k", "SELECT k, count(*), sum(v) FROM pa GROUP BY k"),
    ("SELECT k, dt, sum(v) FROM c16 GROUP BY k, dt", "SELECT k, dt, sum(v) FROM pa GROUP BY k, dt"),
])
def test_joins_and_group_bys_on_the_bucket_key_do_not_shuffle(spark: Any, tables: dict[str, Any], sql: str,
                                                                plain_sql: str) -> None:
    with session_conf(spark):
        assert shuffles(plan(spark, sql)) == 0, plan(spark, sql)
        assert shuffles(plan(spark, plain_sql)) > 0  # the same query on plain tables does shuffle


def test_bucketed_join_returns_the_right_rows(spark: Any, tables: dict[str, Any]) -> None:
    with session_conf(spark):
        got = spark.sql("SELECT count(*), sum(a8.v + c16.v) FROM a8 JOIN c16 ON a8.k = c16.k AND a8.dt = c16.dt")
        plain = spark.sql("SELECT count(*), sum(pa.v + pb.v) FROM pa JOIN pb ON pa.k = pb.k AND pa.dt = pb.dt")
        count, total = got.first()
        assert count == 400
        # a8 has offset 0, c16 offset 2; pa offset 3, pb offset 4: sums differ by the offsets only
        assert total == plain.first()[1] - 400 * (3 + 4 - 0 - 2)
        assert "Coalesced" in plan_text(spark.sql("SELECT * FROM a8 JOIN c16 ON a8.k = c16.k"))


def test_overwrite_of_a_partitioned_bucketed_table_reads_only_live_files(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", bucket=B8)
    table.write(rows_df(spark, 100))
    before = table.snapshot().seq
    table.write(rows_df(spark, 100, days=("d1",), offset=1), mode="overwrite", partitions=[{"dt": "d1"}])
    live = {f.path for f in table.snapshot().files}
    replaced = [p for p in Path(table.storage.path("")).rglob("dt=d1/*.parquet")
                if str(p.relative_to(table.storage.path(""))) not in live]
    assert len(replaced) == 8  # the replaced files are still on disk, beside files of their write that stay live
    with session_conf(spark):
        df = table.read(spark)
        assert "Bucketed: true" in plan_text(df)
        assert sorted((r["dt"], r["v"] % 10) for r in df.collect()) == [("d1", 1)] * 100 + [("d2", 0)] * 100
        day = table.read(spark, filters=[("dt", "=", "d1")])  # one partition: its directory is the table
        assert "d1 AS dt" in plan_text(day) and "SelectedBucketsCount: 1 out of 8" in plan_text(day.where("k = 3"))
        assert sorted((r["dt"], r["v"] % 10) for r in day.collect()) == [("d1", 1)] * 100
        old = table.read(spark, as_of=before)
        assert sorted((r["dt"], r["v"] % 10) for r in old.collect()) == [("d1", 0)] * 100 + [("d2", 0)] * 100
        assert "Bucketed: true" in plan_text(old)


def test_files_of_a_pending_instant_are_not_read(spark: Any, tmp_path: Path) -> None:
    from airflow_lake.lake.spark.file_writer import write_dataframe

    table = make(tmp_path / "t", bucket=B8)
    table.write(rows_df(spark, 50))
    txn = table.begin("commit", "write")
    pending = write_dataframe(rows_df(spark, 50), table.storage, table.spec, txn.instant)
    assert all(Path(table.storage.path(f.path)).exists() for f in pending)  # placed, not committed
    with session_conf(spark):
        assert table.read(spark).count() == 100
    txn.abort()


def test_stats_skipping_still_works_on_bucketed_reads(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", bucket=B8)
    for day in ("d1", "d2", "d3"):
        table.write(rows_df(spark, 100, days=(day,), offset=0).selectExpr("k", f"v + {1000 * int(day[1])} AS v", "dt"))
    scan = table.scan(filters=[("v", ">=", 3000)])
    assert scan.files_skipped == 16 and len(scan.files) == 8  # only d3's files can match
    with session_conf(spark):
        df = table.read(spark, filters=[("v", ">=", 3000)])
        assert "Bucketed: true" in plan_text(df)
        assert sorted(r["v"] for r in df.collect()) == [3000 + 10 * k for k in range(100)]
        assert "SelectedBucketsCount: 1 out of 8" in plan_text(df.where("k = 3"))


def test_unpartitioned_bucketed_table(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", partitioned=False, bucket=B8)
    table.write(rows_df(spark, 100, days=("x",)))
    table.write(rows_df(spark, 100, days=("y",)), mode="overwrite")
    with session_conf(spark):
        df = table.read(spark)
        assert sorted({r["dt"] for r in df.collect()}) == ["y"] and df.count() == 100
        assert "SelectedBucketsCount: 1 out of 8" in plan_text(df.where("k = 1"))


def test_a_file_whose_bucket_id_is_out_of_range_is_an_error_not_a_silent_skip(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", bucket=B8)
    bad = DataFile("dt=a/part-1-x-00000_00009.parquet", {"dt": "a"}, 1, 1, bucket=9, bucketing="murmur3:8:k")
    with pytest.raises(LakeError, match="bucket id 9, outside its 8 buckets"):
        split_by_bucketing([bad], table.spec)


def test_glob_names_exactly_the_files() -> None:
    from fnmatch import fnmatchcase

    names = [f"part-2026112{d}-ab{d}-{n:05d}_{b:05d}.parquet" for d in range(3) for n in range(4) for b in range(3)]
    pattern = name_glob(names[::2])
    assert pattern.count("{") < len(names)  # a trie, not a flat list
    # expand the braces to check the glob's meaning without Spark
    def expand(p: str) -> list[str]:
        start = p.find("{")
        if start < 0:
            return [p]
        depth, end, cuts = 0, start, [start]
        for i in range(start, len(p)):
            depth += {"{": 1, "}": -1}.get(p[i], 0)
            if p[i] == "," and depth == 1:
                cuts.append(i)
            if depth == 0:
                end = i
                break
        options = [p[a + 1:b] for a, b in zip(cuts, [*cuts[1:], end], strict=True)]
        return [x for o in options for x in expand(p[:start] + o + p[end + 1:])]
    assert sorted(expand(pattern)) == sorted(names[::2])
    assert not any(fnmatchcase(n, pattern) for n in names[1::2])


def test_read_tables_are_dropped_without_touching_data(spark: Any, tmp_path: Path) -> None:
    from airflow_lake.jobs import run
    from airflow_lake.lake.spark.bucketed_read import drop_read_tables

    drop_read_tables(spark)
    table = make(tmp_path / "t", bucket=B8)
    table.write(rows_df(spark, 20))
    files = sorted(p for p in Path(table.storage.path("")).rglob("*.parquet"))
    table.read(spark).count()
    names = {r["tableName"] for r in spark.sql("SHOW TABLES IN spark_catalog.default").collect()}
    assert any(n.startswith("lake_") for n in names)
    assert drop_read_tables(spark) >= 1
    names = {r["tableName"] for r in spark.sql("SHOW TABLES IN spark_catalog.default").collect()}
    assert not any(n.startswith("lake_") for n in names)
    assert sorted(p for p in Path(table.storage.path("")).rglob("*.parquet")) == files  # external: data kept
    assert table.read(spark).count() == 40
    kept = table.read(spark)  # the user's own read survives an operation run in the same process
    out = make(tmp_path / "out", partitioned=False, schema="k BIGINT, n BIGINT")
    run(spark, "write", {"table": out.url, "source": {"query": "SELECT k, count(*) AS n FROM t GROUP BY k",
                                                          "tables": {"t": table.url}}})
    names = {r["tableName"] for r in spark.sql("SHOW TABLES IN spark_catalog.default").collect()}
    assert sum(n.startswith("lake_") for n in names) == 2  # the runner dropped the tables of its reads only
    assert kept.count() == 40
    drop_read_tables(spark)
