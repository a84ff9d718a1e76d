"""Rows sent to chosen shuffle partitions: our Murmur3 is Spark's, and a repartition by a slot's value
lands in that slot's partition."""

from __future__ import annotations

import random
from typing import Any

import pytest

from airflow_lake.lake.clustering import slots


def test_hash_long_is_sparks_hash_of_a_bigint(spark: Any) -> None:
    rng = random.Random(8)
    values = [0, 1, -1, 42, 2**31, -2**31, 2**63 - 1, -2**63] + [rng.randint(-2**63, 2**63 - 1) for _ in range(200)]
    df = spark.createDataFrame([(v,) for v in values], "v BIGINT")
    got = {r["v"]: r["h"] for r in df.selectExpr("v", "hash(v) AS h").collect()}
    assert {v: slots.hash_long(v) for v in values} == got


@pytest.mark.parametrize("partitions", [1, 7, 64, 300])
def test_slot_values_hash_to_their_partition(spark: Any, partitions: int) -> None:
    from pyspark.sql import functions as F

    values = slots.slot_values(partitions)
    assert len(values) == partitions == len(set(values))
    rows = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "slot INT, v BIGINT")
    spread = rows.repartition(partitions, "v").select("slot", F.spark_partition_id().alias("pid")).collect()
    assert all(r["slot"] == r["pid"] for r in spread)


def test_slot_counts_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="partitions"):
        slots.slot_values(0)
    with pytest.raises(ValueError, match="partitions"):
        slots.slot_values(slots.MAX_SLOTS + 1)
