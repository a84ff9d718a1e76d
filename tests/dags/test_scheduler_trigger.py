"""The real thing: Airflow's api-server, scheduler, dag-processor and triggerer as processes; `lake_ods_to_dm`
triggered over the REST API with a `conf` as the UI's trigger form sends it; its asset events start
`lake_maintenance`, whose deferrable sensor waits in the triggerer until a second run commits; a cleared
task that runs again leaves the tables as they were; a bad `conf` is refused before any task runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.assets import table_uri
from airflow_lake.datagen import video
from airflow_lake.lake import LakeTable
from tests.airflow_stack import AirflowStack
from tests.conftest import ROOT
from tests.dags import video_oracle

EVENTS = 2000
PIPELINE, MAINTENANCE = "lake_ods_to_dm", "lake_maintenance"


def trigger(stack: AirflowStack, dag_id: str, conf: dict[str, Any]) -> str:
    response = stack.api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
    assert response.status_code == 200, response.text
    return str(response.json()["dag_run_id"])


def run_state(stack: AirflowStack, dag_id: str, run_id: str) -> str:
    response = stack.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
    assert response.status_code == 200, response.text
    return str(response.json()["state"])


def wait_done(stack: AirflowStack, dag_id: str, run_id: str, timeout: float = 600) -> None:
    state = stack.wait(lambda: (s := run_state(stack, dag_id, run_id)) in ("success", "failed") and s, timeout,
                       f"{dag_id} run {run_id} to finish")
    if state != "success":
        tis = stack.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").json()["task_instances"]
        failed = [t["task_id"] for t in tis if t["state"] == "failed"]
        raise AssertionError(f"{dag_id} run {run_id} {state}; failed tasks {failed}\n{stack.log_tail('scheduler')}")


def task_state(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> str | None:
    response = stack.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
    return response.json().get("state") if response.status_code == 200 else None


def maintenance_runs(stack: AirflowStack) -> list[dict[str, Any]]:
    runs = stack.api.get(f"/api/v2/dags/{MAINTENANCE}/dagRuns", params={"order_by": "id"}).json()["dag_runs"]
    return [r for r in runs if r["run_type"] == "asset_triggered"]


def table_rows(lake: Path) -> dict[str, list[Any]]:
    names = ("ods_events", "dwd_plays", "dwd_likes", "dwd_works", "dws_work_daily", "dm_work_7d")
    return {n: sorted(map(str, LakeTable.open(str(lake / n)).to_arrow().to_pylist())) for n in names}


@pytest.mark.slow
def test_trigger_over_rest_assets_and_deferrable_maintenance(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    env = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW_LAKE_ROOT": str(lake),
           "AIRFLOW_LAKE_LANDING": str(tmp_path / "landing"), "AIRFLOW_LAKE_PIPELINE_SCHEDULE": "",
           "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}'}
    with AirflowStack(tmp_path / "airflow", env) as stack:
        stack.wait(lambda: all(stack.api.get(f"/api/v2/dags/{d}").status_code == 200 for d in (PIPELINE, MAINTENANCE)),
                   180, "the dag-processor to parse both DAGs")
        for dag_id in (PIPELINE, MAINTENANCE):
            assert stack.api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).status_code == 200

        # bad conf, as a tampered form would send it: refused, and no run exists
        for bad in ({"buckets": 6}, {"day": "2024-13-45"}, {"events_per_day": -5}, {"backfill_days": ["../x"]}):
            response = stack.api.post(f"/api/v2/dags/{PIPELINE}/dagRuns", json={"logical_date": None, "conf": bad})
            assert response.status_code == 400, (bad, response.status_code, response.text)
        assert stack.api.get(f"/api/v2/dags/{PIPELINE}/dagRuns").json()["total_entries"] == 0

        first = trigger(stack, PIPELINE, {"day": "2024-01-01", "events_per_day": EVENTS, "buckets": 4})
        wait_done(stack, PIPELINE, first)
        assert LakeTable.open(str(lake / "dwd_plays")).spec.bucket.count == 8  # 2 x the buckets Param
        # the DM commit's asset event, with the commit's metrics as extra, started the maintenance DAG
        query = {"order_by": "timestamp", "limit": 100}
        events = stack.api.get("/api/v2/assets/events", params=query).json()["asset_events"]
        dm_events = [e for e in events if e["uri"] == table_uri(str(lake / "dm_work_7d"))]
        assert len(dm_events) == 1 and dm_events[0]["extra"]["operation"] == "write", dm_events
        assert dm_events[0]["extra"]["query_exchanges"] == 0 and dm_events[0]["source_dag_id"] == PIPELINE
        runs = stack.wait(lambda: maintenance_runs(stack), 120, "the asset-triggered maintenance run")
        waiting = runs[0]["dag_run_id"]
        # one DM commit is not enough (min_commits 2): the sensor defers to the triggerer
        stack.wait(lambda: task_state(stack, MAINTENANCE, waiting, "wait_for_dm_commits") == "deferred", 180,
                   "the maintenance sensor to defer")

        second = trigger(stack, PIPELINE, {"day": "2024-01-02", "events_per_day": EVENTS, "buckets": 4})
        wait_done(stack, PIPELINE, second)
        wait_done(stack, MAINTENANCE, waiting)  # the trigger fired on the second commit: the sensor resumed
        assert "1 triggers currently running" in stack.log_tail("triggerer", 200_000)  # it waited there
        assert task_state(stack, MAINTENANCE, waiting, "wait_for_dm_commits") == "success"
        dm = LakeTable.open(str(lake / "dm_work_7d"))
        assert [e.operation for e in dm.entries_since(0) if e.action == "replace"] == ["execute_clustering"]

        expected = video_oracle.pipeline([("2024-01-01", []), ("2024-01-02", [])], video.Sizes(events=EVENTS))
        cols = ["work_id", "category", "author_id", "plays_7d", "likes_7d", "play_ms_7d", "active_days", "dt"]
        got = dm.to_arrow().to_pandas()[cols].sort_values(["dt", "work_id"]).reset_index(drop=True)
        want = expected["dm_work_7d"][cols].sort_values(["dt", "work_id"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)

        # a retry: clear the second run's DWS and DM tasks and the upserts; they run again, tables unchanged
        before = table_rows(lake)
        response = stack.api.post(f"/api/v2/dags/{PIPELINE}/clearTaskInstances", json={
            "dry_run": False, "dag_run_id": second, "only_failed": False, "include_downstream": True,
            "task_ids": ["upsert_ods_works", "build_dws_work_daily"]})
        assert response.status_code == 200, response.text
        assert {t["task_id"] for t in response.json()["task_instances"]} >= {"build_dws_work_daily",
                                                                              "build_dm_work_7d"}
        wait_done(stack, PIPELINE, second)
        assert table_rows(lake) == before
