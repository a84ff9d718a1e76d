"""Shared fixtures: one local Spark session per test run, table paths, and an isolated Airflow home."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.jvm_archive import SHORT_JVM, jvm_options
from tests.s3_server import s3_root, s3_server  # noqa: F401  (fixtures: an S3 server on 127.0.0.1)

if TYPE_CHECKING:
    from tests.connect_server import ConnectServer

# Set before pyspark or airflow is imported anywhere in the run.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-lake-test-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# The whole suite runs the data path with an object store's semantics on local disk: a rename or hard link of a
# data file under a table root raises (`lake/format/no_rename.py`; Spark jobs and Airflow tasks inherit it).
os.environ["AIRFLOW_LAKE_FORBID_RENAME"] = "1"
os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
# Spark JVMs the tests start as processes (spark-submit jobs, Airflow tasks, cluster daemons, the Connect server):
# C1 only and a serial GC (SHORT_JVM), and Spark's classes mapped from a class-data sharing archive built once per
# machine (tests/jvm_archive.py). The suite's own session (below) keeps the JVM defaults.
if "JAVA_TOOL_OPTIONS" not in os.environ:
    os.environ["JAVA_TOOL_OPTIONS"] = jvm_options(SHORT_JVM)
VENV_BIN = str(Path(sys.executable).parent)
if VENV_BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = VENV_BIN + os.pathsep + os.environ.get("PATH", "")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole run."""
    from pyspark.sql import SparkSession

    tool_options = os.environ.pop("JAVA_TOOL_OPTIONS", None) \
        if os.environ.get("JAVA_TOOL_OPTIONS", "").startswith(SHORT_JVM) else None
    session = (
        SparkSession.builder.master("local[2]")
        .appName("airflow-lake-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .getOrCreate()
    )
    if tool_options is not None:
        os.environ["JAVA_TOOL_OPTIONS"] = tool_options
    yield session
    session.stop()
    # py4j logs from __del__ at interpreter exit, after pytest closed the streams it logs to
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    """A fresh path for a lake table."""
    return str(tmp_path / "table")


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server (local[2]) started from the pip package for the run; stopped by its PID."""
    from tests.connect_server import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("connect-server") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def connect_conn_id(connect_server: ConnectServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A `spark_connect` Airflow connection to the run's Spark Connect server."""
    host, port = connect_server.url.rsplit(":", 1)  # sc://127.0.0.1:<port>
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST",
                       f'{{"conn_type": "spark_connect", "host": "{host}", "port": {port}}}')
    return "spark_connect_test"
