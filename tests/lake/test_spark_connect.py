"""The core's write and read paths over Spark Connect: only DataFrame/SQL APIs, no py4j, no RDDs.

Starts a real Spark Connect server from the pip package (local[2]) and runs the lake core as its client.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeSchemaError, LakeTable, footers
from tests.support import SPARK_SUBMIT, parquet_files_on_disk

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect server and a client session of it."""
    from pyspark.sql import SparkSession

    port = free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [SPARK_SUBMIT, "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master",
             "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
             "spark-internal"],
            env={**os.environ, "PYSPARK_PYTHON": sys.executable}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "Spark Connect server did not start"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        session = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        yield session
        session.stop()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_bucketed_partitioned_write_and_read_over_connect(connect: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spark = connect
    table = LakeTable.create(str(tmp_path / "t"), {
        "schema": "id BIGINT NOT NULL, dt STRING, ts TIMESTAMP", "partition_by": ["dt"],
        "bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]}})
    df = spark.range(0, 1000).selectExpr("id", "CAST(id % 3 AS STRING) AS dt", "timestamp_seconds(id) AS ts")
    entry = table.write(df)
    files = table.snapshot().files
    assert entry.metrics["rows_added"] == 1000 and len(files) == 12 and {f.bucket for f in files} == set(range(4))
    assert all(f.stats["ts"].min is not None for f in files)  # timestamps got footer stats
    assert table.read(spark).count() == 1000
    scan = table.scan([("id", "<", 10)])
    assert table.read(spark, filters=[("id", "<", 10)]).count() == 10
    assert scan.files_skipped == sum(f.stats["id"].min >= 10 for f in files) > 0
    monkeypatch.setattr(footers, "SPARK_JOB_MIN_FILES", 1)  # the footers read by a Spark job, over Connect
    table.write(df)
    assert table.read(spark).count() == 2000 and table.snapshot().files[-1].stats
    with pytest.raises(LakeSchemaError, match="empty string"):
        table.write(spark.range(0, 3).selectExpr("id", "'' AS dt", "timestamp_seconds(id) AS ts"))
    assert parquet_files_on_disk(table.url) == {f.path for f in table.snapshot().files}
