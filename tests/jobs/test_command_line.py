"""The runner's command line: whatever fails, the last line says what, and the exit code says how."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs.protocol import read_outcome
from airflow_lake.lake import LakeTable
from tests.support import parquet_files_on_disk

pytestmark = pytest.mark.slow


def job(operation: str, spec: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "airflow_lake.jobs", operation, "--spec", json.dumps(spec)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False,
                          env={**os.environ, "AIRFLOW_LAKE_SPARK_MASTER": "local[1]"})


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    """The last line of the output, stdout and stderr interleaved as a log reader sees them."""
    return [line for line in (done.stdout + (done.stderr or "")).splitlines() if line.strip()][-1]


def test_after_spark_started_the_last_line_still_says_what_went_wrong(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"idx": [1], "dt": ["a"]}), wrong)
    done = job("write", {"table": table, "source": {"path": str(wrong)}})
    assert done.returncode == 2
    assert last_line(done).startswith("airflow-lake: LakeSchemaError: schema mismatch"), done.stdout[-2000:]
    outcome = read_outcome(done.stdout.splitlines())
    assert outcome.started is not None and outcome.started["pid"] > 0 and outcome.result is None
    assert outcome.failure is not None and (outcome.failure.exit_code, outcome.failure.error) == (2, "LakeSchemaError")
    # a query Spark cannot analyse is the user's error too: exit 2, one line last
    done = job("write", {"table": table, "source": {"query": "SELECT * FROM no_such_table"}})
    assert done.returncode == 2, done.stdout[-2000:]
    assert last_line(done).startswith("airflow-lake: ") and "no_such_table" in last_line(done)
    assert LakeTable.open(table).commit_log.head() <= 2 and LakeTable.open(table).snapshot().files == ()
    assert parquet_files_on_disk(table) == set()
    ok = tmp_path / "ok.parquet"
    pq.write_table(pa.table({"id": [1], "dt": ["a"]}), ok)
    done = job("write", {"table": table, "source": {"path": str(ok)}})
    assert done.returncode == 0 and last_line(done).startswith("AIRFLOW_LAKE_RESULT ")


def test_a_spec_nested_too_deeply_is_one_clear_line(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    done = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "write", "--spec", f"@{tmp_path / 's.json'}"],
                          capture_output=True, text=True, timeout=120, check=False,
                          input=None) if (tmp_path / "s.json").write_text(deep) else None
    assert done is not None and done.returncode == 2
    assert last_line(done) == ("airflow-lake: LakeSpecError: --spec: the JSON is nested too deeply to read. "
                               "Fix: Pass a spec as the operation documents it (docs/specs.md).")
    assert "Traceback" not in done.stderr + done.stdout


def test_given_a_nonce_the_job_ends_its_lines_with_it(tmp_path: Path) -> None:
    nonce = "5f" * 16
    done = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "create_table", "--spec",
                           json.dumps({"table": str(tmp_path / "t"), "schema": "id BIGINT"})],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "AIRFLOW_LAKE_RUN_NONCE": nonce})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("AIRFLOW_LAKE_STARTED {") and lines[0].endswith(" " + nonce)
    assert lines[-1].startswith("AIRFLOW_LAKE_RESULT {") and lines[-1].endswith(" " + nonce)
    outcome = read_outcome(lines, nonce)
    assert outcome.started is not None and outcome.result is not None and outcome.result["created"] is True
    done = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "create_table", "--spec", "{}"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "AIRFLOW_LAKE_RUN_NONCE": nonce})
    failed = read_outcome((done.stdout + done.stderr).splitlines(), nonce)
    assert done.returncode == 2 and failed.failure is not None and failed.failure.exit_code == 2
