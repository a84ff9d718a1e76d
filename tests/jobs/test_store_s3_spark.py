"""Every operation on `s3://` tables with Spark's own S3 connector (S3A, `airflow-lake jars s3`) writing and reading
the data files on a real S3-protocol server (`tests/s3_server.py`): through spark-submit of the runner and through
Spark Connect, the same tables and metrics, and not one rename (S3A renames by copying: the server counts the
copies). Reads stay what they are on local disk: bucket pruning, bucketed joins without a shuffle, file skipping.

One Connect server (`s3_connect_server`, LakeHook's Connect path: a session per operation) and one spark-submit
(`tests/jobs/runner_batch.py`: the runner on one session, a RESULT line per operation) run the whole chain, at the
same time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.hooks.connect import PROCESS_FLAGS, ConnectClient
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.jobs.protocol import RESULT_PREFIX
from airflow_lake.jobs.registry import get
from airflow_lake.jobs.runner import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from tests.connect_server import ConnectServer
from tests.lake.buckets.bucket_helpers import PLAN_CONF
from tests.lake.upsert.oracle import as_strings, bdci_expected
from tests.op_chains import TABLES, Step, bdci_batches, chains, run_chain, stable, table_state
from tests.s3_server import S3Server
from tests.store_spark import s3_spark_args
from tests.support import app_command

pytestmark = pytest.mark.slow

BATCH = str(Path(__file__).with_name("runner_batch.py"))
PATHS = ("submit", "connect")
# what LakeHook adds to the metrics of an operation it runs in-process (no Spark: create_table, clean, restore...)
# from its log entry (`LakeHook._run_local`); the runner's RESULT line of such an operation does not have them
HOOK_ADDED = ("already_committed", "noop")


def s3_chains(root: str, data: Path, upload: Any) -> list[list[Step]]:
    """`op_chains.chains` on the store (its sources read from the store too; the clustering LINEAR: the curves'
    sampling is no store matter and costs seconds), then on `events`: a delete, a restore of the snapshot before
    it, and the removal of an orphan (a file dropped under the table before it was made)."""
    tables, upserts = chains(root, data, upload)
    events = f"{root}/events"
    tables = [(op, {**spec, "layout": "LINEAR", "sort_columns": ["x"]} if op == "schedule_clustering" else spec)
              for op, spec in tables]
    tables += [
        ("delete", {"table": events, "where": "x < 100"}),
        ("restore", {"table": events, "to_seq": 5}),  # the bucket rewrite's snapshot, before the delete
        ("remove_orphan_files", {"table": events, "older_than_hours": 0, "force": True}),
    ]
    return [tables, upserts]


def comparable(metrics: dict[str, Any]) -> dict[str, Any]:
    """Stable metrics, without what LakeHook adds to those of an operation it runs in-process."""
    if get(metrics["operation"]).needs_spark:
        return metrics
    return {k: v for k, v in metrics.items() if k not in HOOK_ADDED}


def batch_results(output: str) -> list[dict[str, Any]]:
    """The metrics of each step of a `runner_batch.py` run, from its RESULT lines."""
    return [json.loads(line[len(RESULT_PREFIX):]) for line in output.splitlines() if line.startswith(RESULT_PREFIX)]


@pytest.fixture(scope="module")
def lake(s3_server: S3Server, s3_connect_server: ConnectServer,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The chains run on the store by both paths at once: their metrics, the copies the server saw, and where the
    tables are."""
    import s3fs

    work = tmp_path_factory.mktemp("s3-chains")
    root = f"{s3_server.url}/chains-{os.getpid()}"
    fs = s3fs.S3FileSystem()

    def upload(local: str) -> str:
        url = f"{root}/sources/{Path(local).parent.name}/{Path(local).name}"
        fs.put_file(local, url)
        return url

    bdci_batches(work / "data")
    runs = {path: s3_chains(f"{root}/{path}", work / "data", upload) for path in PATHS}
    for path in PATHS:  # debris nobody's log holds, for remove_orphan_files to find
        fs.pipe_file(f"{root}/{path}/events/data/stray.parquet", b"not a lake file")
    steps = [(op, {**spec, "request_id": f"c{i}/{n}"}) for i, chain in enumerate(runs["submit"])
             for n, (op, spec) in enumerate(chain)]
    (work / "steps.json").write_text(json.dumps(steps))
    mark = s3_server.counter.mark()
    started = time.monotonic()
    command = app_command(BATCH, [str(work / "steps.json")], extra=s3_spark_args(s3_server))
    with open(work / "submit.log", "wb") as log:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        try:
            host, port = s3_connect_server.url.rsplit(":", 1)
            with pytest.MonkeyPatch.context() as env:
                env.setenv("AIRFLOW_CONN_S3_CONNECT",
                           f'{{"conn_type": "spark_connect", "host": "{host}", "port": {port}}}')
                connected = [run_chain(LakeHook("s3_connect").submit, chain, f"c{i}")
                             for i, chain in enumerate(runs["connect"])]
            connect_seconds = time.monotonic() - started
            out, _ = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:  # the test failed first: stop the spark-submit it started
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
    assert proc.returncode == 0, (work / "submit.log").read_text()[-5000:]
    results = iter(batch_results(out.decode()))
    submitted = [[stable(op, next(results)) for op, _ in chain] for chain in runs["submit"]]
    print(f"chains on S3: Spark Connect {connect_seconds:.1f} s, spark-submit {time.monotonic() - started:.1f} s")
    yield {"root": root, "submitted": submitted, "connected": connected, "copies": s3_server.counter.since(mark),
           "data": work / "data", "connect_chains": runs["connect"], "connect_url": s3_connect_server.url}


