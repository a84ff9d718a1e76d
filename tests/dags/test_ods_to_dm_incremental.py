"""The incremental example pipeline (`lake_ods_to_dm_incremental`) under `airflow dags test`, over the session's
Spark Connect server: run over the demo's days with a late dimension batch, every table equals a full rebuild
(DWD and DWS rebuilt whole by `lake_ods_to_dm`'s queries over every day; DWS and DM computed independently in
pandas with the dimensions as merged now); a second run of the same day changes no row of any table. Then the
DAG's steps in-process: late events for one day read and rebuild that day (and the DM days whose window holds
it); `rebuild="full"` rebuilds every day and records its positions, so the next incremental run has nothing
left. (The `rebuild` Param choosing the queries and reads: the DAG test at the top.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import pytest

from airflow_lake.datagen import video
from airflow_lake.examples.video_incremental import STEPS, whole_table_specs
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.spark.session_conf import session_conf
from tests.airflow_stack import migrate_db
from tests.conftest import ROOT
from tests.connect_server import ConnectServer
from tests.dags import video_oracle
from tests.dags.test_ods_to_dm import ALL_TABLES, airflow_env, contents, dags_test, frame

DAGS = ROOT / "dags"
DAG_ID = "lake_ods_to_dm_incremental"
EVENTS = 3000
SIZES = video.Sizes(events=EVENTS)
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
DOWNSTREAM = ("dwd_plays", "dwd_likes", "dwd_works", "dws_work_daily", "dm_work_7d")
WHOLE = ("dwd_plays", "dwd_likes", "dwd_works", "dws_work_daily")  # the tables `whole_table_specs` rebuilds
DWS_COLS = ["work_id", "category", "author_id", "plays", "viewers", "vip_plays", "play_ms", "likes", "dt"]
DM_COLS = ["work_id", "category", "author_id", "plays_7d", "likes_7d", "play_ms_7d", "active_days", "dt"]


def test_the_incremental_dag_has_the_rebuild_param_and_the_assets_of_the_same_tables() -> None:
    """(Its parse without pyspark: tests/test_parse_light.py and test_ods_to_dm.py's DagBag test.)"""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    dag, rebuild_day = bag.dags[DAG_ID], bag.dags["lake_ods_to_dm"]
    assert dag.params["rebuild"] == "incremental"
    assert set(dag.params) == {"day", "events_per_day", "buckets", "backfill_days", "rebuild"}
    assert dag.get_task("build_dws_work_daily").upstream_task_ids == {
        "build_dwd_plays", "build_dwd_likes", "build_dwd_works", "create_dws_work_daily"}
    assert set(dag.task_ids) == set(rebuild_day.task_ids)  # the same steps, the same tables
    for task_id in dag.task_ids:  # so the same Assets: lake_maintenance runs on either DAG's commits
        assert dag.get_task(task_id).outlets == rebuild_day.get_task(task_id).outlets, task_id
    assert dag.get_task("build_dm_work_7d").outlets
    # the Param picks the queries and the reads: the full rebuild's over every day, unpruned
    import jinja2

    for name, step in STEPS.items():
        task = dag.get_task(f"build_{name}")
        for mode in ("incremental", "full"):
            params = {"params": {"rebuild": mode}}
            assert jinja2.Template(task.query).render(params) == step.query(mode), (name, mode)
            pruned = {view: jinja2.Template(ref["partitions"]).render(params)
                      for view, ref in task.tables.items() if isinstance(ref, dict) and view in step_views(step)}
            assert set(pruned.values()) <= ({"changed"} if mode == "incremental" else {"all"}), (name, pruned)


def step_views(step: Any) -> set[str]:
    """The views the step's main query reads pruned by the Param (True), not by a fixed list of views."""
    return {view for view, (_, pruned) in step.tables.items() if pruned is True}


@dataclass(frozen=True)
class Runs:
    """The DAG's runs on one lake: every table's rows after the incremental runs and after a second run of the
    last day; the tables' log heads before and after that second run; the runs' logs."""

    lake: Path
    incremental: dict[str, list[tuple[Any, ...]]]
    again: dict[str, list[tuple[Any, ...]]]
    heads: dict[str, int]
    again_heads: dict[str, int]
    logs: list[str]


def heads(lake: Path) -> dict[str, int]:
    return {name: LakeTable.open(str(lake / name)).state().seq for name in ALL_TABLES}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, connect_server: ConnectServer) -> Runs:
    tmp = tmp_path_factory.mktemp("incremental-pipeline")
    host, port = connect_server.url.rsplit(":", 1)
    env = {**airflow_env(tmp), "AIRFLOW_LAKE_SPARK_CONN_ID": "spark_connect_lake",
           "AIRFLOW_CONN_SPARK_CONNECT_LAKE": json.dumps({"conn_type": "spark_connect", "host": host,
                                                          "port": int(port)})}
    migrate_db(env)
    lake = tmp / "lake"
    late = {"events_per_day": EVENTS, "backfill_days": ["2024-01-02"]}  # the dimension batches of 01-02, late
    logs = [dags_test(env, DAG_ID, "2024-01-01", {"events_per_day": EVENTS, "buckets": 8.0}),
            dags_test(env, DAG_ID, "2024-01-03", late)]
    incremental, before = contents(lake, ALL_TABLES), heads(lake)
    logs.append(dags_test(env, DAG_ID, "2024-01-03", late))  # the same day again
    return Runs(lake, incremental, contents(lake, ALL_TABLES), before, heads(lake), logs)


