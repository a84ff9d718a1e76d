"""`LakeHook`: runs lake operations through spark-submit and reads their metrics back from the timeline."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException

from airflow_lake.exceptions import LakeJobConflict, LakeJobError
from airflow_lake.hooks.package_zip import package_zip
from airflow_lake.jobs import ENTRY_POINT
from airflow_lake.jobs.command_line import EXIT_CONFLICT
from airflow_lake.jobs.ops.common import entry_metrics
from airflow_lake.jobs.registry import get, validate
from airflow_lake.jobs.runner import run
from airflow_lake.lake.errors import LakeTableNotFound
from airflow_lake.lake.instants import pending
from airflow_lake.lake.table import LakeTable


class LakeHook(BaseHook):
    """Submit a lake operation with spark-submit over the Spark connection (default `spark_default`).

    :param conn_id: Spark connection (master in its host, e.g. `local[2]` or `spark://host:7077`).
    :param spark_conf: extra `--conf` settings.
    :param python: Python for the driver and executors (PYSPARK_PYTHON); default this interpreter,
        None-string "" to leave it to the cluster.
    :param env_vars: extra environment for spark-submit.
    :param ship_package: send the airflow_lake package with `--py-files` (for clusters without it).
    """

    conn_name_attr = "conn_id"
    default_conn_name = "spark_default"
    conn_type = "spark"
    hook_name = "Airflow Lake"

    def __init__(self, conn_id: str = default_conn_name, *, spark_conf: Mapping[str, Any] | None = None,
                 python: str | None = None, env_vars: Mapping[str, str] | None = None,
                 driver_memory: str | None = None, executor_memory: str | None = None,
                 ship_package: bool = True, verbose: bool = False) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.spark_conf = dict(spark_conf or {})
        self.python = sys.executable if python is None else python
        self.env_vars = dict(env_vars or {})
        self.driver_memory = driver_memory
        self.executor_memory = executor_memory
        self.ship_package = ship_package
        self.verbose = verbose
        self._submit_hook: SparkSubmitHook | None = None
        self._running: tuple[str, str] | None = None  # (table, request id) of the job in flight

    def get_conn(self) -> Any:
        """Not used: each operation is one spark-submit."""
        return None

    def _environment(self) -> dict[str, str]:
        env = dict(self.env_vars)
        if self.python:
            env.setdefault("PYSPARK_PYTHON", self.python)
            env.setdefault("PYSPARK_DRIVER_PYTHON", self.python)
        path = os.environ.get("PATH", "")
        bin_dir = os.path.dirname(sys.executable)
        if shutil.which("spark-submit", path=path) is None and os.path.exists(os.path.join(bin_dir, "spark-submit")):
            env.setdefault("PATH", bin_dir + os.pathsep + path)  # spark-submit of the pyspark next to us
        return env

    def build_submit_hook(self, operation: str, spec_file: str, name: str) -> SparkSubmitHook:
        """The SparkSubmitHook that runs `operation` with the spec in `spec_file`."""
        return SparkSubmitHook(
            conn_id=self.conn_id,
            conf=self.spark_conf,
            py_files=package_zip() if self.ship_package else None,
            application_args=[operation, "--spec", f"@{spec_file}"],
            env_vars=self._environment(),
            driver_memory=self.driver_memory,
            executor_memory=self.executor_memory,
            name=name,
            verbose=self.verbose,
        )

    def submit(self, operation: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Validate `spec`, run `operation` through spark-submit, return the metrics of its instant.

        Raises ValueError (LakeSpecError) for a bad spec before anything runs, LakeJobConflict for a
        retryable commit conflict and LakeJobError with the tail of the Spark output otherwise.
        """
        payload = dict(spec)
        payload.setdefault("request_id", f"airflow-lake-{uuid.uuid4().hex}")
        validate(operation, payload)
        started = time.time()
        table = str(payload.get("table", ""))
        if not get(operation).needs_spark:  # metadata only: no reason to pay for a Spark start-up
            self.log.info("Running %s on %s in-process (request %s)", operation, table, payload["request_id"])
            result = run(None, operation, payload)
            stored = self.read_metrics(operation, table, payload["request_id"], started)
            # no entry (nothing to do, a dry run): what the run reported is all there is to say
            return {**result, **stored} if stored.get("noop") else stored
        with tempfile.TemporaryDirectory(prefix="airflow-lake-spec-") as tmp:
            spec_file = os.path.join(tmp, "spec.json")
            with open(spec_file, "w", encoding="utf-8") as handle:
                json.dump(payload, handle)
            self._submit_hook = self.build_submit_hook(operation, spec_file, f"airflow-lake {operation} {table}")
            self.log.info("Submitting %s on %s (request %s)", operation, table, payload["request_id"])
            self._running = (table, payload["request_id"])
            try:
                # own process group: on_kill can then stop the Python driver and workers too
                self._submit_hook.submit(application=ENTRY_POINT, start_new_session=True)
            except AirflowException as err:
                message = str(err)
                error_cls = LakeJobConflict if f"Error code is: {EXIT_CONFLICT}." in message else LakeJobError
                raise error_cls(f"lake operation {operation} on {table!r} failed. {message}") from err
            finally:
                self._running = None
        return self.read_metrics(operation, table, payload["request_id"], started)

    def read_metrics(self, operation: str, table: str, request_id: str, started: float = 0.0) -> dict[str, Any]:
        """The metrics stored in the instant recorded with `request_id` (an empty result for a no-op).

        `already_committed` tells that the instant completed before `started`: a retry found the
        first try's commit and wrote nothing.
        """
        lake = LakeTable.open(table)
        entry = lake.find_request(request_id, operation)
        if entry is None:
            if operation == "write":
                raise LakeJobError(f"spark-submit succeeded but no instant of request {request_id} is on {table!r}.")
            return entry_metrics(lake.url, operation, None, noop=True)
        return entry_metrics(lake.url, operation, entry, already_committed=entry.completed_at < started)

    def on_kill(self) -> None:
        """Kill the running spark-submit and everything it started, then roll back its pending instant."""
        hook, running = self._submit_hook, self._running  # read before the kill ends submit()
        if hook is None:
            return
        process = hook._submit_sp
        hook.on_kill()
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            process.wait(timeout=30)
        if running is not None and hook._connection.get("deploy_mode") != "cluster":
            # In client mode the driver was in that process group, so its instant is surely dead.
            self.rollback_request(*running)

    def rollback_request(self, table: str, request_id: str) -> list[str]:
        """Roll back the pending instants a (dead) job of `request_id` left on `table`."""
        try:
            lake = LakeTable.open(table)
        except LakeTableNotFound:
            return []
        ids = [p.id for p in pending(lake.storage) if p.request_id == request_id]
        if ids:
            lake.rollback_unchecked(ids, reason="task killed")
            self.log.info("Rolled back instant(s) %s of the killed job", ids)
        return ids
