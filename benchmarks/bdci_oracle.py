"""The BDCI oracle job in plain PySpark (no airflow_lake, so the peers' Spark 3.5 venv imports it too): the 11 batch
files read once, merged per uuid in version order (the last value; `requests` summed; `name` the last that is not
"null"), written as Parquet; and an order-independent digest of a result to compare engines with it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import Any

VALUE_COLUMNS = ["ip", "hostname", "requests", "name", "city", "job", "phonenum"]


def spark_baseline(spark: Any, files: Sequence[str | Path], out: Path) -> None:
    """Plain Spark: the files (file i = version i) with version and row index, merged per uuid, written to `out`."""
    from pyspark.sql import functions as F

    frames = [spark.read.parquet(str(p)).select("*", F.lit(v).alias("_v"), F.col("_metadata.row_index").alias("_r"))
              for v, p in enumerate(files)]
    union = reduce(lambda a, b: a.unionByName(b), frames)
    order = F.struct("_v", "_r")
    good = F.coalesce(F.col("name").isNotNull() & (F.col("name") != F.lit("null")), F.lit(False))
    aggs = [F.max_by(c, order).alias(c) for c in VALUE_COLUMNS if c not in ("requests", "name")]
    aggs += [F.sum("requests").alias("requests"), F.max_by("name", F.struct(good, "_v", "_r")).alias("name")]
    union.groupBy("uuid").agg(*aggs).select("uuid", *VALUE_COLUMNS).write.parquet(str(out))


def digest(spark: Any, parquet_dir: Path) -> tuple[int, int]:
    """(rows, order-independent hash sum) of a Parquet result."""
    from pyspark.sql import functions as F

    got = spark.read.parquet(str(parquet_dir)).select(
        F.count(F.lit(1)), F.sum(F.xxhash64("uuid", *VALUE_COLUMNS).cast("decimal(38,0)"))).first()
    assert got is not None
    return int(got[0]), int(got[1] or 0)