def rebuilt_whole(spark: Any, lake: Path, out: Path) -> dict[str, list[tuple[Any, ...]]]:
    """An independent full rebuild of the DWD and DWS tables, as new tables under `out`: `lake_ods_to_dm`'s
    queries over every day (no views of changes, no day filters), each table overwritten whole from the current
    ODS snapshots. Returns their rows."""
    from airflow_lake.examples.video_pipeline import BUCKETED_JOIN_CONF, CREATE

    paths = {name: str(lake / name) for name in ALL_TABLES} | {name: str(out / name) for name in WHOLE}
    for name in WHOLE:
        spec = dict(CREATE[name], bucket={**CREATE[name]["bucket"], "count": 16 if name == "dwd_plays" else 8})
        run(spark, "create_table", {"table": paths[name], **spec})
    for name, spec in whole_table_specs(paths).items():
        with session_conf(spark, BUCKETED_JOIN_CONF if name == "dws_work_daily" else {}):
            run(spark, "write", spec)
    return contents(out, WHOLE)


@pytest.mark.slow
def test_the_incremental_runs_equal_a_full_rebuild_table_by_table(spark: Any, runs: Runs, tmp_path: Path) -> None:
    assert all("over Spark Connect" in log for log in runs.logs)
    assert all(runs.incremental[name] for name in ALL_TABLES)
    # the DWD and DWS tables: as rebuilt whole (Spark, the rebuild-the-day queries over every day)
    whole = rebuilt_whole(spark, runs.lake, tmp_path / "whole")
    for name in WHOLE:
        assert runs.incremental[name] == whole[name], name
    # DWS and DM, independently (pandas): from the generated inputs with the dimensions as merged now (all three
    # days' batches) for every day — not as they were when a day first ran
    lake = runs.lake
    oracle = video_oracle.pipeline([("2024-01-01", list(DAYS)), ("2024-01-03", [])], SIZES)
    got = frame(LakeTable.open(str(lake / "dws_work_daily")), DWS_COLS)
    want = oracle["dws_work_daily"][DWS_COLS].sort_values(["dt", "work_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    got = frame(LakeTable.open(str(lake / "dm_work_7d")), DM_COLS)
    want = oracle["dm_work_7d"][DM_COLS].sort_values(["dt", "work_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    # the late batch changed works played on 2024-01-01: the second run rebuilt that day's DWS rows with its own
    dws = LakeTable.open(str(lake / "dws_work_daily"))
    second = [e for e in dws.entries_since(0) if e.operation == "write"][1]
    assert sorted(p["dt"] for p in second.metadata["overwritten_partitions"]) == ["2024-01-01", "2024-01-03"]
    assert second.removed and all("dt=2024-01-01/" in path for path in second.removed), second.removed


@pytest.mark.slow
def test_a_second_run_of_the_same_day_changes_nothing(spark: Any, runs: Runs) -> None:
    assert runs.again == runs.incremental
    for name in DOWNSTREAM:  # no change of any row in the second run (a dimension rewritten alike has none)
        table = LakeTable.open(str(runs.lake / name))
        assert runs.again_heads[name] > runs.heads[name], name  # it committed (the positions at least)
        assert table.changes(spark, runs.heads[name], runs.again_heads[name]).count() == 0, name
    # the DM step rebuilds from DWS change rows: the reloaded day's identical rows gave none, no file was written
    entries = LakeTable.open(str(runs.lake / "dm_work_7d")).entries_since(runs.heads["dm_work_7d"] + 1)
    assert not [e.seq for e in entries if e.seq <= runs.again_heads["dm_work_7d"] and (e.added or e.removed)]


def late_events(spark: Any, lake: Path, day: str, seed: int) -> None:
    late = video.day_events(day, video.Sizes(events=60), seed=seed)
    ids = pc.add(late["event_id"], 50_000_000 + seed * 1000)  # other ids than the day's own
    LakeTable.open(str(lake / "ods_events")).write(spark.createDataFrame(late.set_column(0, "event_id", ids)))


def files_of(path: str, day: str) -> int:
    return sum(f.partition["dt"] == day for f in LakeTable.open(path).snapshot().files)


@pytest.mark.slow
def test_late_events_rebuild_their_days_only_and_a_full_rebuild_records_positions(
        spark: Any, runs: Runs, tmp_path: Path) -> None:
    """In-process, the DAG's steps (`STEPS`) after the runs: late events of 2024-01-01 read and rebuild that day
    in DWD and DWS, and the DM days whose window holds it; then with rebuild="full" every day is rebuilt, and
    the next incremental run finds nothing left to consume."""
    lake = runs.lake
    paths = {name: str(lake / name) for name in ALL_TABLES}
    late_events(spark, lake, "2024-01-01", seed=9)
    metrics = {name: run(spark, "write", step.write_spec(paths, "incremental")) for name, step in STEPS.items()}
    for name in ("dwd_plays", "dwd_likes"):  # the late day's files only
        scans = metrics[name]["source_scans"]
        assert scans["events"]["files_read"] == files_of(paths["ods_events"], "2024-01-01"), scans
    assert metrics["dwd_works"]["noop"], metrics["dwd_works"]  # no work changed: no query
    scans = metrics["dws_work_daily"]["source_scans"]
    assert scans["plays"]["files_read"] == files_of(paths["dwd_plays"], "2024-01-01"), scans
    assert scans["likes"]["files_read"] == files_of(paths["dwd_likes"], "2024-01-01"), scans
    for name, days in (("dwd_plays", ["2024-01-01"]), ("dws_work_daily", ["2024-01-01"]),
                       ("dm_work_7d", ["2024-01-01", "2024-01-03"])):  # (DM: the days whose window holds it)
        last = LakeTable.open(paths[name]).entries_since(0)[-1]
        assert sorted(p["dt"] for p in last.metadata["overwritten_partitions"]) == days, (name, metrics[name])
    incremental = contents(lake, WHOLE)
    assert incremental == rebuilt_whole(spark, lake, tmp_path / "whole")

    late_events(spark, lake, "2024-01-03", seed=10)
    full = {name: run(spark, "write", step.write_spec(paths, "full")) for name, step in STEPS.items()}
    for name in ("dwd_plays", "dwd_likes", "dws_work_daily", "dm_work_7d"):  # every day, read whole
        last = LakeTable.open(paths[name]).entries_since(0)[-1]
        assert sorted(p["dt"] for p in last.metadata["overwritten_partitions"]) == ["2024-01-01", "2024-01-03"]
    assert full["dwd_plays"]["source_scans"]["events"]["files_skipped"] == 0, full["dwd_plays"]
    assert contents(lake, WHOLE) == rebuilt_whole(spark, lake, tmp_path / "whole-after-full")
    for name, step in STEPS.items():  # positions recorded: consumed up to every upstream's head
        assert LakeTable.open(paths[name]).consumed() == {
            LakeTable.open(paths[up]).identity(): LakeTable.open(paths[up]).state().seq
            for up in step.incremental.values()}, name
        again = run(spark, "write", step.write_spec(paths, "incremental"))
        assert again["noop"], (name, again)
