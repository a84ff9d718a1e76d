"""Kills during a Spark write to S3: the runner under spark-submit with Hadoop's S3A connector and its magic
committer, writing to the S3 server on 127.0.0.1 (`tests/s3_server.py`), SIGKILLed (its whole process group) while a
task attempt writes a file, before the commit and after it.

Each kill happens at its step, never after a sleep: in a task attempt, the server holds the attempt's first part
upload of a data file (its multipart upload was initiated: the file is being written) until the test has killed
the job; before and after the commit, the runner stops at its fault point (`lake.faults`) and flags it.

After each kill the table reads as before (or as committed), the Airflow retry (the same spec and request id)
commits once, and nothing the dead writer left stays on the store once orphan removal ran: no key under `data/`
that no live file needs (data files, S3A's directory markers, the committer's `__magic_job-*/` tree) and no
incomplete multipart upload (the magic committer completes its uploads only at job commit; S3 bills their parts
until they are aborted)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.instants import COMPLETED, INFLIGHT, ROLLED_BACK
from airflow_lake.lake.format.pyarrow_read import read_files
from airflow_lake.lake.maintenance.orphans import remove_orphan_files
from tests.s3_server import S3Server
from tests.store_spark import conf_args, jars, s3a_conf
from tests.support import start_submit, wait_for_file, write_source

pytestmark = pytest.mark.slow
HOUR = 3600.0
SEED = list(range(10))
KILLED = list(range(100, 400))


def seed(table: LakeTable) -> None:
    """One committed Parquet file (ids `SEED`, dt=d0), written without Spark as a writer does: manifest, file,
    commit."""
    txn = table.begin("commit", "write")
    rel = f"data/{txn.instant}-seed/dt=d0/part-00000.parquet"
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(SEED, pa.int64()), "v": [float(i) for i in SEED]}), sink)
    instants.write_manifest(table.storage, txn.instant, [rel])
    table.storage.write_bytes(rel, sink.getvalue())
    txn.commit(added=[DataFile(path=rel, partition={"dt": "d0"}, rows=len(SEED), bytes=len(sink.getvalue()),
                               instant=txn.instant, stats={"id": ColumnStats(min(SEED), max(SEED), 0)})])


def ids(root: str) -> list[int]:
    """The ids of the latest snapshot, read exactly (its live files) through s3fs."""
    table = LakeTable.open(root)
    return sorted(read_files(table.storage, table.spec, table.snapshot().files, ["id"]).column("id").to_pylist())


def data_keys(s3: S3Server, root: str) -> set[str]:
    """Every key under the table's `data/`, directory markers included, relative to the table root."""
    prefix = s3.key_of(root) + "/"
    pages = s3.client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix + "data/")
    return {item["Key"][len(prefix):] for page in pages for item in page.get("Contents", ())}


def uploads(s3: S3Server, root: str, under: str = "") -> list[str]:
    """Keys (relative to the table root) of the multipart uploads in progress under `under`."""
    prefix = s3.key_of(root) + "/"
    answer = s3.client.list_multipart_uploads(Bucket=s3.bucket, Prefix=prefix + under)
    return [u["Key"][len(prefix):] for u in answer.get("Uploads", ())]


def parent_dirs(rel: str) -> list[str]:
    """The directories above a key, as S3A's directory markers name them (`a/`, `a/b/`)."""
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:depth]) + "/" for depth in range(1, len(parts) + 1)]


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


