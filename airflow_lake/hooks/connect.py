"""`ConnectClient`: a lake operation as a Spark Connect client, in the task's own process.

The operation's driver side (timeline, plans, commit) runs here; its Spark work, and the per-partition
Python code it sends (`mapInArrow`), run on the Spark Connect server. So the server's Python workers must
import the same airflow_lake: by default the package is shipped as a session artifact (a zip of this
installation), and a one-row job checks which airflow_lake the workers really import before anything runs.
Both sides must see the tables at the same paths (a shared filesystem or object store).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import airflow_lake
from airflow_lake.exceptions import LakeJobError
from airflow_lake.hooks.package_zip import package_zip
from airflow_lake.jobs.identity import worker_identity
from airflow_lake.jobs.session import DEFAULT_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
# pyspark marks the whole process as a Spark Connect client with these (and then builds Connect columns in
# `pyspark.sql.functions`); put back as they were when the session closes, so a classic session or a
# spark-submit started later by this process is not mistaken for a Connect client.
PROCESS_FLAGS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


class TaskKilled(BaseException):
    """Raised in the thread running the operation when the task is killed (Airflow's SIGTERM handler calls
    `on_kill` in that thread); a BaseException, so no `except Exception` on the way swallows it."""


class ConnectClient:
    """One Spark Connect session per operation: open, check, run, close; `interrupt` for on_kill.

    :param url: `sc://host:port/;params` (from a `spark_connect` connection).
    :param conf: session settings (runtime SQL settings only: the server owns the rest).
    :param ship_package: add this installation's airflow_lake to the session as a Python artifact.
    """

    def __init__(self, url: str, conf: Mapping[str, Any], *, ship_package: bool = True) -> None:
        self.url = url
        self.conf = {**DEFAULT_CONF, **{k: str(v) for k, v in conf.items()}}
        self.ship_package = ship_package
        self._spark: SparkSession | None = None
        self._thread: int | None = None
        self._flags: dict[str, str | None] = {}
        self.killed = False

    def open(self) -> SparkSession:
        """A new session on the server, set up and checked; raises LakeJobError naming what is wrong."""
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession

        self._flags = {name: os.environ.get(name) for name in PROCESS_FLAGS}
        try:
            spark = SparkSession.builder.remote(self.url).create()
        except (PySparkException, ValueError) as err:
            self._restore_flags()
            raise LakeJobError(f"cannot open a Spark Connect session at {self.url}: {err}") from err
        try:
            self._configure(spark)
            if self.ship_package:
                spark.addArtifacts(package_zip(), pyfile=True)
            self._check_package(spark)
        except BaseException:
            with contextlib.suppress(Exception):
                spark.stop()
            self._restore_flags()
            raise
        self._spark, self._thread = spark, threading.get_ident()
        return spark

    def close(self) -> None:
        spark, self._spark, self._thread = self._spark, None, None
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()  # releases the session on the server: its views, artifacts, Python workers
            self._restore_flags()

    def _restore_flags(self) -> None:
        for name, value in self._flags.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def interrupt(self) -> None:
        """Stop the running operation: interrupt its Spark jobs on the server and, when called in the thread
        running the operation (Airflow's SIGTERM handler), unwind it with TaskKilled."""
        self.killed = True
        spark = self._spark
        if spark is None:
            return
        with contextlib.suppress(Exception):
            spark.interruptAll()
        if threading.get_ident() == self._thread:
            raise TaskKilled("the task was killed")
        with contextlib.suppress(Exception):
            spark.stop()  # another thread: its next Spark call fails

    def _configure(self, spark: SparkSession) -> None:
        from pyspark.errors import PySparkException

        refused = []
        for key, value in self.conf.items():
            try:
                spark.conf.set(key, value)
            except PySparkException as err:
                refused.append(f"{key} ({str(err).strip().splitlines()[0]})")
        if refused:
            raise LakeJobError(
                f"Spark Connect refused these settings for a session: {', '.join(refused)}. Over Spark Connect only "
                "runtime SQL settings (spark.sql.*) can be set per task: set the others when starting the server "
                "(airflow-lake connect-server --conf KEY=VALUE), or drop them from spark_conf.")

    def _check_package(self, spark: SparkSession) -> None:
        marker = self._check_marker(spark)
        if marker is not None and marker.exists():
            return
        self._check_workers(spark)
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()

    def _check_marker(self, spark: SparkSession) -> Path | None:
        """Where a passed check is remembered: per server application (a restarted server is checked again),
        client build (the package zip's digest) and shipping choice."""
        try:
            app = f"{spark.conf.get('spark.app.id')}@{spark.conf.get('spark.app.startTime')}"
        except Exception:  # a server that does not say: check every time
            return None
        key = "\n".join((self.url.split(";")[0], app, airflow_lake.__version__, PurePath(package_zip()).name,
                         str(self.ship_package)))
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        return Path(tempfile.gettempdir()) / "airflow-lake-connect-checks" / name

    def _check_workers(self, spark: SparkSession) -> None:
        try:
            version, where = worker_identity(spark)
        except Exception as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
            raise LakeJobError(
                f"the Spark Connect server's Python workers cannot run airflow_lake's code: {reason}. Install "
                f"airflow-lake=={airflow_lake.__version__} (with pyarrow and pandas) on the server, or keep "
                "ship_package on.") from err
        shipped = PurePath(package_zip()).name if self.ship_package else None
        if version != airflow_lake.__version__ or (shipped is not None and shipped not in where):
            raise LakeJobError(
                f"the Spark Connect server's Python workers import airflow_lake {version} from {where}, this task "
                f"runs {airflow_lake.__version__}" + (f" and shipped {shipped}" if shipped else "") + ". Make the "
                "server run the same version (pip install airflow-lake==" + airflow_lake.__version__ + ").")
        log.info("Spark Connect workers run airflow_lake %s from %s", version, where)
