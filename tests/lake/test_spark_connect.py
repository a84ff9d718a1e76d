"""The core's write and read paths over Spark Connect: only DataFrame/SQL APIs, no py4j, no RDDs.

Uses the run's real Spark Connect server (from the pip package, local[2]) and runs the lake core as its client.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from airflow_lake.lake import LakeTable
from tests.connect_server import ConnectServer
from tests.support import parquet_files_on_disk

pytestmark = pytest.mark.slow


@pytest.fixture
def connect_url(connect_server: ConnectServer) -> str:
    """The run's Spark Connect server (tests/connect_server.py)."""
    return connect_server.url


# The client runs in its own process: pyspark refuses a remote session next to the suite's classic one.
CLIENT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from airflow_lake.lake import LakeSchemaError, LakeTable
    from airflow_lake.lake.format import parquet_footers as footers

    url, path = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.remote(url).getOrCreate()
    table = LakeTable.create(path, {
        "schema": "id BIGINT NOT NULL, dt STRING, ts TIMESTAMP", "partition_by": ["dt"],
        "bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]}})
    df = spark.range(0, 1000).selectExpr("id", "CAST(id % 3 AS STRING) AS dt", "timestamp_seconds(id) AS ts")
    out = {"first": table.write(df).metrics}
    out["count"] = table.read(spark).count()
    out["filtered"] = table.read(spark, filters=[("id", "<", 10)]).count()
    footers.SPARK_JOB_MIN_FILES = 1  # the footers read by a Spark job, over Connect
    out["second"] = table.write(df).metrics
    out["count_after"] = table.read(spark).count()
    changes = table.changes(spark, 0, 2, filters=[("id", "<", 500)])  # both writes' rows, over Connect
    out["changes"] = sorted(tuple(r) for r in changes.groupBy("_change_type", "_commit_seq").count().collect())
    try:
        table.write(spark.range(0, 3).selectExpr("id", "'' AS dt", "timestamp_seconds(id) AS ts"))
    except LakeSchemaError as err:
        out["refused"] = str(err)
    # bucketed reads and a bucket rewrite, over Connect
    from airflow_lake.lake.spark.bucketed_read import READ_CONF
    from airflow_lake.lake.buckets.rewrite import bucket_rewrite
    from airflow_lake.lake.spark.plan_text import plan_text, shuffles
    for key, value in READ_CONF.items():
        spark.conf.set(key, value)
    point = table.read(spark).where("id = 5")
    out["point_plan"], out["point_rows"] = plan_text(point), point.count()
    table.register(spark, "t")
    out["group_by_shuffles"] = shuffles(plan_text(spark.sql("SELECT id, count(*) FROM t GROUP BY id")))
    out["rewrite"] = bucket_rewrite(table, spark, partitions={"from": {"dt": "1"}},
                                    bucket={"columns": ["id"], "count": 8}).metrics
    out["count_rewritten"] = table.read(spark).count()
    print("RESULT " + json.dumps(out))
""")


def test_bucketed_partitioned_write_and_read_over_connect(connect_url: str, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    done = subprocess.run([sys.executable, str(script), connect_url, path], check=False, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert out["first"]["rows_added"] == 1000 and out["first"]["files_added"] == 12
    assert out["count"] == 1000 and out["filtered"] == 10
    assert out["second"]["files_added"] == 12 and out["count_after"] == 2000
    assert out["changes"] == [["insert", 1, 500], ["insert", 2, 500]]
    assert "empty string" in out["refused"]
    assert "SelectedBucketsCount: 1 out of 4" in out["point_plan"] and out["point_rows"] == 2
    assert out["group_by_shuffles"] == 0
    assert out["rewrite"]["bucket_counts"] == {"dt=1": 8, "dt=2": 8} and out["count_rewritten"] == 2000
    table = LakeTable.open(path)
    files = table.snapshot().files
    assert {f.bucket for f in files if f.partition["dt"] == "0"} == set(range(4))
    assert {f.bucket for f in files if f.partition["dt"] != "0"} == set(range(8))
    assert all(f.stats["ts"].min is not None for f in files)
    assert table.scan([("id", "<", 10)]).files_skipped == sum(f.stats["id"].min >= 10 for f in files) > 0
    assert parquet_files_on_disk(path) >= {f.path for f in files}  # (+ the files the rewrite replaced)


CURVES = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from airflow_lake.lake.clustering import jvm_words, keys
    from airflow_lake.lake.clustering.layout import Layout
    from airflow_lake.lake.spec.table_spec import TableSpec

    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    spec = TableSpec.from_dict({"schema": "x BIGINT, y DOUBLE, s STRING"})
    df = spark.range(0, 20000).selectExpr("(id * 7919) % 10007 AS x", "IF(id % 11 = 0, NULL, sin(id) * 1e6) AS y",
                                          "concat('https://example.com/', id % 97) AS s")
    out = {}
    for kind, columns in (("ZORDER", ("x", "y")), ("HILBERT", ("s", "y", "x"))):
        model, inputs = keys.curve_model(df, Layout(kind, columns, "SAMPLE", 256), spec, files=8, seed=1)
        types = [spec.column(c).type for c in columns]
        jvm, where = keys.words_column(df, model, inputs, types)
        python, _ = keys.words_column(df, model, inputs, types, jvm=False)
        rows = df.select(jvm.alias("j"), python.alias("p")).collect()
        out[kind] = [where, len(rows), sum(r["j"] != r["p"] for r in rows), len({r["j"] for r in rows})]
    jvm_words.CLASS_PREFIX = "airflowlake.jvm.NoSuchClass"  # a server without the class: the Python workers
    spark.sql("DROP TEMPORARY FUNCTION IF EXISTS __lake_curve_words_2_1")
    model, inputs = keys.curve_model(df, Layout("ZORDER", ("x", "y"), "SAMPLE", 256), spec, files=1, seed=1)
    out["missing"] = keys.words_column(df, model, inputs, ["bigint", "double"])[1]
    print("RESULT " + json.dumps(out))
""")


def test_curve_words_are_computed_in_the_servers_jvm(connect_url: str, tmp_path: Path) -> None:
    # `airflow-lake connect-server` puts our JVM code on the server's class path: the words of the Java UDF over
    # Connect equal the Arrow UDF's; a server without it gets the Arrow UDF
    script = tmp_path / "curves.py"
    script.write_text(CURVES)
    done = subprocess.run([sys.executable, str(script), connect_url], check=False, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    for kind in ("ZORDER", "HILBERT"):
        where, rows, mismatched, distinct = out[kind]
        assert (where, rows, mismatched) == ("the JVM", 20000, 0) and distinct > 1000, out
    assert out["missing"] == "Python workers (an Arrow UDF)"
