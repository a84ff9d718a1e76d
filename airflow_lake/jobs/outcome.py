"""What a job tells whoever runs it, the same way on every path.

A spark-submit job prints two machine-readable lines that its runner (`LakeHook`) reads back from the
spark-submit output: `AIRFLOW_LAKE_STARTED {"pid", "pgid"}` when it starts (the process group to kill),
and at the end `AIRFLOW_LAKE_RESULT <metrics>` or `AIRFLOW_LAKE_FAILED {"exit_code", "error", "message"}`
followed by one human line. An in-process run (Spark Connect) classifies its exception with the same
`classify`, so both paths give the same exit codes and messages.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSchemaError, LakeSpecError

STARTED_PREFIX = "AIRFLOW_LAKE_STARTED "
RESULT_PREFIX = "AIRFLOW_LAKE_RESULT "
FAILED_PREFIX = "AIRFLOW_LAKE_FAILED "
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CONFLICT = 1, 2, 3


@dataclass(frozen=True)
class Failure:
    """How a job failed: exit code (2 bad spec or data: fix and rerun, 3 commit conflict: retry, 1 other),
    the exception's class name and its message (first line for errors not raised by the lake)."""

    exit_code: int
    error: str
    message: str

    @property
    def retryable(self) -> bool:
        return self.exit_code == EXIT_CONFLICT

    def human_line(self) -> str:
        return f"airflow-lake: {self.error}{' (retryable)' if self.retryable else ''}: {self.message}"

    def machine_line(self) -> str:
        return FAILED_PREFIX + json.dumps({"exit_code": self.exit_code, "error": self.error,
                                           "message": self.message})


def classify(err: BaseException) -> Failure:
    """The failure an exception of an operation means."""
    name = type(err).__name__
    if isinstance(err, (LakeSpecError, LakeSchemaError)):
        return Failure(EXIT_BAD_INPUT, name, str(err))
    if isinstance(err, LakeCommitConflict):
        return Failure(EXIT_CONFLICT, name, str(err))
    if isinstance(err, LakeError):
        return Failure(EXIT_FAILED, name, str(err))
    return Failure(EXIT_BAD_INPUT if _is_query_error(err) else EXIT_FAILED, name, first_line(err))


def started_line() -> str:
    """The line a job prints first: its pid and process group (client mode: what to kill)."""
    return STARTED_PREFIX + json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0)})


def result_line(metrics: dict[str, Any]) -> str:
    return RESULT_PREFIX + json.dumps(metrics, default=str)


@dataclass
class Outcome:
    """What a runner read from a job's output lines."""

    started: dict[str, int] | None = None
    result: dict[str, Any] | None = None
    failure: Failure | None = None

    def feed(self, line: str) -> None:
        """Take in one output line (lines that are not the job's own are ignored)."""
        text = line.strip()
        try:
            if text.startswith(STARTED_PREFIX):
                started = json.loads(text[len(STARTED_PREFIX):])
                self.started = {"pid": int(started["pid"]), "pgid": int(started["pgid"])}
            elif text.startswith(RESULT_PREFIX):
                self.result = dict(json.loads(text[len(RESULT_PREFIX):]))
            elif text.startswith(FAILED_PREFIX):
                failed = json.loads(text[len(FAILED_PREFIX):])
                self.failure = Failure(int(failed["exit_code"]), str(failed["error"]), str(failed["message"]))
        except (ValueError, KeyError, TypeError):
            return  # a line cut or garbled on its way: not the job's word


def _is_query_error(err: BaseException) -> bool:
    """Spark refused the user's SQL (unknown table or column, a syntax error): a user error, exit 2."""
    try:
        from pyspark.errors import AnalysisException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    return isinstance(err, AnalysisException)


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)
