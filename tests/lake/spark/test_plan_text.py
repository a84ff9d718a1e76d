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