@pytest.mark.parametrize("point", ["in_task", "before_commit", "after_commit"])
def test_a_spark_write_to_s3_killed_leaves_the_table_readable_and_nothing_behind(
        s3_server: S3Server, s3_root: str, tmp_path: Path, point: str) -> None:
    table = LakeTable.create(s3_root, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                       "properties": {"clean.retain.hours": "1"}})
    seed(table)
    before = data_keys(s3_server, s3_root)
    source = write_source(tmp_path / "b.parquet", KILLED, ["d1", "d2", "d3"] * (len(KILLED) // 3))
    spec = {"table": s3_root, "source": {"path": source}, "request_id": f"dag/write/run1/{point}"}
    extra = ["--jars", jars("s3"), *conf_args(s3a_conf(s3_server))]
    log = tmp_path / "killed.log"
    data_prefix = s3_server.key_of(s3_root) + "/data/"

    if point == "in_task":
        def part_upload(method: str, key: str, query: dict[str, list[str]]) -> bool:
            return method == "PUT" and key.startswith(data_prefix) and "partNumber" in query

        with s3_server.controls.hold(part_upload) as held:
            proc = start_submit("write", spec, log=log, extra=extra)
            held.wait(proc)
            # a task attempt is writing: its file's multipart upload was initiated, the magic committer's
            # task directory is there, and its first part is on its way
            in_flight = uploads(s3_server, s3_root, "data/")
            assert in_flight and all("/dt=d" in key for key in in_flight), in_flight
            assert any("/__magic_job-" in key for key in data_keys(s3_server, s3_root))
            kill(proc)
    else:
        flag = tmp_path / "reached"
        proc = start_submit("write", spec, log=log, extra=extra,
                            env={"AIRFLOW_LAKE_FAULT_POINT": point, "AIRFLOW_LAKE_FAULT_FLAG": str(flag)})
        wait_for_file(flag, proc)
        kill(proc)
    s3_server.controls.idle()  # requests of the dead job the server was still answering

    table = LakeTable.open(s3_root)
    dead = next(i for i in table.timeline() if i.operation == "write" and i.request_id == spec["request_id"])
    left = data_keys(s3_server, s3_root) - before
    assert left and all(key.startswith(f"data/{dead.id}-") for key in left), left  # it wrote, in its directory
    if point == "after_commit":
        assert dead.state == COMPLETED
        assert ids(s3_root) == SEED + KILLED  # as committed
    else:
        assert dead.state == INFLIGHT
        assert ids(s3_root) == SEED  # as before
    if point == "in_task":
        assert uploads(s3_server, s3_root)  # the dead task's upload, never completed
    else:  # the job had committed its files: no upload is left open
        assert uploads(s3_server, s3_root) == []
        assert any(key.endswith(".parquet") for key in left)

    # while the dead writer's instant is pending it may be a live one: orphan removal keeps all of it
    kept = remove_orphan_files(LakeTable.open(s3_root), now=time.time() + HOUR)
    assert (kept.orphans, kept.uploads) == ((), ())
    assert data_keys(s3_server, s3_root) - before == left

    # the Airflow retry: the same spec and request id; it rolls the dead attempt back (its process is gone from
    # this host), or finds it committed
    rerun = start_submit("write", spec, log=tmp_path / "rerun.log", extra=extra)
    assert rerun.wait(timeout=300) == 0, (tmp_path / "rerun.log").read_text()[-4000:]
    assert ids(s3_root) == SEED + KILLED  # every row once
    table = LakeTable.open(s3_root)
    states = {i.id: i.state for i in table.timeline()}
    assert states[dead.id] == (COMPLETED if point == "after_commit" else ROLLED_BACK)
    assert instants.pending(table.storage) == []

    result = remove_orphan_files(table, now=time.time() + HOUR)
    live = {f.path for f in table.snapshot().files}
    occupied = {d for rel in live for d in parent_dirs(rel)}
    keys = data_keys(s3_server, s3_root)
    assert keys <= live | occupied, sorted(keys - live - occupied)  # no key the dead writer left
    if point != "after_commit":
        assert not any(key.startswith(f"data/{dead.id}-") for key in keys)
    assert uploads(s3_server, s3_root) == []  # nor an upload: S3 bills none of its parts
    if point == "in_task":
        assert result.uploads and all(key.startswith(f"data/{dead.id}-") for key in result.uploads)
        assert result.metrics()["uploads_aborted"] == len(result.uploads)
        assert result.entry is not None and result.entry.metadata["uploads"] == list(result.uploads)
    assert ids(s3_root) == SEED + KILLED
    assert remove_orphan_files(LakeTable.open(s3_root), now=time.time() + HOUR).entry is None  # nothing more
