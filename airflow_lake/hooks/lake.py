"""`LakeHook`: runs lake operations on Spark, through spark-submit or as a Spark Connect client.

The connection decides: a `spark` connection (master in its host: `local[2]`, `spark://host:7077`, yarn, k8s)
runs each operation as one spark-submit of the job runner; a `spark_connect` connection (`sc://host:15002`)
runs it in the task's own process on a remote session of a warm Spark Connect server. Both paths take the
result and the failure from the job itself (`airflow_lake.jobs.protocol`), so specs, metrics, request ids,
retries and error messages are the same.

What needs no Spark runs in the task's own process instead, whatever the connection: metadata-only operations, a
committed request's retry, and an upsert of small Parquet files (`in_process_max_bytes`; pyarrow writes the files
Spark would, `lake.upsert.arrow_upsert`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException

from airflow_lake.exceptions import LakeJobConflict, LakeJobError
from airflow_lake.hooks.defaults import DEFAULT_CONN_ID, DEFAULT_IN_PROCESS_MAX_BYTES
from airflow_lake.hooks.package_zip import package_zip
from airflow_lake.jobs import ENTRY_POINT
from airflow_lake.jobs.protocol import NONCE_ENV, Failure, classify
from airflow_lake.jobs.registry import get, validate
from airflow_lake.jvm import curve_jar
from airflow_lake.lake.errors import LakeError, LakeTableNotFound

if TYPE_CHECKING:  # the Spark provider's hook and the Connect client load when a task runs, not at DAG parse
    from airflow_lake.hooks.connect import ConnectClient
    from airflow_lake.hooks.submit import LakeSubmitHook

CONNECT_CONN_TYPE = "spark_connect"


class LakeHook(BaseHook):
    """Run a lake operation on the Spark of a connection (default `spark_default`).

    :param conn_id: a `spark` connection (spark-submit; master in its host, e.g. `local[2]` or
        `spark://host:7077`) or a `spark_connect` connection (Spark Connect client; `sc://host`, port 15002).
    :param spark_conf: extra `--conf` settings (over Spark Connect: runtime SQL settings only).
    :param python: Python for the driver and executors (PYSPARK_PYTHON); default this interpreter,
        None-string "" to leave it to the cluster.
    :param env_vars: extra environment for spark-submit.
    :param ship_package: send the airflow_lake package with `--py-files` (spark-submit) or as a session
        artifact (Spark Connect), for clusters without it.
    """

    conn_name_attr = "conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "spark"
    hook_name = "Airflow Lake"

    def __init__(self, conn_id: str = default_conn_name, *, spark_conf: Mapping[str, Any] | None = None,
                 python: str | None = None, env_vars: Mapping[str, str] | None = None,
                 driver_memory: str | None = None, executor_memory: str | None = None,
                 ship_package: bool = True, verbose: bool = False, in_process_max_bytes: int | None = None) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.spark_conf = dict(spark_conf or {})
        self.python = sys.executable if python is None else python
        self.env_vars = dict(env_vars or {})
        self.driver_memory = driver_memory
        self.executor_memory = executor_memory
        self.ship_package = ship_package
        self.verbose = verbose
        # an upsert of Parquet files up to this size runs with pyarrow in the task's process (0: always on Spark)
        self.in_process_max_bytes = DEFAULT_IN_PROCESS_MAX_BYTES if in_process_max_bytes is None else \
            int(in_process_max_bytes)
        # The job in flight, set only while `submit` runs it: on_kill kills nothing else.
        self._submit_hook: LakeSubmitHook | None = None
        self._connect: ConnectClient | None = None
        self._running: tuple[str, str] | None = None  # (table, request id) of the job in flight
        self._submitting = False
        self._kill_requested = False  # on_kill came during the current `submit`
        self._conn_type: str | None = None

    def get_conn(self) -> Any:
        """Not used: each operation opens its own spark-submit or Spark Connect session."""
        return None

    @property
    def uses_connect(self) -> bool:
        """Whether the connection is a Spark Connect one (else: spark-submit)."""
        if self._conn_type is None:
            self._conn_type = str(self.get_connection(self.conn_id).conn_type or "")
        return self._conn_type == CONNECT_CONN_TYPE

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

    def build_submit_hook(self, operation: str, spec_file: str, name: str, *,
                          nonce: str | None = None) -> LakeSubmitHook:
        """The SparkSubmitHook that runs `operation` with the spec in `spec_file`; the job's lines are
        trusted only with `nonce` (default: a new random one)."""
        from airflow_lake.hooks.submit import LakeSubmitHook

        nonce = nonce or secrets.token_hex(16)
        conf, jars = dict(self.spark_conf), None
        ours = curve_jar()  # clustering's curve words in the JVM (without it, in Python workers: the same words)
        if ours is not None:  # (beside the user's own jars: --jars and a spark.jars setting would replace each other)
            if conf.get("spark.jars"):
                conf["spark.jars"] = f"{conf['spark.jars']},{ours}"
            else:
                jars = str(ours)
        return LakeSubmitHook(
            conn_id=self.conn_id,
            conf=conf,
            jars=jars,
            py_files=package_zip() if self.ship_package else None,
            application_args=[operation, "--spec", f"@{spec_file}"],
            env_vars={**self._environment(), NONCE_ENV: nonce},
            driver_memory=self.driver_memory,
            executor_memory=self.executor_memory,
            name=name,
            verbose=self.verbose,
            nonce=nonce,
        )

    def submit(self, operation: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Validate `spec`, run `operation` (on Spark, or in this process when it needs none), return its metrics
        (those stored in its instant).

        Raises ValueError (LakeSpecError) for a bad spec before anything runs, LakeJobConflict for a
        retryable commit conflict and LakeJobError with the tail of the Spark output otherwise.
        """
        payload = dict(spec)
        payload.setdefault("request_id", f"airflow-lake-{uuid.uuid4().hex}")
        validate(operation, payload)
        table = str(payload.get("table", ""))
        op = get(operation)
        if not op.needs_spark:  # metadata only: no reason to pay for a Spark start-up
            self.log.info("Running %s on %s in-process (request %s)", operation, table, payload["request_id"])
            return self._run_local(operation, payload)
        if op.spark_free is not None and self.in_process_max_bytes > 0:
            done = self._run_spark_free(operation, payload)
            if done is not None:
                return done
        self._submitting, self._kill_requested = True, False
        try:
            if self.uses_connect:
                return self._run_connect(operation, payload)
            return self._run_submit(operation, payload)
        finally:
            self._submitting = False

    def _run_spark_free(self, operation: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Run an operation whose inputs need no Spark (a small upsert of Parquet files: `Operation.spark_free`) in
        this process; None when it needs Spark (logged: why), before anything was written."""
        from airflow_lake.jobs.registry import parse_spec
        from airflow_lake.lake.upsert.arrow_upsert import NeedsSpark  # the lake core: loaded when a task runs

        op = get(operation)
        assert op.spark_free is not None
        table = str(payload.get("table", ""))
        why = op.spark_free(parse_spec(op, payload), self.in_process_max_bytes)
        if why is None:
            self.log.info("Running %s on %s in-process, without Spark: the source is small Parquet files (request "
                          "%s)", operation, table, payload["request_id"])
            try:
                return self._run_local(operation, payload, spark_free=True)
            except NeedsSpark as err:
                why = str(err)
        self.log.info("%s on %s runs on Spark: %s (in-process limit: %d bytes)", operation, table, why,
                      self.in_process_max_bytes)
        return None

    def _run_local(self, operation: str, payload: dict[str, Any], *, spark_free: bool = False) -> dict[str, Any]:
        """An operation in this process (its lake errors raised as they are): a metadata-only one, or with
        `spark_free` one whose inputs need no Spark."""
        table, request_id = str(payload.get("table", "")), str(payload["request_id"])
        done_before = self._committed(operation, table, request_id)
        from airflow_lake.jobs.runner import run  # the lake core: loaded when a task runs, not at DAG parse

        result = run(None, operation, payload, spark_free=spark_free)
        stored = self.read_metrics(operation, table, request_id, already_committed=done_before)
        # no entry (nothing to do, a dry run, a plan stored but not committed): what the run reported is all there
        # is to say, and its own fields win over the placeholder's (a plan's `noop: false` must not turn true);
        # else the entry's metrics, with what the run added after its commit (where publishing stands)
        return {**stored, **result} if stored.get("noop") else {**stored, **{k: v for k, v in result.items()
                                                                             if k not in stored}}

    def _run_submit(self, operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        table, request_id = str(payload.get("table", "")), str(payload["request_id"])
        if (first := self._retry_result(operation, payload)) is not None:
            # what the job's result line would carry: its metrics as JSON (`protocol.result_line`)
            return dict(json.loads(json.dumps(first, default=str)))
        done_before = self._committed(operation, table, request_id)
        with tempfile.TemporaryDirectory(prefix="airflow-lake-spec-") as tmp:
            spec_file = os.path.join(tmp, "spec.json")
            with open(spec_file, "w", encoding="utf-8") as handle:
                json.dump(payload, handle)
            hook = self.build_submit_hook(operation, spec_file, f"airflow-lake {operation} {table}")
            self._submit_hook, self._running = hook, (table, request_id)
            try:
                if self._kill_requested:  # (on_kill saw no hook yet)
                    raise LakeJobError(f"lake operation {operation} on {table!r} was killed before it started.")
                self.log.info("Submitting %s on %s (request %s)", operation, table, request_id)
                # own session, so its own process group: on_kill can stop the Python driver and workers too
                hook.submit(application=ENTRY_POINT, start_new_session=True)
            except BaseException as err:
                if hook.running:  # we stop waiting (an execution timeout, say): the job must not go on alone
                    self._kill_submitted(hook, (table, request_id))
                if self._kill_requested and not isinstance(err, LakeJobError):
                    raise LakeJobError(f"lake operation {operation} on {table!r} was killed.") from err
                if isinstance(err, AirflowException) and not isinstance(err, LakeJobError):
                    raise _job_error(operation, table, hook.outcome.failure, str(err)) from err
                raise
            finally:
                self._submit_hook = self._running = None
        if hook.outcome.result is not None:
            return hook.outcome.result
        # cluster deploy mode: the driver's output is not ours to read; its instant says what it did
        from airflow_lake.publication import with_publication

        source = payload.get("source")
        incremental = isinstance(source, Mapping) and bool(source.get("incremental"))
        return with_publication(self.read_metrics(operation, table, request_id, already_committed=done_before,
                                                  commits=not incremental))

    def _run_connect(self, operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from airflow_lake.hooks.connect import ConnectClient, TaskKilled

        table, request_id = str(payload.get("table", "")), str(payload["request_id"])
        if self.driver_memory or self.executor_memory:
            raise LakeJobError("driver_memory and executor_memory cannot be set per task over Spark Connect: "
                               "the server's Spark owns them (set them when starting the server).")
        client = ConnectClient(SparkConnectHook(self.conn_id).get_connection_url(), self.spark_conf,
                               ship_package=self.ship_package)
        if (first := self._retry_result(operation, payload)) is not None:
            return first
        self._connect, self._running = client, (table, request_id)
        self.log.info("Running %s on %s over Spark Connect (request %s)", operation, table, request_id)
        try:
            if self._kill_requested:  # (on_kill saw no client yet)
                raise TaskKilled("the task was killed")
            from airflow_lake.jobs.runner import run

            return run(client.open(), operation, payload)
        except BaseException as err:
            if client.killed or self._kill_requested:
                rolled = self.rollback_request(table, request_id)
                raise LakeJobError(f"lake operation {operation} on {table!r} was killed"
                                   + (f"; rolled back instant(s) {rolled}." if rolled else ".")) from err
            if isinstance(err, LakeJobError) or not isinstance(err, Exception):
                raise
            raise _job_error(operation, table, classify(err), _exception_tail(err)) from err
        finally:
            self._connect = self._running = None  # before closing: a kill from here on finds nothing to kill
            client.close()

    def _retry_result(self, operation: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The result of a request that has already committed (an Airflow retry), read from the log in this process
        before any Spark starts: a spark-submit (or a Connect session) would start only to learn the same. None:
        the job runs (its request did not complete, or the check failed here: the job says why in its own words)."""
        from airflow_lake.jobs.runner import committed_result  # the lake core: loaded when a task runs

        try:
            first = committed_result(operation, payload)
        except Exception as err:  # e.g. a reused request id: the job refuses it with its usual message and exit code
            self.log.debug("the retry check of %s in the task's process failed (%s): the job runs", operation, err)
            return None
        if first is not None:
            self.log.info("%s on %s: request %s already committed as instant %s; its result is returned without "
                          "starting Spark", operation, payload.get("table"), payload["request_id"],
                          first.get("instant"))
        return first

    def _committed(self, operation: str, table: str, request_id: str) -> str | None:
        """The instant of `request_id` that completed before this run (a retry of a committed task), if any."""
        from airflow_lake.lake.commit import requests
        from airflow_lake.lake.table import LakeTable

        try:
            entry = requests.committed(LakeTable.open(table), requests.Request(operation, request_id))
        except LakeError:  # no table yet, or an id of another operation: the job itself says what is wrong
            return None
        return None if entry is None else entry.instant

    def read_metrics(self, operation: str, table: str, request_id: str, *,
                     already_committed: bool | str | None = False, commits: bool = True) -> dict[str, Any]:
        """The metrics stored in the instant recorded with `request_id` (an empty result for a no-op).

        `already_committed`: the flag to report, or the instant the request had committed before this run (then
        the flag says whether the recorded instant is still that one: an overwrite whose lake inputs changed runs
        again under the same id, `commit.requests`). `commits=False`: a write that may commit nothing (an
        incremental one whose upstreams had nothing new), so no instant is no error."""
        from airflow_lake.lake.commit import requests
        from airflow_lake.lake.table import LakeTable

        lake = LakeTable.open(table)
        entry = requests.committed(lake, requests.Request(operation, request_id))
        before = already_committed if isinstance(already_committed, bool) else \
            already_committed is not None and entry is not None and entry.instant == already_committed
        stored = None if entry is None else requests.result(lake.url, operation, entry, already_committed=before)
        if stored is None and operation == "write" and commits:
            raise LakeJobError(f"spark-submit succeeded but no instant of request {request_id} is on {table!r}.")
        return requests.result(lake.url, operation, None, noop=True) if stored is None else stored

    def on_kill(self) -> None:
        """Stop the operation this hook is running, if any, then roll back its pending instant. A job that
        has ended is not touched (its process group id may name another process by now).

        spark-submit: kill spark-submit's process group, which holds the driver in client mode (or, if it
        is still starting, as soon as it starts). Spark Connect: interrupt the session, also while it is
        being opened; the operation unwinds before it commits and is rolled back.
        """
        if self._submitting:
            self._kill_requested = True  # for a job this `submit` has not started yet
        client, hook, running = self._connect, self._submit_hook, self._running  # read before the kill ends it
        if client is not None:
            client.interrupt()  # in the operation's own thread: raises TaskKilled, rolled back as it unwinds
            if running is not None:
                # Another thread: the rollback entry is in the log before the operation could commit, so
                # its commit fails (LakeInstantRolledBack) even if it is past its last Spark call.
                self.rollback_request(*running)
        elif hook is not None and running is not None:
            self._kill_submitted(hook, running)

    def _kill_submitted(self, hook: LakeSubmitHook, running: tuple[str, str]) -> None:
        if hook.kill_job():
            # The driver was in the killed group: it runs no further step, so its instant is surely dead.
            self.rollback_request(*running)

    def rollback_request(self, table: str, request_id: str) -> list[str]:
        """Roll back the pending instants a (dead) job of `request_id` left on `table`."""
        from airflow_lake.lake.format.instants import pending
        from airflow_lake.lake.table import LakeTable

        try:
            lake = LakeTable.open(table)
        except LakeTableNotFound:
            return []
        ids = [p.id for p in pending(lake.storage) if p.request_id == request_id]
        if ids:
            lake.rollback_unchecked(ids, reason="task killed")
            self.log.info("Rolled back instant(s) %s of the killed job", ids)
        return ids


def _job_error(operation: str, table: str, failure: Failure | None, tail: str = "") -> LakeJobError:
    """The error of a failed job: retryable (LakeJobConflict) if the job said so, with what it said."""
    said = f": {failure.human_line()}" if failure is not None else "."
    error_cls = LakeJobConflict if failure is not None and failure.retryable else LakeJobError
    return error_cls(f"lake operation {operation} on {table!r} failed{said}" + (f" {tail}" if tail else ""))


def _exception_tail(err: BaseException, lines: int = 40) -> str:
    """The end of a Spark Connect error (the server's message, and its stack when it sent one)."""
    text = str(err).strip().splitlines()
    return "\nLast Spark Connect output:\n" + "\n".join(text[-lines:]) if len(text) > 1 else ""
