"""The job's word to its runner: how failures are classified, how the lines are written and read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date

import pytest

from airflow_lake.exceptions import LakeJobConflict, LakeJobError
from airflow_lake.hooks.lake import _job_error
from airflow_lake.hooks.submit import LakeSubmitHook
from airflow_lake.jobs.protocol import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_OK,
    Ending,
    Failure,
    Outcome,
    classify,
    read_outcome,
    result_line,
    started_line,
    write_started,
)
from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSchemaError, LakeSpecError


def test_failures_are_classified_by_what_the_user_can_do() -> None:
    assert classify(LakeSpecError("mode", "bad.", "Fix it.")).exit_code == EXIT_BAD_INPUT
    assert classify(LakeSchemaError("schema mismatch")).exit_code == EXIT_BAD_INPUT
    conflict = classify(LakeCommitConflict("another writer replaced dt=a"))
    assert (conflict.exit_code, conflict.retryable, conflict.error) == (EXIT_CONFLICT, True, "LakeCommitConflict")
    assert conflict.human_line() == "airflow-lake: LakeCommitConflict (retryable): another writer replaced dt=a"
    assert classify(LakeError("damaged")).exit_code == EXIT_FAILED
    other = classify(RuntimeError("first\nsecond"))
    assert (other.exit_code, other.message) == (EXIT_FAILED, "first")


def test_the_runner_reads_the_job_lines_and_ignores_the_rest() -> None:
    outcome = Outcome()
    failure = Failure(EXIT_CONFLICT, "LakeCommitConflict", "lost the race")
    for line in ["INFO spark started", 'AIRFLOW_LAKE_STARTED {"pid": 12, "pgid": 10}', "AIRFLOW_LAKE_RESULT {broken",
                 failure.machine_line(), failure.human_line()]:
        outcome.feed(line + "\n")
    assert outcome.started == {"pid": 12, "pgid": 10} and outcome.result is None and outcome.failure == failure
    outcome.feed("AIRFLOW_LAKE_RESULT " + json.dumps({"rows_added": 3}))
    assert outcome.result == {"rows_added": 3}


def test_the_submit_hook_collects_the_lines_it_logs() -> None:
    hook = LakeSubmitHook(conn_id="spark_default")
    hook._process_spark_submit_log(iter(['AIRFLOW_LAKE_STARTED {"pid": 5, "pgid": 5}\n', "some log\n",
                                         'AIRFLOW_LAKE_RESULT {"seq": 4}\n']))
    assert hook.outcome.started == {"pid": 5, "pgid": 5} and hook.outcome.result == {"seq": 4}


def test_a_conflict_is_retryable_and_other_failures_are_not() -> None:
    conflict = _job_error("write", "/t", Failure(EXIT_CONFLICT, "LakeCommitConflict", "lost"), "tail")
    assert isinstance(conflict, LakeJobConflict) and str(conflict) == (
        "lake operation write on '/t' failed: airflow-lake: LakeCommitConflict (retryable): lost tail")
    bad = _job_error("write", "/t", Failure(EXIT_BAD_INPUT, "LakeSchemaError", "mismatch"))
    assert type(bad) is LakeJobError
    unknown = _job_error("write", "/t", None, "Cannot execute: spark-submit ... Error code is: 137.")
    assert type(unknown) is LakeJobError and str(unknown).startswith("lake operation write on '/t' failed. Cannot")


def test_with_a_nonce_only_the_lines_ending_with_it_are_the_jobs() -> None:
    nonce = "0123456789abcdef0123456789abcdef"
    outcome = Outcome(nonce)
    conflict = Failure(EXIT_CONFLICT, "LakeCommitConflict", "forged")
    real = Failure(EXIT_FAILED, "SparkNumberFormatException", "[CAST_INVALID_INPUT] The value 'x")
    logged = [outcome.feed(line + "\n") for line in [
        started_line(nonce),
        # a data value echoed by Spark: lines shaped like the job's, without the nonce or with another one
        'AIRFLOW_LAKE_STARTED {"pid": 1, "pgid": 1}', 'AIRFLOW_LAKE_STARTED {"pid": 1, "pgid": 1} ' + "f" * 32,
        conflict.machine_line(), 'AIRFLOW_LAKE_RESULT {"rows_added": 1000000}',
        real.machine_line(nonce), real.human_line(),
        'AIRFLOW_LAKE_FAILED {"exit_code": 3, "error": "LakeCommitConflict", "message": "forged"} ' + nonce[:-1],
    ]]
    assert outcome.started == {"pid": os.getpid(), "pgid": os.getpgid(0)}
    assert outcome.failure == real and outcome.result is None
    assert nonce not in "".join(logged)  # the task log shows the job's lines without it
    assert logged[0] == started_line() + "\n" and logged[5] == real.machine_line() + "\n"
    outcome.feed(result_line({"rows_added": 3}, nonce))
    assert outcome.result == {"rows_added": 3}
    # a job run without a nonce (by hand) is read by an Outcome without one, and only by it
    by_hand, runner = Outcome(), Outcome(nonce)
    for each in (by_hand, runner):
        each.feed(result_line({"seq": 1}))
    assert (by_hand.result, runner.result) == ({"seq": 1}, None)


def test_the_submit_hook_trusts_only_its_runs_nonce() -> None:
    nonce = "a" * 32
    hook = LakeSubmitHook(conn_id="spark_default", nonce=nonce)
    hook._process_spark_submit_log(iter(['AIRFLOW_LAKE_STARTED {"pid": 5, "pgid": 5}\n',
                                         f'AIRFLOW_LAKE_STARTED {{"pid": 6, "pgid": 6}} {nonce}\n',
                                         'AIRFLOW_LAKE_RESULT {"seq": 99}\n',
                                         f'AIRFLOW_LAKE_RESULT {{"seq": 4}} {nonce}\n']))
    assert hook.outcome.started == {"pid": 6, "pgid": 6} and hook.outcome.result == {"seq": 4}
    assert not hook.running and hook.kill_job() is False  # its output ended: nothing of it is ours to kill


@pytest.mark.parametrize("nonce", [None, "0123456789abcdef0123456789abcdef"])
def test_what_the_job_writes_its_runner_reads_back(nonce: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    write_started(nonce)
    assert Ending.of({"rows_added": 3, "dt": date(2026, 1, 2)}, nonce).write() == EXIT_OK
    done = capsys.readouterr()
    assert done.err == ""
    ok = read_outcome(done.out.splitlines(keepends=True), nonce)
    assert ok.started == {"pid": os.getpid(), "pgid": os.getpgid(0)} and ok.failure is None
    assert ok.result == {"rows_added": 3, "dt": "2026-01-02"}  # what JSON cannot hold arrives as text
    failure = Failure(EXIT_CONFLICT, "LakeCommitConflict", 'another writer replaced "dt=a"')
    assert Ending.of(failure, nonce).write() == EXIT_CONFLICT
    done = capsys.readouterr()
    assert done.out == "" and done.err.splitlines()[-1] == failure.human_line()  # what a log shows last
    failed = read_outcome(done.err.splitlines(), nonce)
    assert (failed.failure, failed.result, failed.started) == (failure, None, None)
    if nonce is not None:  # another run's reader believes none of it
        assert read_outcome(done.err.splitlines(), "f" * 32) == Outcome("f" * 32)


def test_the_protocol_loads_neither_spark_nor_the_lake() -> None:
    """The hook imports it at DAG parse time."""
    probe = ("import sys, airflow_lake.jobs.protocol; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pyspark', 'py4j', 'pyarrow', 'numpy', 'pandas', 'airflow') or m.startswith('airflow_lake.lake')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
