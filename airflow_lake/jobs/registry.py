"""The operations the runner knows. Adding one is one module in `jobs/ops/` and one `register` call."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.jobs import caller
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.operation_names import current_name
from airflow_lake.lake.spec.strict import check_depth

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Metrics = dict[str, Any]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Operation:
    """An operation: `parse` validates a spec without Spark; `execute` runs it and returns metrics.

    `retry_result` (operations that need Spark): what `execute` returns for a parsed spec whose request has already
    committed (an Airflow retry), read from the log alone with no Spark; None when `execute` has to run. It is the
    same check `execute` makes before its Spark work, so the hook can answer a retry without starting Spark.

    `spark_free`: see its comment (a small upsert of Parquet files runs with pyarrow in the task's process)."""

    name: str
    parse: Callable[[Mapping[str, Any]], Any]
    execute: Callable[[SparkSession | None, Any], Metrics]
    needs_spark: bool = True
    summary: str = ""
    retry_result: Callable[[Any], Metrics | None] | None = None
    # operations that need Spark only for some inputs: why a parsed spec needs it, given the most source bytes the
    # caller will process itself (None: `execute(None, spec)` runs it without Spark, or raises `NeedsSpark` before
    # it writes anything)
    spark_free: Callable[[Any, int], str | None] | None = None


_OPERATIONS: dict[str, Operation] = {}


def register(operation: Operation) -> Operation:
    """Make an operation reachable by name."""
    _OPERATIONS[operation.name] = operation
    return operation


def operations() -> dict[str, Operation]:
    """All registered operations by name."""
    from airflow_lake.jobs import ops  # noqa: F401  (registers the built-in operations)

    return dict(_OPERATIONS)


def get(name: str) -> Operation:
    """The operation called `name` (or an old name of it: a deprecation warning is logged), or a spec error
    listing the known ones."""
    known = operations()
    current = current_name(name)
    if current not in known:
        raise LakeSpecError("operation", f"unknown operation {name!r}.", f"Use one of {', '.join(sorted(known))}.")
    if current != name:
        # specs and DAGs written before the rename keep working; the log entry records the new name
        log.warning("operation %r is deprecated: it is called %r now and runs as that (its log entry records "
                    "%r). Rename it in your spec or DAG.", name, current, current)
    return known[current]


def parse_spec(operation: Operation, spec: Mapping[str, Any]) -> Any:
    """`operation.parse` of `spec` without its `airflow` field, which is checked here (`jobs.caller`): who asked is
    the same field for every operation and no input of the request."""
    check_depth(spec, "spec")
    body, _ = caller.split(spec)
    return operation.parse(body)


def validate(name: str, spec: Mapping[str, Any]) -> Any:
    """Parse and validate a spec for an operation, without Spark."""
    return parse_spec(get(name), spec)
