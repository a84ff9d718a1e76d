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
import threading
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import airflow_lake
from airflow_lake.exceptions import LakeJobError
from airflow_lake.hooks.package_zip import package_zip, private_dir
from airflow_lake.jobs.identity import worker_identity
from airflow_lake.jobs.protocol import first_line
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.jvm import curve_jar
from airflow_lake.lake import faults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
# pyspark marks the whole process as a Spark Connect client with these (and then builds Connect columns in
# `pyspark.sql.functions`); put back as they were when the session closes, so a classic session or a
# spark-submit started later by this process is not mistaken for a Connect client.
PROCESS_FLAGS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
# Fault point (`airflow_lake.lake.faults`) while a session opens: created, before its settings, the package
# upload and the workers' check; tests stop a task there to kill it.
OPEN_POINT = "connect_open"


class TaskKilled(BaseException):
    """Raised in the thread running the operation when the task is killed (Airflow's SIGTERM handler calls
    `on_kill` in that thread); a BaseException, so no `except Exception` on the way swallows it."""


class ConnectClient:
    """One Spark Connect session per operation: open, check, run, close; `interrupt` for on_kill.

    A kill counts from the moment `open` starts: in the thread running the operation it unwinds it at once
    (TaskKilled); from another thread it stops the session, and `open` refuses to hand out a session
    opened for a killed task, so no operation starts after a kill.

    :param url: `sc://host:port/;params` (from a `spark_connect` connection).
    :param conf: session settings (runtime SQL settings only: the server owns the rest).
    :param ship_package: add this installation's airflow_lake to the session as a Python artifact.
    """

    def __init__(self, url: str, conf: Mapping[str, Any], *, ship_package: bool = True) -> None:
        self.url = url
        self.conf = {**DEFAULT_CONF, **{k: str(v) for k, v in conf.items()}}
        self.ship_package = ship_package
        self._spark: SparkSession | None = None  # the open session (also while it is being set up)
        self._thread: int | None = None  # the thread running the operation
        self._flags: dict[str, str | None] = {}
        self._lock = threading.RLock()  # re-entrant: interrupt runs in a signal handler of the operation's thread
        self.killed = False

    def open(self) -> SparkSession:
        """A new session on the server, set up and checked; raises LakeJobError naming what is wrong, and
        TaskKilled if the task is killed meanwhile."""
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession

        with self._lock:
            self._thread = threading.get_ident()
            self._raise_if_killed()
        self._flags = {name: os.environ.get(name) for name in PROCESS_FLAGS}
        try:
            spark = SparkSession.builder.remote(self.url).create()
        except (PySparkException, ValueError) as err:
            self._restore_flags()
            raise LakeJobError(f"cannot open a Spark Connect session at {self.url}: {err}") from err
        except BaseException:  # killed while connecting
            self._restore_flags()
            raise
        try:
            with self._lock:
                self._spark = spark  # from here on a kill stops this session
                self._raise_if_killed()
            faults.reach(OPEN_POINT)
            self._raise_if_killed()
            self._configure(spark)
            shipped = package_zip() if self.ship_package else None
            if shipped is not None:
                self._raise_if_killed()
                spark.addArtifacts(shipped, pyfile=True)
                self._ship_jar(spark)
            self._raise_if_killed()
            self._check_package(spark, shipped)
            with self._lock:  # a kill from another thread during the steps above is honoured here, at the latest
                self._raise_if_killed()
        except BaseException:
            with self._lock:
                self._spark = None
            with contextlib.suppress(Exception):
                spark.stop()
            self._restore_flags()
            raise
        return spark

    @staticmethod
    def _ship_jar(spark: SparkSession) -> None:
        """Our JVM code (clustering's curve words) as a jar of this session, for a server started without it;
        where it cannot be added the Python workers compute the words (the same table, slower)."""
        jar = curve_jar()
        if jar is None:
            return
        try:
            spark.addArtifacts(str(jar))
        except Exception as err:  # (any server refusal: the job goes on without it)
            log.info("Spark Connect: our JVM code was not added to the session (%s); curve words in Python", err)

    def _raise_if_killed(self) -> None:
        if self.killed:
            raise TaskKilled("the task was killed")

    def close(self) -> None:
        with self._lock:
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
        """Stop the operation, whether its session is open, opening or not yet asked for: interrupt its
        Spark jobs on the server and, when called in the thread running the operation (Airflow's SIGTERM
        handler), unwind it with TaskKilled."""
        with self._lock:
            self.killed = True
            spark, same_thread = self._spark, threading.get_ident() == self._thread
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.interruptAll()
        if same_thread:
            raise TaskKilled("the task was killed")
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()  # another thread: its next Spark call fails (an upload or a check in `open` too)

    def _configure(self, spark: SparkSession) -> None:
        from pyspark.errors import PySparkException

        refused = []
        for key, value in self.conf.items():
            try:
                spark.conf.set(key, value)
            except PySparkException as err:
                refused.append(f"{key} ({first_line(err)})")
        if refused:
            raise LakeJobError(
                f"Spark Connect refused these settings for a session: {', '.join(refused)}. Over Spark Connect only "
                "runtime SQL settings (spark.sql.*) can be set per task: set the others when starting the server "
                "(airflow-lake connect-server --conf KEY=VALUE), or drop them from spark_conf.")

    def _check_package(self, spark: SparkSession, shipped: str | None) -> None:
        marker = self._check_marker(spark, shipped)
        if marker is not None and marker.exists():
            return
        self._check_workers(spark, shipped)
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.parent.mkdir(mode=0o700, exist_ok=True)
                marker.touch()

    def _check_marker(self, spark: SparkSession, shipped: str | None) -> Path | None:
        """Where a passed check is remembered: per server application (a restarted server is checked again),
        client build (the package zip's digest) and shipping choice; in this user's private directory, so
        no one else can plant a marker that skips the check."""
        try:
            app = f"{spark.conf.get('spark.app.id')}@{spark.conf.get('spark.app.startTime')}"
        except Exception:  # a server that does not say: check every time
            return None
        # (the URL without its parameters and trailing slash: Airflow's connection gives sc://h:p/, others sc://h:p)
        key = "\n".join((self.url.split(";")[0].rstrip("/"), app, airflow_lake.__version__,
                         PurePath(shipped or package_zip()).name, str(self.ship_package)))
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        return private_dir() / "connect-checks" / name

    def _check_workers(self, spark: SparkSession, shipped_path: str | None) -> None:
        try:
            version, where = worker_identity(spark)
        except Exception as err:
            raise LakeJobError(
                f"the Spark Connect server's Python workers cannot run airflow_lake's code: {first_line(err)}. "
                f"Install airflow-lake=={airflow_lake.__version__} (with pyarrow and pandas) on the server, or "
                "keep ship_package on.") from err
        shipped = PurePath(shipped_path).name if shipped_path else None
        if version != airflow_lake.__version__ or (shipped is not None and shipped not in where):
            raise LakeJobError(
                f"the Spark Connect server's Python workers import airflow_lake {version} from {where}, this task "
                f"runs {airflow_lake.__version__}" + (f" and shipped {shipped}" if shipped else "") + ". Make the "
                "server run the same version (pip install airflow-lake==" + airflow_lake.__version__ + ").")
        log.info("Spark Connect workers run airflow_lake %s from %s", version, where)
