"""Kills during a Spark write to S3: the runner under spark-submit with Hadoop's S3A connector and its magic
committer, writing to the S3 server on 127.0.0.1 (`tests/s3_server.py`), SIGKILLed (its whole process group) while a
task attempt writes a file, before the commit and after it.

One Airflow task's attempts, each with the same spec and request id: the first is killed in a Spark task, the
second (its retry) before its commit, the third after it, and the fourth finds the write committed (run in-process:
it finds its request committed before Spark reads anything). Each kill happens at its step, never after a sleep: in
a task, the server holds the attempt's first part upload of a data file (its multipart upload was initiated: the
file is being written) until the test has killed the job; before and after the commit, the runner stops at its
fault point (`lake.faults`) and flags it.

After each kill the table reads as before (or as committed), the next attempt rolls the dead one back and goes on,
and orphan removal takes what the dead writers left and only that: S3A's directory markers and the committer's
`__magic_job-*/` tree go with the rollback, the incomplete multipart uploads of the attempt killed in its task
(the magic committer completes uploads only at job commit; S3 bills their parts until they are aborted) with orphan
removal, and in the end no key under `data/` is left that no live file needs."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.instants import COMPLETED, INFLIGHT, ROLLED_BACK
from airflow_lake.lake.format.pyarrow_read import read_files
from airflow_lake.lake.maintenance.orphans import remove_orphan_files
from tests.s3_server import S3Server
from tests.store_spark import s3_spark_args
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


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def test_an_airflow_tasks_attempts_killed_in_a_spark_task_before_and_after_the_commit_on_s3(
        spark: Any, s3_server: S3Server, s3_root: str, tmp_path: Path) -> None:
    table = LakeTable.create(s3_root, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                       "properties": {"clean.retain.hours": "1"}})
    seed(table)
    seeded = data_keys(s3_server, s3_root)
    source = write_source(tmp_path / "b.parquet", KILLED, ["d1", "d2", "d3"] * (len(KILLED) // 3))
    spec = {"table": s3_root, "source": {"path": source}, "request_id": "dag/write/run1"}
    extra = s3_spark_args(s3_server)
    data_prefix = s3_server.key_of(s3_root) + "/data/"

    def attempt_of(number: int) -> str:
        """The instant of the `number`-th attempt (they are the table's writes after the seed, in order)."""
        writes = [i for i in LakeTable.open(s3_root).timeline() if i.request_id == spec["request_id"]]
        assert len(writes) == number, writes
        return writes[-1].id

    def killed_at(point: str, number: int) -> str:
        log = tmp_path / f"attempt-{number}.log"
        if point == "in_task":
            def part_upload(method: str, key: str, query: dict[str, list[str]]) -> bool:
                return method == "PUT" and key.startswith(data_prefix) and "partNumber" in query

            with s3_server.controls.hold(part_upload) as held:
                proc = start_submit("write", spec, log=log, extra=extra)
                held.wait(proc)
                # a task is writing: its file's multipart upload was initiated, the magic committer's task
                # directory is there, and its first part is on its way
                in_flight = uploads(s3_server, s3_root, "data/")
                assert in_flight and all("/dt=d" in key for key in in_flight), in_flight
                assert any("/__magic_job-" in key for key in data_keys(s3_server, s3_root))
                kill(proc)
        else:
            flag = tmp_path / f"reached-{number}"
            proc = start_submit("write", spec, log=log, extra=extra,
                                env={"AIRFLOW_LAKE_FAULT_POINT": point, "AIRFLOW_LAKE_FAULT_FLAG": str(flag)})
            wait_for_file(flag, proc)
            kill(proc)
        s3_server.controls.idle()  # requests of the dead job the server was still answering
        return attempt_of(number)

    def states() -> dict[str, str]:
        return {i.id: i.state for i in LakeTable.open(s3_root).timeline()}

    def written_by(instant: str) -> set[str]:
        return {key for key in data_keys(s3_server, s3_root) if key.startswith(f"data/{instant}-")}

    # 1. killed while a Spark task writes: the table reads as before; the dead attempt's objects stay while it is
    # pending (a pending writer may be a live one: orphan removal keeps all of it)
    first = killed_at("in_task", 1)
    assert states()[first] == INFLIGHT and ids(s3_root) == SEED
    left = written_by(first)
    assert any("/__magic_job-" in key for key in left) and uploads(s3_server, s3_root), left
    kept = remove_orphan_files(LakeTable.open(s3_root), now=time.time() + HOUR)
    assert (kept.orphans, kept.uploads) == ((), ()) and written_by(first) == left

    # 2. the retry, killed before its commit: it rolled the first attempt back (its process is gone from this
    # host), markers and committer tree included; orphan removal aborts the first attempt's uploads, and keeps
    # the second attempt's files (pending)
    second = killed_at("before_commit", 2)
    assert states()[first] == ROLLED_BACK and states()[second] == INFLIGHT and ids(s3_root) == SEED
    assert written_by(first) == set()
    committed_by_job = written_by(second)
    assert any(key.endswith(".parquet") for key in committed_by_job)
    assert all(key.startswith(f"data/{first}-") for key in uploads(s3_server, s3_root))  # the job had committed
    first_uploads = uploads(s3_server, s3_root)
    swept = remove_orphan_files(LakeTable.open(s3_root), now=time.time() + HOUR)
    assert sorted(swept.uploads) == sorted(first_uploads) and swept.orphans == ()
    assert swept.metrics()["uploads_aborted"] == len(first_uploads)
    assert swept.entry is not None and swept.entry.metadata["uploads"] == list(swept.uploads)
    assert uploads(s3_server, s3_root) == [] and written_by(second) == committed_by_job

    # 3. the next retry, killed after its commit: the table reads as committed; the second attempt is rolled back
    third = killed_at("after_commit", 3)
    assert states()[second] == ROLLED_BACK and states()[third] == COMPLETED
    assert ids(s3_root) == SEED + KILLED and written_by(second) == set()

    # 4. the last retry finds the write committed before it reads anything, and tidies what the third attempt
    # left: the runner in this process (no Spark job runs; three spark-submits above were the transport)
    assert run(spark, "write", spec)["already_committed"] is True
    table = LakeTable.open(s3_root)
    assert [i.state for i in table.timeline() if i.request_id == spec["request_id"]] == [
        ROLLED_BACK, ROLLED_BACK, COMPLETED]
    assert ids(s3_root) == SEED + KILLED and instants.pending(table.storage) == []
    assert remove_orphan_files(table, now=time.time() + HOUR).entry is None  # nothing left to take
    live = {f.path for f in table.snapshot().files}
    occupied = {d for rel in live for d in paths.parent_dirs(rel)}
    keys = data_keys(s3_server, s3_root)
    assert keys <= live | occupied, sorted(keys - live - occupied)  # no key any dead attempt left
    assert seeded <= keys and uploads(s3_server, s3_root) == []
