"""Helpers for tests: source files, spark-submit processes, reading tables back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.jobs import ENTRY_POINT
from airflow_lake.lake import LakeTable

SPARK_SUBMIT = str(Path(sys.executable).with_name("spark-submit"))
FAST_HEARTBEAT = {"heartbeat.interval.seconds": "0.5", "heartbeat.timeout.seconds": "3"}


def write_source(path: Path, ids: Sequence[int], dt: str | Sequence[str], value: float = 1.0) -> str:
    """A Parquet source file with columns id, dt, v."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dts = [dt] * len(ids) if isinstance(dt, str) else list(dt)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "dt": dts, "v": [value * i for i in ids]}), path)
    return str(path)


def submit_command(operation: str, spec: Mapping[str, Any], master: str = "local[2]", *,
                   extra: Sequence[str] = ()) -> list[str]:
    """The spark-submit command line of the runner (`extra`: more spark-submit arguments, e.g. --jars, --conf)."""
    return app_command(ENTRY_POINT, [operation, "--spec", json.dumps(spec)], master, extra=extra)


def app_command(application: str, args: Sequence[str], master: str = "local[2]", *,
                extra: Sequence[str] = ()) -> list[str]:
    """The spark-submit command line of a Python application, with the tests' Spark settings."""
    return [SPARK_SUBMIT, "--master", master, "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.shuffle.partitions=4", *extra, application, *args]


def start_submit(operation: str, spec: Mapping[str, Any], env: Mapping[str, str] | None = None,
                 master: str = "local[2]", log: Path | None = None, *,
                 extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Start the runner under spark-submit in its own process group (so a test can kill all of it)."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115  (closed with the process)
    return subprocess.Popen(submit_command(operation, spec, master, extra=extra), env={**os.environ, **(env or {})},
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_file(path: Path, proc: subprocess.Popen[bytes], timeout: float = 180) -> None:
    """Wait until `path` exists; fail early if the process ends first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"process ended with {proc.returncode} before {path} appeared")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.2)


def wait_for_glob(directory: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 180) -> None:
    """Wait (polling every 10 ms) until a file matching `pattern` exists under `directory`."""
    deadline = time.monotonic() + timeout
    while not any(directory.glob(pattern)):
        if proc.poll() is not None:
            raise AssertionError(f"process ended with {proc.returncode} before {directory}/{pattern} appeared")
        if time.monotonic() > deadline:
            raise AssertionError(f"{directory}/{pattern} did not appear within {timeout} s")
        time.sleep(0.01)


def table_ids(spark: Any, path: str, as_of: int | str | None = None) -> list[int]:
    """Sorted ids of a table snapshot, read with Spark."""
    return sorted(r["id"] for r in LakeTable.open(path).read(spark, as_of=as_of).select("id").collect())


def parquet_files_on_disk(path: str) -> set[str]:
    """Relative paths of every Parquet file under a table root, outside _lake."""
    root = Path(path)
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_lake" not in p.parts}


def submit_and_kill(operation: str, spec: Mapping[str, Any], point: str, table_path: str, work: Path) -> None:
    """Run `operation` under spark-submit and SIGKILL all of it at `point`: a fault point (`faults.POINTS`),
    or "during_write", as soon as Spark's writer has a file open in a write directory of the table (`data/`)."""
    flag = work / "reached"
    env = {} if point == "during_write" else {"AIRFLOW_LAKE_FAULT_POINT": point, "AIRFLOW_LAKE_FAULT_FLAG": str(flag)}
    proc = start_submit(operation, spec, env=env, log=work / "spark-submit.log")
    if point == "during_write":
        # a file of a running task attempt (committed files of earlier writes lie outside `_temporary`)
        wait_for_glob(Path(table_path, "data"), "**/_temporary/**/*.parquet", proc)
    else:
        wait_for_file(flag, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
