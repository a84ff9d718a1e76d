"""The job's word to its runner: how failures are classified and how the lines are read back."""

from __future__ import annotations

import json

from airflow_lake.exceptions import LakeJobConflict, LakeJobError
from airflow_lake.hooks.lake import _job_error
from airflow_lake.hooks.submit import LakeSubmitHook
from airflow_lake.jobs.outcome import EXIT_BAD_INPUT, EXIT_CONFLICT, EXIT_FAILED, Failure, Outcome, classify
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
