"""The incremental example pipeline (`lake_ods_to_dm_incremental`) under `airflow dags test`, over the session's
Spark Connect server: run over the demo's days with a late dimension batch, every table equals a full rebuild
(the `rebuild: "full"` run of the same DAG, and an independent pandas computation of DWS and DM with the
dimensions as merged now); a second run of the same day changes no row of any table; the full run records its
positions, so a later incremental run continues from there. Then, in-process, late events for one day: the DWD
steps read that day only, the DWS step that day, the DM step the days whose window holds it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.datagen import video
from airflow_lake.examples.video_incremental import STEPS
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
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


@dataclass(frozen=True)
class Runs:
    """The DAG's runs on one lake: every table's rows after the incremental runs, after a second run of the last
    day, after the full rebuild; the log heads before the second run; the metrics of each run's commits."""

    lake: Path
    incremental: dict[str, list[tuple[Any, ...]]]
    again: dict[str, list[tuple[Any, ...]]]
    full: dict[str, list[tuple[Any, ...]]]
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
    again, again_heads = contents(lake, ALL_TABLES), heads(lake)
    logs.append(dags_test(env, DAG_ID, "2024-01-03", {**late, "rebuild": "full"}))
    return Runs(lake, incremental, again, contents(lake, ALL_TABLES), before, again_heads, logs)


@pytest.mark.slow
def test_the_incremental_runs_equal_a_full_rebuild_table_by_table(runs: Runs) -> None:
    assert all("over Spark Connect" in log for log in runs.logs)
    for name in ALL_TABLES:
        assert runs.incremental[name], name
        assert runs.full[name] == runs.incremental[name], name  # the rebuild="full" run changed no row
    # independently (pandas): DWS and DM from the generated inputs with the dimensions as merged now (all three
    # days' batches) for every day — not as they were when a day first ran
    lake = runs.lake
    oracle = video_oracle.pipeline([("2024-01-01", list(DAYS)), ("2024-01-03", [])], SIZES)
    got = frame(LakeTable.open(str(lake / "dws_work_daily")), DWS_COLS)
    want = oracle["dws_work_daily"][DWS_COLS].sort_values(["dt", "work_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    got = frame(LakeTable.open(str(lake / "dm_work_7d")), DM_COLS)
    want = oracle["dm_work_7d"][DM_COLS].sort_values(["dt", "work_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    # the late batch changed works played on 2024-01-01: that day's DWS rows were rebuilt by the second run
    dws = LakeTable.open(str(lake / "dws_work_daily"))
    second = [e for e in dws.entries_since(0) if e.operation == "write"][1]
    assert {f.partition["dt"] for f in second.removed} == {"2024-01-01"}, second.metrics
    assert {f.partition["dt"] for f in second.added} == {"2024-01-01", "2024-01-03"}, second.metrics


@pytest.mark.slow
def test_a_second_run_of_the_same_day_changes_nothing(spark: Any, runs: Runs) -> None:
    assert runs.again == runs.incremental
    for name in DOWNSTREAM:  # no change of any row in the second run (a dimension rewritten alike has none)
        table = LakeTable.open(str(runs.lake / name))
        assert runs.again_heads[name] > runs.heads[name], name  # it committed (the positions at least)
        assert table.changes(spark, runs.heads[name], runs.again_heads[name]).count() == 0, name
    for name in ("dws_work_daily", "dm_work_7d"):  # and below the dimensions, no file was even written
        entries = LakeTable.open(str(runs.lake / name)).entries_since(runs.heads[name] + 1)
        assert not [e for e in entries if e.seq <= runs.again_heads[name] and (e.added or e.removed)], name


@pytest.mark.slow
def test_the_full_run_records_positions_and_late_events_rebuild_their_day_only(spark: Any, runs: Runs) -> None:
    lake = runs.lake
    paths = {name: str(lake / name) for name in ALL_TABLES}
    for name, step in STEPS.items():  # consumed up to every upstream's head
        table = LakeTable.open(paths[name])
        assert table.consumed() == {LakeTable.open(paths[up]).identity(): LakeTable.open(paths[up]).state().seq
                                    for up in step.incremental.values()}, name

    late = video.day_events("2024-01-01", video.Sizes(events=60), seed=9).to_pandas()
    late["event_id"] += 50_000_000  # other ids than the day's own
    LakeTable.open(paths["ods_events"]).write(spark.createDataFrame(late))
    metrics = {name: run(spark, "write", step.write_spec(paths, "incremental")) for name, step in STEPS.items()}
    ods_files = {f.partition["dt"]: 0 for f in LakeTable.open(paths["ods_events"]).snapshot().files}
    for f in LakeTable.open(paths["ods_events"]).snapshot().files:
        ods_files[f.partition["dt"]] += 1
    for name in ("dwd_plays", "dwd_likes"):  # the late day's files only
        assert metrics[name]["source_scans"]["events"]["files_read"] == ods_files["2024-01-01"], metrics[name]
    assert metrics["dwd_works"].get("positions_only") or "source_scans" not in metrics["dwd_works"]
    dws_scans = metrics["dws_work_daily"]["source_scans"]
    plays_day = [f for f in LakeTable.open(paths["dwd_plays"]).snapshot().files if f.partition["dt"] == "2024-01-01"]
    assert dws_scans["plays"]["files_read"] == len(plays_day), dws_scans
    for name, days in (("dws_work_daily", {"2024-01-01"}), ("dm_work_7d", {"2024-01-01", "2024-01-03"})):
        last = LakeTable.open(paths[name]).entries_since(0)[-1]
        assert {f.partition["dt"] for f in last.added} == days, (name, metrics[name])
    # and it equals a full rebuild of every downstream table, in the same session
    before = contents(lake, ALL_TABLES)
    for step in STEPS.values():
        run(spark, "write", step.write_spec(paths, "full"))
    assert contents(lake, ALL_TABLES) == before
