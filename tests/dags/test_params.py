"""The example DAGs' Params (issue 20, items 5 and the "unclear" Params): what Airflow's validation of a
trigger accepts, the tasks take; what the tasks would refuse, Airflow's validation or the run's first task
refuses before any task writes."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_lake.compat import AirflowFailException
from airflow_lake.examples.video_pipeline import check_params, run_day
from airflow_lake.jobs import run
from airflow_lake.jobs.registry import validate
from airflow_lake.lake import LakeTable
from tests.airflow_stack import migrate_db
from tests.conftest import ROOT

DAGS = ROOT / "dags"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    return dict(bag.dags)


def trigger_check(dag: Any, conf: dict[str, Any]) -> dict[str, Any]:
    """Validate `conf` as Airflow does when a run is triggered (REST, the UI form, `dags trigger`): the
    serialized DAG's params, deep-merged with the conf."""
    from airflow.serialization.serialized_objects import DagSerialization

    served = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    return dict(served.params.deep_merge(conf).validate())


@pytest.mark.parametrize(("dag_id", "conf"), [
    ("lake_ods_to_dm", {"day": ""}),  # the README: empty means the logical date
    ("lake_ods_to_dm", {"day": None}),
    ("lake_ods_to_dm", {"day": "2024-01-03", "backfill_days": ["2024-01-01", "2024-01-02"]}),
    ("lake_ods_to_dm", {"buckets": 8.0, "events_per_day": 3000.0}),
    ("lake_maintenance", {"min_commits": 2.0, "target_file_bytes": 4096.0, "retain_hours": 240.0}),
])
def test_airflow_accepts(dags: dict[str, Any], dag_id: str, conf: dict[str, Any]) -> None:
    assert trigger_check(dags[dag_id], conf)


@pytest.mark.parametrize(("dag_id", "conf", "text"), [
    ("lake_ods_to_dm", {"day": "0001-01-01"}, "does not match"),  # failed only at the DM task, after writes
    ("lake_ods_to_dm", {"day": "2024-02-30"}, "is not a 'date'"),
    ("lake_ods_to_dm", {"day": "24-01-01"}, "'24-01-01'"),
    ("lake_ods_to_dm", {"backfill_days": ["0001-01-01"]}, "does not match"),
    ("lake_ods_to_dm", {"buckets": 8.5}, "is not of type 'integer'"),
    ("lake_maintenance", {"retain_hours": math.nan}, "is not of type 'integer'"),  # NaN passed "minimum: 0"
    ("lake_maintenance", {"retain_hours": math.inf}, "is not of type 'integer'"),
    ("lake_maintenance", {"retain_hours": 0}, "is less than the minimum"),  # clean refuses it: below the tables'
    ("lake_maintenance", {"retain_hours": 24}, "is less than the minimum"),  # clean.retain.hours
    ("lake_maintenance", {"min_commits": int("9" * 401)}, "is greater than the maximum"),
    ("lake_maintenance", {"target_file_bytes": int("9" * 401)}, "is greater than the maximum"),
])
def test_airflow_refuses(dags: dict[str, Any], dag_id: str, conf: dict[str, Any], text: str) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError) as info:
        trigger_check(dags[dag_id], conf)
    assert f"Invalid input for param {next(iter(conf))}" in str(info.value) and text in str(info.value)


def render(task: Any, dag: Any, conf: dict[str, Any], logical: str = "2024-01-03") -> Any:
    """The task's templated fields rendered as a run with `conf` renders them."""
    params = trigger_check(dag, conf)
    moment = pendulum.parse(logical)
    context = {"params": params, "dag_run": SimpleNamespace(logical_date=moment, run_after=moment, conf=conf),
               "ds": logical, "ti": SimpleNamespace(xcom_pull=lambda **_: None)}
    task.render_template_fields(context, jinja_env=dag.get_template_env())
    return task


def test_what_the_schema_accepts_the_tasks_take(dags: dict[str, Any], tmp_path: Path) -> None:
    """`buckets: 8.0` rendered "8.0" / "16.0" (refused as bucket counts); `min_commits: 2.0` and
    `target_file_bytes: 4096.0` rendered "2.0" / "4096.0" (refused by the schedule and the sensor)."""
    pipeline, maintenance = dags["lake_ods_to_dm"], dags["lake_maintenance"]
    for name, count in (("dwd_plays", 16), ("dwd_works", 8)):
        create = render(pipeline.get_task(f"create_{name}"), pipeline, {"buckets": 8.0})
        spec = {**create.build_spec({}), "table": str(tmp_path / name), "request_id": "r"}
        run(None, "create_table", spec)  # the operator's spec through the runner
        assert LakeTable.open(str(tmp_path / name)).spec.bucket.count == count
    conf = {"min_commits": 2.0, "target_file_bytes": 4096.0}
    plan = render(maintenance.get_task("plan_dm_clustering"), maintenance, conf)
    spec = plan.build_spec({})
    assert (spec["min_commits"], spec["target_file_max_bytes"], spec["small_file_limit_bytes"]) == (2, 4096, 4096)
    validate("schedule_clustering", {"table": "/lake/t", **spec})
    sensor = render(maintenance.get_task("wait_for_dm_commits"), maintenance, conf)
    assert sensor._wanted() == 2
    # day "" is the logical date, in every template that uses the day
    dm = render(pipeline.get_task("build_dm_work_7d"), pipeline, {"day": ""}, logical="2024-01-09")
    assert dm.partitions == [{"dt": "2024-01-09"}]
    assert dm.tables["dws"]["filters"] == [["dt", ">=", "2024-01-03"], ["dt", "<=", "2024-01-09"]]
    assert "'2024-01-09' AS dt" in dm.query


