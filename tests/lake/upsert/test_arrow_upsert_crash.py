"""Upserts without Spark under SIGKILL and in real races: each writer is its own process running what the hook runs
in an Airflow task (`runner.run(None, ..., spark_free=True)`), stopped at a fault point or made to overlap with
another at its commit (a rendezvous), so the interleaving happens for sure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.datagen import bdci
from airflow_lake.lake.format.instants import pending
from airflow_lake.lake.table import LakeTable
from tests.lake.upsert.oracle import as_strings, bdci_expected
from tests.support import FAST_HEARTBEAT, parquet_files_on_disk, wait_for_file

TIMEOUT = float(FAST_HEARTBEAT["heartbeat.timeout.seconds"])
SCRIPT = ("import json, sys; from airflow_lake.jobs.runner import run; "
          "print(json.dumps(run(None, 'versioned_upsert', json.loads(sys.argv[1]), spark_free=True), default=str))")


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return bdci.generate(tmp_path_factory.mktemp("bdci"), 200, keys=300)


def start(spec: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(spec)], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def upsert_spec(table: str, batches: list[Path], version: int, request_id: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"table": table, "source": {"path": str(batches[version])}, "version": version}
    return {**spec, "request_id": request_id} if request_id else spec


def same(table: str, batches: list[Path], versions: list[int]) -> bool:
    """Whether the table's merged read (pyarrow) is the oracle's merge of `versions`."""
    want = bdci_expected(batches, versions=versions)
    return bool(as_strings(LakeTable.open(table).to_arrow().to_pandas(), columns=list(want.columns[1:])).equals(want))


@pytest.mark.parametrize("point", ["before_write", "during_place", "before_commit", "after_commit"])
def test_a_killed_upsert_leaves_the_table_as_before_and_its_retry_completes_it(
        batches: list[Path], tmp_path: Path, point: str) -> None:
    from airflow_lake.jobs.runner import run

    table = str(tmp_path / "t")
    LakeTable.create(table, {**bdci.table_spec(4), "properties": FAST_HEARTBEAT})
    run(None, "versioned_upsert", upsert_spec(table, batches, 0), spark_free=True)
    before_files = parquet_files_on_disk(table)
    flag = tmp_path / "reached"
    proc = start(upsert_spec(table, batches, 1, "k-1"), {"AIRFLOW_LAKE_FAULT_POINT": point,
                                                          "AIRFLOW_LAKE_FAULT_FLAG": str(flag)})
    wait_for_file(flag, proc, timeout=60)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    landed = point == "after_commit"
    assert same(table, batches, [0, 1] if landed else [0])  # readable as before (or with the commit that landed)
    if point in ("during_place", "before_commit"):
        assert parquet_files_on_disk(table) > before_files  # the killed writer's files are there, not live
    time.sleep(TIMEOUT + 0.5)  # its heartbeat goes stale
    retry = run(None, "versioned_upsert", upsert_spec(table, batches, 1, "k-1"), spark_free=True)
    assert retry["already_committed"] is landed and retry["spark"] is False
    assert same(table, batches, [0, 1])
    assert pending(LakeTable.open(table).storage) == []
    assert parquet_files_on_disk(table) == {f.path for f in LakeTable.open(table).snapshot().files}


def test_racing_upserts_both_land_and_a_racing_duplicate_is_one_upsert(batches: list[Path], tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, bdci.table_spec(4))
    rendezvous = {"AIRFLOW_LAKE_RENDEZVOUS_POINT": "before_commit", "AIRFLOW_LAKE_RENDEZVOUS_COUNT": "2"}
    # versions 2 and 1 at once: each commits after the other wrote its files (upserts only add files)
    procs = [start(upsert_spec(table, batches, v), {**rendezvous, "AIRFLOW_LAKE_RENDEZVOUS_DIR": str(tmp_path / "r1")})
             for v in (2, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1].decode()[-2000:] for o in outs]
    assert same(table, batches, [1, 2])
    # the same batch as version 3 twice at once (two DAG runs): the second to commit conflicts, and its retry finds
    # the first's upsert of the same data
    procs = [start(upsert_spec(table, batches, 3), {**rendezvous, "AIRFLOW_LAKE_RENDEZVOUS_DIR": str(tmp_path / "r2")})
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0, [o[1].decode()[-2000:] for o in outs]
    if codes[1] != 0:  # the loser of the race: a commit conflict, nothing committed by it
        assert "onflict" in b"".join(o[1] for o in outs).decode()
    from airflow_lake.jobs.runner import run

    again = run(None, "versioned_upsert", upsert_spec(table, batches, 3), spark_free=True)
    assert again["already_committed"] is True
    upserts = [e for e in LakeTable.open(table).commit_log.entries(-1) if e.metadata.get("versions") == [3]]
    assert len(upserts) == 1
    assert same(table, batches, [1, 2, 3])
