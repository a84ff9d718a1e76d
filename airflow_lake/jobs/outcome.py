"""What a job tells whoever runs it, the same way on every path.

A spark-submit job prints two machine-readable lines that its runner (`LakeHook`) reads back from the
spark-submit output: `AIRFLOW_LAKE_STARTED {"pid", "pgid"}` when it starts, and at the end
`AIRFLOW_LAKE_RESULT <metrics>` or `AIRFLOW_LAKE_FAILED {"exit_code", "error", "message"}` followed by one
human line. An in-process run (Spark Connect) classifies its exception with the same `classify`, so both
paths give the same exit codes and messages.

That output also carries whatever Spark prints, and Spark echoes data (a value that failed a cast, a row in
an error message): a string column can hold a line that looks like ours. So a runner gives each run a
random nonce (`NONCE_ENV`); the job ends each of its lines with it, and an `Outcome` made with the nonce
trusts only lines that end with it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSchemaError, LakeSpecError

STARTED_PREFIX = "AIRFLOW_LAKE_STARTED "
RESULT_PREFIX = "AIRFLOW_LAKE_RESULT "
FAILED_PREFIX = "AIRFLOW_LAKE_FAILED "
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CONFLICT = 1, 2, 3
NONCE_ENV = "AIRFLOW_LAKE_RUN_NONCE"
_NONCE = re.compile(r"[0-9A-Za-z_-]{16,128}")


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

    def machine_line(self, nonce: str | None = None) -> str:
        return signed(FAILED_PREFIX + json.dumps({"exit_code": self.exit_code, "error": self.error,
                                                  "message": self.message}), nonce)


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


def job_nonce() -> str | None:
    """The nonce the runner gave this job (None when run by hand, or when the value is not one of ours)."""
    value = os.environ.get(NONCE_ENV, "")
    return value if _NONCE.fullmatch(value) else None


def signed(line: str, nonce: str | None) -> str:
    """`line` as the job prints it: ending with the run's nonce, if it has one."""
    return f"{line} {nonce}" if nonce else line


def started_line(nonce: str | None = None) -> str:
    """The line a job prints first: its pid and process group."""
    return signed(STARTED_PREFIX + json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0)}), nonce)


def result_line(metrics: dict[str, Any], nonce: str | None = None) -> str:
    return signed(RESULT_PREFIX + json.dumps(metrics, default=str), nonce)


@dataclass
class Outcome:
    """What a runner read from a job's output lines.

    :param nonce: the run's nonce: only lines ending with it are the job's (None: a job run without one,
        by hand or in a test, whose lines carry none).
    """

    nonce: str | None = field(default=None, repr=False)
    started: dict[str, int] | None = None
    result: dict[str, Any] | None = None
    failure: Failure | None = None

    def feed(self, line: str) -> str:
        """Take in one output line (lines that are not the job's own are ignored); returns the line to log:
        the job's own lines without the nonce, which stays out of task logs."""
        text = line.strip()
        if self.nonce is not None:
            if not text.endswith(" " + self.nonce):
                return line
            text = text[:-len(self.nonce) - 1]
        try:
            if text.startswith(STARTED_PREFIX):
                started = json.loads(text[len(STARTED_PREFIX):])
                self.started = {"pid": int(started["pid"]), "pgid": int(started["pgid"])}
            elif text.startswith(RESULT_PREFIX):
                self.result = dict(json.loads(text[len(RESULT_PREFIX):]))
            elif text.startswith(FAILED_PREFIX):
                failed = json.loads(text[len(FAILED_PREFIX):])
                self.failure = Failure(int(failed["exit_code"]), str(failed["error"]), str(failed["message"]))
            else:
                return line
        except (ValueError, KeyError, TypeError):
            return line  # a line cut or garbled on its way: not the job's word
        return text + "\n" if line.endswith("\n") else text


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