@pytest.fixture(scope="module")
def remote(s3_connect_server: ConnectServer) -> Iterator[Any]:
    """A Spark Connect client session of the S3 server's Connect server (the tests ask for it after `lake`: the
    chains' sessions come and go before it opens)."""
    from pyspark.sql import SparkSession

    # create(), not getOrCreate(): that refuses a remote session beside the suite's classic one (SESSION_ALREADY_EXIST);
    # and the process's Connect flags put back after, as the product's client does (hooks/connect.py): left set, they
    # make every later classic session of this test process fail (CONNECT_URL_NOT_SET)
    flags = {name: os.environ.get(name) for name in PROCESS_FLAGS}
    session = SparkSession.builder.remote(s3_connect_server.url).create()
    try:
        yield session
    finally:
        session.stop()
        for name, value in flags.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def test_every_operation_on_s3_gives_the_same_tables_and_metrics_by_spark_submit_and_connect_without_a_rename(
        lake: dict[str, Any], remote: Any, s3_server: S3Server) -> None:
    assert [[comparable(m) for m in chain] for chain in lake["connected"]] == \
        [[comparable(m) for m in chain] for chain in lake["submitted"]]
    by_op = {m["operation"]: m for chain in lake["connected"] for m in chain}
    assert by_op["execute_clustering"]["files_after"] < by_op["execute_clustering"]["files_before"]
    assert by_op["bucket_rewrite"]["files_added"] == 8  # 2 days x 4 buckets
    assert by_op["delete"]["rows_deleted"] > 0
    assert by_op["remove_orphan_files"]["orphans_found"] == 1  # the stray file; the committer left nothing
    # S3A renames by copying: no write of any operation, by either path, copied an object; the data files went
    # up as multipart uploads completed at job commit (the magic committer: POSTs)
    assert sum(n for (method, _), n in lake["copies"].items() if method == "COPY") == 0, lake["copies"]
    assert lake["copies"][("POST", "data")] > 0, lake["copies"]
    # (and the server does count a copy: S3A's rename is CopyObject, a PUT with x-amz-copy-source per file)
    mark, source = s3_server.counter.mark(), s3_server.key_of(f"{lake['root']}/sources/data/a.parquet")
    s3_server.client.copy_object(Bucket=s3_server.bucket, Key=f"{source}.copy",
                                 CopySource={"Bucket": s3_server.bucket, "Key": source})
    assert s3_server.counter.since(mark)[("COPY", "data")] == 1
    root = lake["root"]
    states = {name: table_state(remote, f"{root}/connect/{name}") for name in TABLES}
    for name in TABLES:
        assert states[name] == table_state(remote, f"{root}/submit/{name}"), name
    # and right, not only alike: the upserts merged in version order despite the late version 1; the restore
    # brought back what the delete removed
    expected = bdci_expected(bdci_batches(lake["data"]), [0, 1, 2])
    got = as_strings(LakeTable.open(f"{root}/connect/users").read(remote).toPandas(),
                     columns=list(expected.columns[1:]))
    assert got.equals(expected)
    assert len(states["events"]["rows"]) == 1200
    daily = [json.loads(row) for row in states["daily"]["rows"]]
    assert len(daily) == 1200 and sum(row["n"] for row in daily) == 1200


