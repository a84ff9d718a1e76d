"""The runner under real spark-submit: SIGKILL at several points, and two writers at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.lake.format.instants import COMPLETED, INFLIGHT, ROLLED_BACK, pending
from tests.support import (
    FAST_HEARTBEAT,
    parquet_files_on_disk,
    start_submit,
    submit_and_kill,
    table_ids,
    write_source,
)

pytestmark = pytest.mark.slow
TIMEOUT = float(FAST_HEARTBEAT["heartbeat.timeout.seconds"])
AIRFLOW_LAKE = Path(sys.executable).with_name("airflow-lake")


def new_table(path: str, fast_heartbeat: bool = True) -> LakeTable:
    properties = FAST_HEARTBEAT if fast_heartbeat else {}
    return LakeTable.create(path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                   "properties": properties})


def files_under(path: str) -> set[str]:
    """Every file under the table root, metadata and staging included."""
    return {str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file()}


def metadata_and_data(path: str) -> set[str]:
    """The files under the table root but the log's, checkpoints and the published Delta log (commits add to them)."""
    return {f for f in files_under(path)
            if "/log/" not in f and "/checkpoints/" not in f and not f.startswith("_delta_log/")}


@pytest.mark.parametrize("point", ["before_write", "during_write", "during_place", "before_commit", "after_commit"])
def test_sigkill_leaves_table_readable_and_next_write_cleans_up(
        spark: Any, table_path: str, tmp_path: Path, point: str) -> None:
    new_table(table_path)
    source = write_source(tmp_path / "a.parquet", range(10), "d0")
    run(spark, "write", {"table": table_path, "source": {"path": source}})
    before_ids = table_ids(spark, table_path)
    before_files = parquet_files_on_disk(table_path)
    before_all = metadata_and_data(table_path)
    # three partitions, so that several files are written and placed
    rows = 2_000_000 if point == "during_write" else 30  # enough for Spark's writer to run for seconds
    killed_ids = list(range(100, 100 + rows))
    source = write_source(tmp_path / "b.parquet", killed_ids, ["d1", "d2", "d3"] * (rows // 3) + ["d1"] * (rows % 3))
    submit_and_kill("write", {"table": table_path, "source": {"path": source}}, point, table_path, tmp_path)

    table = LakeTable.open(table_path)
    killed = [i for i in table.timeline() if i.id not in {e.instant for e in table.entries_since(-1)[:2]}]
    assert len(killed) == 1
    if point == "after_commit":  # the commit had landed: it is visible, only tidying up was lost
        assert killed[0].state == COMPLETED
        assert table_ids(spark, table_path) == sorted(before_ids + killed_ids)
    else:
        assert killed[0].state == INFLIGHT
        assert table_ids(spark, table_path) == before_ids  # exactly as before the killed write
        if point == "during_write":  # Spark's writer was stopped mid-task: its files are in its write directory
            written = [p for d in Path(table_path, "data").glob(f"{killed[0].id}-*") for p in d.rglob("*.parquet")]
            assert written, files_under(table_path)
        if point in ("during_place", "before_commit"):
            assert parquet_files_on_disk(table_path) > before_files  # debris exists in the table dirs...
    assert [p.id for p in pending(table.storage)] == [killed[0].id]

    time.sleep(TIMEOUT + 0.5)  # the killed writer's heartbeat goes stale
    source = write_source(tmp_path / "c.parquet", [1000, 1001], "d9")
    run(spark, "write", {"table": table_path, "source": {"path": source}})

    table = LakeTable.open(table_path)
    expected = before_ids + [1000, 1001] + (killed_ids if point == "after_commit" else [])
    assert table_ids(spark, table_path) == sorted(expected)
    assert pending(table.storage) == []
    states = {i.id: i.state for i in table.timeline()}
    assert states[killed[0].id] == (COMPLETED if point == "after_commit" else ROLLED_BACK)
    live = {f.path for f in table.snapshot().files}
    assert parquet_files_on_disk(table_path) == live  # ...and the next writer removed all of it
    assert not any(Path(table_path, "_lake", "markers").iterdir())
    assert not any(Path(table_path, "_lake", "staging").rglob("*"))
    left = metadata_and_data(table_path)
    assert left - before_all == {f for f in live if f not in before_files}  # nothing else stayed behind


def test_two_concurrent_spark_submit_appends_both_land(spark: Any, table_path: str, tmp_path: Path) -> None:
    new_table(table_path, fast_heartbeat=False)  # default timeouts: neither live writer may look dead
    first = list(range(0, 500))
    second = list(range(500, 1000))
    # both writers wait before committing until the other one got there too, so they overlap for sure
    meet = {"AIRFLOW_LAKE_RENDEZVOUS_POINT": "before_commit", "AIRFLOW_LAKE_RENDEZVOUS_DIR": str(tmp_path / "meet"),
            "AIRFLOW_LAKE_RENDEZVOUS_COUNT": "2"}
    procs = [
        start_submit("write", {"table": table_path, "request_id": "one",
                               "source": {"path": write_source(tmp_path / "1.parquet", first, ["a", "b"] * 250)}},
                     env=meet, log=tmp_path / "one.log"),
        start_submit("write", {"table": table_path, "request_id": "two",
                               "source": {"path": write_source(tmp_path / "2.parquet", second, ["a", "b"] * 250)}},
                     env=meet, log=tmp_path / "two.log"),
    ]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0, 0], [(tmp_path / n).read_text()[-3000:] for n in ("one.log", "two.log")]
    table = LakeTable.open(table_path)
    ids = table_ids(spark, table_path)
    assert ids == list(range(1000))  # no row lost, none doubled
    commits = [e for e in table.entries_since(0) if e.action == "commit"]
    assert sorted(e.request_id or "" for e in commits) == ["one", "two"]
    assert [e.seq for e in commits] == [1, 2]
    # the two writers overlapped: each started before the other completed
    assert commits[0].started_at < commits[1].completed_at and commits[1].started_at < commits[0].completed_at


@pytest.mark.parametrize("point", ["during_place", "before_commit"])  # (a kill in Spark's writer: tested above)
def test_sigkill_during_a_bucket_rewrite_leaves_the_table_as_before(
        spark: Any, table_path: str, tmp_path: Path, point: str) -> None:
    new_table(table_path)
    ids = list(range(300))
    run(spark, "write", {"table": table_path, "source": {"path": write_source(
        tmp_path / "a.parquet", ids, ["d1", "d2", "d3"] * 100)}})
    before_files = parquet_files_on_disk(table_path)
    before_spec = LakeTable.open(table_path).spec
    spec = {"table": table_path, "partitions": {"from": {"dt": "d2"}}, "bucket": {"columns": ["id"], "count": 8}}
    submit_and_kill("bucket_rewrite", spec, point, table_path, tmp_path)

    table = LakeTable.open(table_path)
    assert table.spec == before_spec and table.spec.bucket is None  # the spec change did not land
    assert table_ids(spark, table_path) == ids  # every row, once, as before
    assert {f.path for f in table.snapshot().files} == before_files
    assert len(pending(table.storage)) == 1

    time.sleep(TIMEOUT + 0.5)  # the killed writer's heartbeat goes stale; the next writer cleans its debris
    run(spark, "bucket_rewrite", spec)
    table = LakeTable.open(table_path)
    assert table_ids(spark, table_path) == ids
    assert pending(table.storage) == []
    assert parquet_files_on_disk(table_path) == {f.path for f in table.snapshot().files} | (
        before_files - {f.path for f in table.snapshot().files})  # only live files and the replaced ones
    assert {f.bucket for f in table.snapshot().files if f.partition["dt"] != "d1"} == set(range(8))
    assert not any(Path(table_path, "_lake", "staging").rglob("*"))


@pytest.mark.parametrize("point", ["during_write", "before_commit"])
def test_sigkill_during_clustering_leaves_the_table_readable_and_a_rerun_completes_the_plan(
        spark: Any, table_path: str, tmp_path: Path, point: str) -> None:
    new_table(table_path, fast_heartbeat=False)  # default heartbeat: the rerun finds the killed writer's process gone
    ids = list(range(400))
    for i in range(4):
        run(spark, "write", {"table": table_path, "source": {"path": write_source(
            tmp_path / f"{i}.parquet", ids[i::4], ["d1", "d2"] * 50)}})
    table = LakeTable.open(table_path)
    before_files = {f.path for f in table.snapshot().files}
    plan = run(None, "schedule_clustering", {"table": table_path, "layout": "ZORDER", "sort_columns": ["id", "v"]})
    spec = {"table": table_path, "plan_id": plan["plan_id"], "request_id": "dag/run/1/-1"}
    submit_and_kill("execute_clustering", spec, point, table_path, tmp_path)

    table = LakeTable.open(table_path)
    assert table_ids(spark, table_path) == ids  # readable as before: every row once
    assert {f.path for f in table.snapshot().files} == before_files
    assert not table.is_finished(plan["plan_id"])
    out = run(spark, "execute_clustering", spec)  # the Airflow retry, at once: the dead attempt is rolled back
    assert out["already_committed"] is False and (out["files_before"], out["files_after"]) == (8, 2)
    table = LakeTable.open(table_path)
    assert table_ids(spark, table_path) == ids
    assert [i.state for i in table.timeline() if i.operation == "execute_clustering"] == [ROLLED_BACK, COMPLETED]
    assert pending(table.storage) == []
    assert parquet_files_on_disk(table_path) == {f.path for f in table.snapshot().files} | before_files


def _killed_after_request(table_path: str, before: set[str]) -> str:
    """The one instant the killed job left: reserved (requested), never marked inflight."""
    left = [p for p in pending(LakeTable.open(table_path).storage) if p.id not in before]
    assert len(left) == 1 and not left[0].inflight and left[0].action == "replace", left
    return left[0].id


def test_a_clustering_killed_between_reserving_and_marking_its_instant_blocks_nothing(
        spark: Any, table_path: str, tmp_path: Path) -> None:
    """Issue 20.8: the dead attempt was taken for a plan and for a live writer, for good. Default heartbeat
    timeout (120 s): the next run must know the writer dead from its process, at once."""
    new_table(table_path, fast_heartbeat=False)
    ids = list(range(200))
    for i in range(4):
        run(spark, "write", {"table": table_path, "source": {"path": write_source(
            tmp_path / f"{i}.parquet", ids[i::4], ["d1", "d2"] * 25)}})
    plan = run(None, "schedule_clustering", {"table": table_path})["plan_id"]
    spec = {"table": table_path, "plan_id": plan, "request_id": "dag/cluster/run1/-1"}
    submit_and_kill("execute_clustering", spec, "after_request", table_path, tmp_path)
    dead = _killed_after_request(table_path, {plan})
    table = LakeTable.open(table_path)
    assert table_ids(spark, table_path) == ids and not table.is_finished(plan)

    # `airflow-lake rollback-pending PATH` (no ids: dead writers) drops the dead attempt and keeps the plan
    cli = subprocess.run([str(AIRFLOW_LAKE), "rollback-pending", table_path, "--json"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["rolled_back"] == [dead]
    assert [p.id for p in pending_plans(table)] == [plan]
    out = run(spark, "execute_clustering", spec)  # the Airflow retry
    assert out["already_committed"] is False and (out["files_before"], out["files_after"]) == (8, 2)
    runs = [(i.id, i.state) for i in table.timeline() if i.operation == "execute_clustering"]
    assert runs == [(dead, ROLLED_BACK), (out["instant"], COMPLETED)] and table.resolve(plan) == out["seq"]
    assert table_ids(spark, table_path) == ids and pending(table.storage) == []


@pytest.mark.parametrize("operation", ["bucket_rewrite", "compact_upserts"])
def test_a_replace_killed_between_reserving_and_marking_its_instant_is_rolled_back_by_the_next_run(
        spark: Any, table_path: str, tmp_path: Path, operation: str) -> None:
    """Issue 20.8: a bucket rewrite or compaction that died there left a requested `replace` for good."""
    if operation == "compact_upserts":
        LakeTable.create(table_path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "primary_key": ["id"],
                                      "bucket": {"columns": ["id"], "count": 2}})
        for version in (1, 2):
            run(spark, "versioned_upsert", {"table": table_path, "version": version, "source": {
                "path": write_source(tmp_path / f"{version}.parquet", range(50), "x")}})
        spec: dict[str, Any] = {"table": table_path}
    else:
        new_table(table_path, fast_heartbeat=False)
        run(spark, "write", {"table": table_path, "source": {"path": write_source(
            tmp_path / "a.parquet", range(50), ["d1", "d2"] * 25)}})
        spec = {"table": table_path, "partitions": {"from": {"dt": "d2"}}, "bucket": {"columns": ["id"], "count": 4}}
    before = table_ids(spark, table_path)
    submit_and_kill(operation, spec, "after_request", table_path, tmp_path)
    dead = _killed_after_request(table_path, set())
    assert table_ids(spark, table_path) == before

    run(spark, operation, spec)  # default heartbeat timeout: the dead writer is known by its process
    table = LakeTable.open(table_path)
    assert {i.id: i.state for i in table.timeline()}[dead] == ROLLED_BACK
    assert pending(table.storage) == [] and table_ids(spark, table_path) == before
    assert table.commit_log.read(table.commit_log.head()).operation == operation


def test_a_retry_of_a_write_killed_just_past_its_commit_tidies_what_it_left(
        spark: Any, table_path: str, tmp_path: Path) -> None:
    """Issue 20: the retry answered `already_committed` and left the instant's pending, heartbeat and marker
    files for the next writer."""
    new_table(table_path, fast_heartbeat=False)
    spec = {"table": table_path, "request_id": "dag/load/run1/-1",
            "source": {"path": write_source(tmp_path / "a.parquet", range(30), ["d1", "d2", "d3"] * 10)}}
    submit_and_kill("write", spec, "after_commit", table_path, tmp_path)
    table = LakeTable.open(table_path)
    killed = [p.id for p in pending(table.storage)]
    assert len(killed) == 1 and table.is_finished(killed[0])  # committed; its leftovers are still there

    out = run(spark, "write", spec)  # the Airflow retry
    assert out["already_committed"] is True and out["instant"] == killed[0]
    assert pending(table.storage) == []
    meta = Path(table_path, "_lake")
    leftovers = [p for d in ("pending", "heartbeats", "markers", "staging") for p in (meta / d).glob(f"{killed[0]}*")]
    assert leftovers == []
    assert table_ids(spark, table_path) == list(range(30))  # once
