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
from tests.stores import azure_server, gcs_server, store, store_root  # noqa: F401  (GCS and Azure emulators too)

if TYPE_CHECKING:
    from tests.connect_server import ConnectServer
    from tests.s3_server import S3Server

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

# The files that take longest, longest first: their tests' time summed from a CI run's `--durations=120` on the
# 2-core machine (2026-11, seconds). CI runs the suite in two workers, a file at a time each (`--dist loadfile
# --no-loadscope-reorder`, .ci/test): a long file that starts last keeps one worker busy while the other has
# nothing left (xdist's default order starts the files with the most tests first, and so these last). These start
# first, then the other files with `slow` tests (they start processes), then the rest in their usual order.
LONGEST_FIRST = (
    "tests/jobs/test_crash_and_concurrency.py",  # 625
    "tests/dags/test_cluster_path.py",  # 500
    "tests/dags/test_ods_to_dm.py",  # ~490 (issue 35: 320, and ~170 for the pipeline on S3)
    "tests/hooks/test_connect.py",  # 428
    "tests/dags/test_ods_to_dm_incremental.py",  # ~120 (issue 36: the incremental DAG under airflow dags test)
    "tests/operators/test_request_id.py",  # 257
    "tests/dags/test_scheduler_trigger.py",  # 253
    "tests/lake/upsert/test_versioned_deletes.py",  # 252
    "tests/lake/publish/test_delta_publish.py",  # ~150 (issue 34, under load)
    "tests/lake/publish/test_foreign_spark_reads.py",  # ~90: two foreign JVMs
    "tests/engines/test_foreign_spark.py",  # ~80: two foreign JVMs
    "tests/lake/publish/test_trino_reads.py",  # ~60: a Trino server
    "tests/jobs/test_upsert_jobs.py",  # 220
    "tests/lake/changes/test_arrow_read.py",  # ~45 (issue 36)
    "tests/lake/changes/test_oracle.py",  # ~45 (issue 36)
    "tests/jobs/test_incremental_kills.py",  # ~35 (issue 36: three spark-submits at once)
    "tests/ui/test_lake_page.py",  # 218
    "tests/operators/test_upsert.py",  # 163
    "tests/test_lineage.py",  # 150
    "tests/jobs/test_versioned_delete_op.py",  # 135
    "tests/lake/clustering/test_execute.py",  # 120
    "tests/operators/test_clustering.py",  # 119
    "tests/operators/test_empty_selections.py",  # 107
    "tests/operators/test_clustering_xcom.py",  # 107
    "tests/hooks/test_lake.py",  # 102
    "tests/test_loopback_servers.py",  # 100
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order test files longest first (see LONGEST_FIRST); the tests of a file keep their order."""
    def file_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow_files = {file_of(item) for item in items if item.get_closest_marker("slow")}
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        first_index.setdefault(file_of(item), index)

    def rank(item: pytest.Item) -> tuple[int, int, int]:
        name = file_of(item)
        known = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
        return known, 0 if name in slow_files else 1, first_index[name]

    items.sort(key=rank)  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole run."""
    from pyspark.sql import SparkSession

    from airflow_lake.jvm import curve_jar

    tool_options = os.environ.pop("JAVA_TOOL_OPTIONS", None) \
        if os.environ.get("JAVA_TOOL_OPTIONS", "").startswith(SHORT_JVM) else None
    session = (
        SparkSession.builder.master("local[2]")
        .appName("airflow-lake-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .config("spark.jars", str(curve_jar() or ""))  # clustering's curve words in the JVM (airflow_lake.jvm)
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


@pytest.fixture(scope="session")
def s3_connect_server(s3_server: S3Server,  # noqa: F811  (the fixture imported above)
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server (local[2]) whose Spark reaches the S3 server: the S3 connector's jars (`airflow-lake jars
    s3`) and S3A's settings for it (`tests/store_spark.py`); skipped without the jars, failed under CI=true."""
    from tests.connect_server import ConnectServer
    from tests.store_spark import s3_spark_args

    extra = s3_spark_args(s3_server)
    server = ConnectServer(tmp_path_factory.mktemp("s3-connect-server") / "server.log", extra=extra).start()
    yield server
    server.stop()


@pytest.fixture
def connect_conn_id(connect_server: ConnectServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A `spark_connect` Airflow connection to the run's Spark Connect server."""
    host, port = connect_server.url.rsplit(":", 1)  # sc://127.0.0.1:<port>
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST",
                       f'{{"conn_type": "spark_connect", "host": "{host}", "port": {port}}}')
    return "spark_connect_test"