def test_reads_on_s3_prune_buckets_join_without_a_shuffle_and_skip_files(lake: dict[str, Any], remote: Any) -> None:
    events = LakeTable.open(f"{lake['root']}/connect/events")
    daily = LakeTable.open(f"{lake['root']}/connect/daily")
    for key, value in PLAN_CONF.items():  # bucket plans visible (no broadcast hides the join's sides)
        remote.conf.set(key, value)
    # a filter on the bucket column reads one bucket's files
    point = daily.read(remote).where("id = 5")
    assert "SelectedBucketsCount: 1 out of 4" in plan_text(point)
    assert [r["n"] for r in point.collect()] == [1]
    # two tables bucketed alike joined on the bucket key: no Exchange
    joined = events.read(remote).join(daily.read(remote), "id")
    assert shuffles(plan_text(joined)) == 0, plan_text(joined)
    assert joined.count() == 1200
    # file skipping by stats: the snapshot of the two appends (ids 0-599, then 600-1199) read with a filter on
    # id reads the second append's files only
    scan = events.scan(filters=[("id", ">=", 600)], as_of=2)
    assert scan.files_skipped == len(scan.files) == 2, scan  # one file per day each
    skipped = events.read(remote, as_of=2, filters=[("id", ">=", 600)])
    assert {f.rsplit("/", 1)[-1] for f in skipped.inputFiles()} == {f.path.rsplit("/", 1)[-1] for f in scan.files}
    assert skipped.count() == 600


def test_a_csv_source_spelled_s3_is_read_through_s3a(s3_server: S3Server, remote: Any) -> None:
    import s3fs

    root = f"{s3_server.url}/sources-{os.getpid()}"
    fs = s3fs.S3FileSystem()
    fs.pipe_file(f"{root}/src/a.csv", b"id,dt,v\n1,a,1.5\n2,b,2.5\n")
    table = f"{root}/t"
    run(remote, "create_table", {"table": table, "schema": "id BIGINT, dt STRING, v DOUBLE"})
    # spelled as the table is (s3://): read through S3A (the chain's Parquet sources are too); s3a:// is as given
    spec = {"table": table, "source": {"path": f"{root}/src/a.csv", "format": "csv"}}
    assert run(remote, "write", spec)["rows_added"] == 2
    assert sorted(r["id"] for r in LakeTable.open(table).read(remote).collect()) == [1, 2]


def test_a_retry_on_s3_is_answered_from_the_log_without_a_session(lake: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(ConnectClient, "open", lambda self: opened.append(self.url))  # (a retry must not get here)
    host, port = lake["connect_url"].rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_S3_CONNECT", f'{{"conn_type": "spark_connect", "host": "{host}", "port": {port}}}')
    heads = {name: LakeTable.open(f"{lake['root']}/connect/{name}").commit_log.head() for name in TABLES}
    retried = []
    for i, chain in enumerate(lake["connect_chains"]):
        for n, (operation, spec) in enumerate(chain):
            # (not the write into `daily`: its query's table, events, changed since, so it is no retry: refused; nor
            # the delete: the restore after it took events back to before it, so its retry deletes again)
            if get(operation).needs_spark and not spec["table"].endswith("/daily") and operation != "delete":
                retry = LakeHook("s3_connect").submit(operation, {**spec, "request_id": f"c{i}/{n}"})
                retried.append((operation, retry["already_committed"]))
    assert opened == [] and len(retried) >= 7 and all(done for _, done in retried), retried
    assert {name: LakeTable.open(f"{lake['root']}/connect/{name}").commit_log.head() for name in TABLES} == heads
