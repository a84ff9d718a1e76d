"""The SparkSession of a job: master from spark-submit, or local for `python -m airflow_lake.jobs`."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from airflow_lake.jvm import curve_jar
from airflow_lake.lake.spark.bucketed_read import READ_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Larger Arrow batches make per-partition Python work (mapInArrow) cheaper per row (Spark's default is 10,000).
DEFAULT_CONF = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.session.timeZone": "UTC",
    **READ_CONF,  # queries of operations use the buckets of lake tables fully
    # A job reads files through its source spec only: a query source's ``parquet.`/path` `` would read a lake
    # table's replaced files, and `${env:NAME}` / `${system:name}` in its text would be replaced by the
    # driver's environment and Java properties (the query guard checks both while it plans; these keep the
    # query the same when a Spark Connect server analyzes it again to run it).
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.variable.substitute": "false",
}


def build_session(app_name: str) -> SparkSession:
    """Get or create the job's session; outside spark-submit, a local one using this Python, with our JVM code
    (`airflow_lake.jvm`) on its class path."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if "SPARK_SUBMIT_OPTS" not in os.environ and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(os.environ.get("AIRFLOW_LAKE_SPARK_MASTER", "local[2]"))
        jar = curve_jar()  # (spark-submit gets it from the hook: --jars)
        if jar is not None:
            builder = builder.config("spark.jars", str(jar))
    for key, value in DEFAULT_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
