"""`query_shuffles`: the shuffles of a query's plan, taken from its analyzed plan when that shows it cannot shuffle
(no explain, which plans the whole query again), and from the explain otherwise: the same count either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake.spark import plan_text as plans


def test_query_shuffles_counts_what_the_explain_counts_and_skips_it_for_scans_and_projections(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import functions as F

    spark.range(40).selectExpr("id", "cast(id % 3 as string) k").write.parquet(str(tmp_path / "src"))
    df = spark.read.parquet(str(tmp_path / "src"))
    spark.range(10).createOrReplaceTempView("plan_text_v")
    narrow = {"scan": df, "projected and filtered": df.withColumn("x", F.col("id") + 1).where("id > 3"),
              "a view": spark.sql("SELECT * FROM plan_text_v WHERE id > 1")}
    wide = {"aggregate": df.groupBy("k").count(), "sort": df.orderBy("id"), "repartition": df.repartition(3),
            "window": df.selectExpr("id", "row_number() OVER (PARTITION BY k ORDER BY id) r"),
            "IN subquery": df.where("id IN (SELECT id FROM plan_text_v)"),
            "scalar subquery": df.selectExpr("id", "(SELECT max(id) FROM plan_text_v) m"),
            "a column named Exchange": df.withColumnRenamed("k", "Exchange")}
    expected = {name: plans.shuffles(plans.plan_text(d)) for name, d in {**narrow, **wide}.items()}
    assert expected["aggregate"] == expected["sort"] == expected["repartition"] == expected["window"] == 1
    explained: list[object] = []
    real = plans.plan_text
    monkeypatch.setattr(plans, "plan_text", lambda d: explained.append(d) or real(d))
    assert {name: plans.query_shuffles(d) for name, d in narrow.items()} == {n: expected[n] for n in narrow}
    assert explained == []  # none of them was planned again
    assert {name: plans.query_shuffles(d) for name, d in wide.items()} == {n: expected[n] for n in wide}
    assert len(explained) == len(wide)


def test_scan_chain_is_projections_over_a_file_scan_and_the_plans_agree(spark: Any, tmp_path: Path) -> None:
    """`scan_chain`: what a write takes without planning — no shuffle, no hash partitioning, and a repartition over it
    is one Exchange; a catalog table (maybe bucketed), a filter, a local relation or a join is not one."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark.range(40).selectExpr("id", "cast(id % 3 as string) k").write.parquet(str(tmp_path / "src"))
    df = spark.read.parquet(str(tmp_path / "src"))
    spark.range(8).write.bucketBy(4, "id").option("path", str(tmp_path / "bt")).saveAsTable("plan_text_bt")
    try:
        chains = {"scan": df, "projected": df.selectExpr("id", "k AS `Relation [x]`").alias("a"),
                  "observed": df.observe(Observation("plan_text_o"), F.expr("count(1) AS n")).withColumn("y", F.lit(1))}
        others = {"bucketed table": spark.table("plan_text_bt"), "filtered": df.where("id > 3"),
                  "local": spark.createDataFrame([(1,)], "id long"), "joined": df.join(df, "id"),
                  "repartitioned": df.repartition(3, "id")}
        assert {n: plans.scan_chain(d) for n, d in {**chains, **others}.items()} == {
            **{n: True for n in chains}, **{n: False for n in others}}
        for d in chains.values():
            assert plans.shuffles(plans.plan_text(d)) == 0 and plans.hash_partitioning(d) is None
            assert plans.shuffles(plans.plan_text(d.repartition(F.col("id")))) == 1
    finally:
        spark.sql("DROP TABLE IF EXISTS plan_text_bt")
