"""Running one operation: validate its spec, then execute it with a SparkSession if it needs one."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.jobs import caller, registry
from airflow_lake.jobs.noop import NothingToDo
from airflow_lake.lake.spark.bucketed_read import drop_read_tables, read_tables_mark
from airflow_lake.lake.spec.strict import check_depth
from airflow_lake.publication import with_publication

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def run(spark: SparkSession | None, operation: str, spec: Mapping[str, Any], *,
        spark_free: bool = False) -> dict[str, Any]:
    """Run `operation` with `spec` in this process and return its metrics (also stored in its instant), with where
    publishing for other engines stands after it (`publication.with_publication`: `published_seq`,
    `unpublished_commits`, for a primary-key table `hidden_files`...; not stored in the instant: it changes after).

    The spec's optional `airflow` field (the task instance that asked, `jobs.caller`) is recorded in the metadata
    of every log entry the operation writes.

    `spark_free`: run an operation that needs Spark for some inputs without it (`Operation.spark_free` said it
    can); it raises `NeedsSpark` before writing anything if it cannot after all."""
    op = registry.get(operation)
    check_depth(spec, "spec")  # before anything walks it recursively (a RecursionError names nothing)
    body, who = caller.split(spec)
    parsed = op.parse(body)
    if isinstance(parsed, NothingToDo):  # an empty selection: nothing to run, no Spark to start
        log.info("%s on %s: %s", operation, spec.get("table"), parsed.reason)
        return parsed.run()
    if op.needs_spark and spark is None and not spark_free:
        from airflow_lake.jobs.session import build_session

        spark = build_session(f"airflow-lake {operation}")
    started = time.monotonic()
    log.info("running %s on %s", operation, spec.get("table"))
    mark = read_tables_mark()
    try:
        with caller.recorded(who):  # every entry the operation writes, whichever way it commits
            metrics = op.execute(spark, parsed)
    finally:
        if spark is not None:  # a warm (Spark Connect) session must not keep a catalog table per read
            drop_read_tables(spark, since=mark)
    # here, once, for every path that runs an operation (spark-submit's result line, Spark Connect, in-process)
    metrics = with_publication(metrics)
    log.info("%s finished in %.1f s: %s", operation, time.monotonic() - started, metrics)
    return metrics


def committed_result(operation: str, spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """What `run` returns for a request that has already committed (an Airflow retry), read from the log alone in
    this process, with no Spark: the operation's own retry check (`Operation.retry_result`), so a reused request id
    with other inputs, or a rebuild whose lake inputs changed, is not taken for a retry. None when the operation has
    to run: its request never completed (none, pending or rolled back), or it selects nothing (`NothingToDo`).
    Raises what the operation would raise before its Spark work."""
    op = registry.get(operation)
    check_depth(spec, "spec")
    body, who = caller.split(spec)
    parsed = op.parse(body)
    if isinstance(parsed, NothingToDo) or op.retry_result is None:
        return None
    with caller.recorded(who):  # (a retry writes nothing; what it tidies of a dead first try is recorded as run's)
        first = op.retry_result(parsed)
    return None if first is None else with_publication(first)
