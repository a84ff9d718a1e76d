"""The job's output-line protocol: what a job prints so whoever runs it learns its outcome, and how it is read.

A job run by spark-submit (or `python -m airflow_lake.jobs`) prints `AIRFLOW_LAKE_STARTED {"pid", "pgid"}`
first, on stdout; at the end `AIRFLOW_LAKE_RESULT <metrics JSON>` on stdout, or, on stderr,
`AIRFLOW_LAKE_FAILED {"exit_code", "error", "message"}` then one human line (`airflow-lake: <Error>:
<message>`), last. The exit code says how it failed: 2 bad spec or data (fix and rerun), 3 commit conflict
(retry), 1 anything else. `write_started` and `Ending` print them (the job's command line); `Outcome`
reads them back (`LakeSubmitHook`, from spark-submit's output). A Spark Connect run has no lines: it runs
in-process and classifies its exception with the same `classify`, so both paths give the same exit codes
and messages.

That output also carries whatever Spark prints, and Spark echoes data (a value that failed a cast, a row in
an error message): a string column can hold a line that looks like ours. So a runner gives each run a
random nonce (`NONCE_ENV`); the job ends each of its lines with it, and an `Outcome` made with the nonce
trusts only lines that end with it.

Pure Python on purpose: the hook imports this module at DAG parse time, so it loads neither pyspark nor the
lake core (whose errors `classify` imports when it is called, in a job that has them loaded anyway).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

STARTED_PREFIX = "AIRFLOW_LAKE_STARTED "
RESULT_PREFIX = "AIRFLOW_LAKE_RESULT "
FAILED_PREFIX = "AIRFLOW_LAKE_FAILED "
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CONFLICT = 0, 1, 2, 3
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
    from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSchemaError, LakeSpecError

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
    """The line a job prints last when it succeeded: its metrics (values JSON cannot hold as text)."""
    return signed(RESULT_PREFIX + json.dumps(metrics, default=str), nonce)


def write_started(nonce: str | None = None) -> None:
    """Print the job's first line, before anything can fail."""
    print(started_line(nonce), flush=True)


@dataclass(frozen=True)
class Ending:
    """A job's last lines and exit code: made while the job can still report a failure to make them (metrics
    JSON cannot hold), printed once Spark has stopped, so nothing Spark logs on its way out follows them."""

    exit_code: int
    lines: tuple[str, ...]

    @classmethod
    def of(cls, end: dict[str, Any] | Failure, nonce: str | None = None) -> Ending:
        """The ending of a job that returned these metrics, or failed so."""
        if isinstance(end, Failure):
            return cls(end.exit_code, (end.machine_line(nonce), end.human_line()))
        return cls(EXIT_OK, (result_line(end, nonce),))

    def write(self) -> int:
        """Print the lines, the metrics on stdout or the failure on stderr (its human line last, what a log
        reader sees at the end); returns the exit code."""
        stream = sys.stdout if self.exit_code == EXIT_OK else sys.stderr
        for line in self.lines:
            print(line, file=stream, flush=True)
        return self.exit_code


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

    def watch(self, lines: Iterable[Any]) -> Iterator[str]:
        """Feed each line as it streams by, yielding it as it should be logged."""
        for line in lines:
            yield self.feed(str(line))


def read_outcome(lines: Iterable[Any], nonce: str | None = None) -> Outcome:
    """The outcome told by a job's whole output (lines of it, in order)."""
    outcome = Outcome(nonce)
    for _ in outcome.watch(lines):
        pass
    return outcome


def _is_query_error(err: BaseException) -> bool:
    """Spark refused the user's SQL (unknown table or column, a syntax error): a user error, exit 2."""
    try:
        from pyspark.errors import AnalysisException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    return isinstance(err, AnalysisException)


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (its repr when it has none)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)
