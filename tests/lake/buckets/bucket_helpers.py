"""Helpers for the bucket tests: session settings, tables with known rows, and what Spark says of a plan."""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from airflow_lake.lake.spark import session_conf as spark_conf
from airflow_lake.lake.spark.bucketed_read import READ_CONF
from airflow_lake.lake.table import LakeTable

# Broadcast joins hide shuffles of small test tables; the bucket settings make pruning visible.
PLAN_CONF = {**READ_CONF, "spark.sql.autoBroadcastJoinThreshold": "-1"}


def session_conf(spark: Any, settings: Mapping[str, str] = PLAN_CONF) -> AbstractContextManager[None]:
    """Set SQL confs (by default those that make bucket plans visible) for a block, then restore them."""
    return spark_conf.session_conf(spark, settings)


def rows_df(spark: Any, n: int, *, days: tuple[str, ...] = ("d1", "d2"), offset: int = 0) -> Any:
    """n rows per day: k = 0..n-1, v = k * 10 + offset, dt = day."""
    data = [(k, k * 10 + offset, day) for day in days for k in range(n)]
    return spark.createDataFrame(data, "k BIGINT, v BIGINT, dt STRING")


def make(path: Path, *, partitioned: bool = True, bucket: Mapping[str, Any] | None = None,
         schema: str = "k BIGINT, v BIGINT, dt STRING") -> LakeTable:
    """A lake table (bucketed if `bucket`)."""
    spec: dict[str, Any] = {"schema": schema}
    if partitioned:
        spec["partition_by"] = ["dt"]
    if bucket is not None:
        spec["bucket"] = dict(bucket)
    return LakeTable.create(str(path), spec)


def file_rows_in_their_bucket(spark: Any, table: LakeTable) -> None:
    """Assert that every bucketed file holds only rows of the bucket its name says, computed by Spark."""
    from pyspark.sql import functions as F

    from airflow_lake.lake.format.data_files import file_bucketing

    snap = table.snapshot()
    for data_file in snap.files:
        bucketing = file_bucketing(data_file, snap.spec)
        if bucketing is None:
            continue
        assert re.match(r"^.*_(\d+)(?:\..*)?$", data_file.path).group(1) == f"{data_file.bucket:05d}", \
            data_file.path  # Spark's bucket id at the end of the name (its own pattern)
        df = spark.read.parquet(table.storage.path(data_file.path))
        got = {r[0] for r in df.select(F.pmod(F.hash(*bucketing.columns), F.lit(bucketing.count))).distinct().collect()}
        assert got == {data_file.bucket}, (data_file.path, got)