def test_the_run_check_refuses_future_days_before_any_task_writes() -> None:
    """A batch's version is its day (YYYYMMDD): a backfill day after the run's day (2031-07-01) outranked every
    later daily batch for good."""
    run_of = SimpleNamespace(logical_date=pendulum.datetime(2024, 1, 9), run_after=pendulum.datetime(2024, 1, 9))
    today = dt.date(2024, 1, 10)
    assert check_params({"day": "", "backfill_days": ["2024-01-02", "2024-01-09", "2024-01-01"]}, run_of,
                        today) == {"day": "2024-01-09", "backfill_days": ["2024-01-01", "2024-01-02"]}
    assert run_day({"day": ""}, run_of) == "2024-01-09" and run_day({"day": None}, run_of, -6) == "2024-01-03"
    for params, text in [
        ({"day": "2024-01-03", "backfill_days": ["2031-07-01"]},
         "backfill_days[0]: 2031-07-01 is after the run's day 2024-01-03: its version would outrank every later "
         "daily batch. Fix: backfill only days up to 2024-01-03"),
        ({"day": None, "backfill_days": ["2024-01-01", "2024-01-10"]}, "backfill_days[1]: 2024-01-10 is after"),
        ({"day": "2031-07-01"}, "day: 2031-07-01 is in the future (today is 2024-01-10 UTC)"),
        ({"day": "1899-12-31"}, "day: 1899-12-31 is outside 1900-01-01..2999-12-31"),
        ({"day": "0001-01-01"}, "day: 0001-01-01 is outside"),
        ({"day": "someday"}, "day: 'someday' is not a date. Fix: give YYYY-MM-DD."),
    ]:
        with pytest.raises(ValueError) as info:
            check_params(params, run_of, today)
        assert text in str(info.value), str(info.value)
    assert check_params({"day": "2024-01-11"}, run_of, today)["day"] == "2024-01-11"  # tomorrow, somewhere


def test_an_unknown_param_key_is_refused_before_any_task_writes(dags: dict[str, Any]) -> None:
    """Airflow takes a conf key that is no Param in silence (issue 33, item 8: a misspelt `dayy` ran with the
    default day): the run's first check refuses it, naming the key and the Params."""
    from airflow_lake.examples.video_pipeline import PARAM_NAMES

    pipeline = dags["lake_ods_to_dm"]
    assert set(pipeline.params) == set(PARAM_NAMES)  # the check knows the DAG's Params
    conf = {"dayy": "2024-01-03"}
    params = trigger_check(pipeline, conf)  # Airflow accepts it
    run_of = SimpleNamespace(logical_date=pendulum.datetime(2024, 1, 9), run_after=pendulum.datetime(2024, 1, 9),
                             conf=conf)
    with pytest.raises(ValueError, match=r"^dayy: unknown Param .* Fix: use only day, events_per_day, buckets, "
                       "backfill_days"):
        check_params(params, run_of, dt.date(2024, 1, 10))
    with pytest.raises(ValueError, match=r"^bukets: unknown Param"):
        check_params({"day": None}, SimpleNamespace(logical_date=run_of.logical_date, conf={"bukets": 8}),
                     dt.date(2024, 1, 10))
    good = {"day": "2024-01-03"}
    assert check_params(trigger_check(pipeline, good), SimpleNamespace(logical_date=run_of.logical_date, conf=good),
                        dt.date(2024, 1, 10))["day"] == "2024-01-03"



def test_the_maintenance_dag_refuses_an_unknown_param_key_in_its_first_task(dags: dict[str, Any]) -> None:
    """The maintenance DAG too (issue 33, item 8): its first task refuses a conf key that is no Param, and every
    other task waits for it."""
    from airflow_lake.examples.video_pipeline import MAINTENANCE_PARAM_NAMES

    maintenance = dags["lake_maintenance"]
    assert set(maintenance.params) == set(MAINTENANCE_PARAM_NAMES)
    check = maintenance.get_task("check_params")
    assert check.upstream_task_ids == set()
    assert set(maintenance.task_dict) - {"check_params"} <= check.get_flat_relative_ids(upstream=False)
    conf = {"min_comits": 5}
    params = trigger_check(maintenance, conf)  # Airflow accepts it
    run_of = SimpleNamespace(conf=conf)
    with pytest.raises(AirflowFailException, match=r"^min_comits: unknown Param .* Fix: use only min_commits, "
                       "layout, target_file_bytes, retain_hours"):
        check.python_callable(params=params, dag_run=run_of)
    assert check.python_callable(params=trigger_check(maintenance, {"layout": "HILBERT"}),
                                 dag_run=SimpleNamespace(conf={"layout": "HILBERT"})) is None

@pytest.mark.slow
def test_a_future_backfill_day_fails_the_run_before_anything_is_written(tmp_path: Path) -> None:
    """The real DAG, by `airflow dags test`: the first task refuses the backfill day; no table is created, nothing
    lands, no upsert runs."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW_LAKE_ROOT": str(tmp_path / "lake"),
           "AIRFLOW_LAKE_LANDING": str(tmp_path / "landing")}
    migrate_db(env)
    conf = {"day": "2024-01-03", "backfill_days": ["2031-07-01"], "events_per_day": 100}
    done = subprocess.run([AIRFLOW, "dags", "test", "lake_ods_to_dm", "2024-01-03", "-c", json.dumps(conf)],
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    log = done.stdout + done.stderr
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        states = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = 'lake_ods_to_dm'"))
    assert states.pop("check_params") == "failed", (states, log[-5000:])
    assert set(states.values()) == {"upstream_failed"}, states  # nothing else ran
    assert "backfill_days[0]: 2031-07-01 is after the run's day 2024-01-03" in log
    assert not (tmp_path / "lake").exists() and not (tmp_path / "landing").exists()
