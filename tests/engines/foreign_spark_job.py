"""Run by tests/engines/foreign_spark.py in a process of its own: a plain pyspark (no airflow-lake, no repo on the
path) with Delta's or Iceberg's jars reads tables and prints the rows as one JSON line on stdout.

    python foreign_spark_job.py REQUEST.json

REQUEST.json: {"jars": [...], "delta": bool, "catalogs": {name: {"uri": jdbc-url, "warehouse": ...}},
"requests": [{"kind": "delta", "path", "version"} | {"kind": "iceberg", "table", "snapshot_id"} | {"kind": "sql",
"sql"}]}. Each request gives {"rows": [...]} or {"error": message}: one failing request does not hide the others'
results. Values that JSON lacks are given as text: dates and timestamps ISO 8601, decimals as written, bytes in hex.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import sys
import time
from typing import Any

MARKER = "FOREIGN_SPARK_RESULT "


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return value


def _message(err: Exception) -> str:
    """The JVM's exception line (`org.x.SomeException: [CODE] text`), not py4j's wrapper around it."""
    text = str(err)
    for line in text.splitlines():
        line = line.lstrip(": ").strip()
        if "Exception:" in line or "Error:" in line:
            return line
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


def main(request_file: str) -> None:
    started = time.monotonic()
    with open(request_file) as handle:
        spec = json.load(handle)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("foreign spark reader")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.warehouse.dir", os.path.abspath("warehouse"))  # the caller's temporary cwd
               .config("spark.jars", ",".join(spec["jars"])))
    extensions = []
    if spec.get("delta"):
        extensions.append("io.delta.sql.DeltaSparkSessionExtension")
        builder = (builder.config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
                   # a log's state is rebuilt in 50 tasks by default: 1 for the tests' small tables (10x faster)
                   .config("spark.databricks.delta.snapshotPartitions", "1")
                   # a test vacuums with RETAIN 0 HOURS: what a careless user would run
                   .config("spark.databricks.delta.retentionDurationCheck.enabled", "false"))
    if spec.get("catalogs"):
        extensions.append("org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    for name, catalog in spec.get("catalogs", {}).items():
        prefix = f"spark.sql.catalog.{name}"
        builder = (builder.config(prefix, "org.apache.iceberg.spark.SparkCatalog")
                   .config(f"{prefix}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
                   .config(f"{prefix}.uri", catalog["uri"]).config(f"{prefix}.warehouse", catalog["warehouse"]))
    if extensions:
        builder = builder.config("spark.sql.extensions", ",".join(extensions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_seconds = time.monotonic() - started
    results: list[dict[str, Any]] = []
    for request in spec["requests"]:
        began = time.monotonic()
        try:
            if request["kind"] == "delta":
                reader = spark.read.format("delta")
                if request.get("version") is not None:
                    reader = reader.option("versionAsOf", request["version"])
                frame = reader.load(request["path"])
            elif request["kind"] == "iceberg":
                reader = spark.read
                if request.get("snapshot_id") is not None:
                    # Iceberg 1.12 refuses its old option "snapshot-id": Spark's own, as VERSION AS OF does
                    reader = reader.option("versionAsOf", str(request["snapshot_id"]))
                frame = reader.table(request["table"])
            else:
                frame = spark.sql(request["sql"])
            results.append({"rows": [_plain(row.asDict(recursive=True)) for row in frame.collect()]})
        except Exception as err:  # the caller decides: a read raises there, a refused write is what a test expects
            results.append({"error": _message(err)})
        results[-1]["seconds"] = round(time.monotonic() - began, 2)
    version = spark.version
    spark.stop()
    print(MARKER + json.dumps({"results": results, "session_seconds": round(session_seconds, 2),
                               "total_seconds": round(time.monotonic() - started, 2),
                               "spark_version": version}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
