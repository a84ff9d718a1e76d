"""CommitCountSensor: poke, defer and come back from the trigger; what it refuses when the DAG is parsed
and what it accepts as a rendered `min_commits`."""

from __future__ import annotations

import datetime as dt

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_lake.sensors.commit_count import CommitCountSensor
from airflow_lake.triggers.commit_count import CommitCountTrigger
from tests.lake.lake_core_helpers import append, make_table


def test_sensor_pokes_and_defers(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(2):
        append(table, "a")
    poke = CommitCountSensor(task_id="s", table=table_path, min_commits=2, since="start")
    result = poke.poke({})  # type: ignore[arg-type]
    assert not isinstance(result, bool) and result.is_done and result.xcom_value["count"] == 2  # type: ignore[index]
    sensor = CommitCountSensor(task_id="s", table=table_path, min_commits=3, deferrable=True, poke_interval=5,
                               timeout=60)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    trigger = deferred.value.trigger
    assert isinstance(trigger, CommitCountTrigger) and trigger.min_commits == 3 and trigger.poke_interval == 5
    assert deferred.value.method_name == "execute_complete" and deferred.value.timeout == dt.timedelta(seconds=60)
    done = sensor.execute_complete({}, {"status": "success", "count": 3, "instants": []})  # type: ignore[arg-type]
    assert done["count"] == 3 and "status" not in done
    with pytest.raises(Exception, match="failed: boom"):
        sensor.execute_complete({}, {"status": "error", "message": "boom"})  # type: ignore[arg-type]
    enough = CommitCountSensor(task_id="s", table=table_path, min_commits=2, deferrable=True)
    assert enough.execute({})["count"] == 2  # type: ignore[arg-type]  # enough already: no deferral


@pytest.mark.parametrize("interval", [0, 0.5])
def test_the_sensor_refuses_a_poke_interval_below_one_second(interval: float) -> None:
    with pytest.raises(ValueError, match=f"poke_interval must be at least 1 second\\(s\\), got {interval!r}"):
        CommitCountSensor(task_id="s", table="/lake/t", poke_interval=interval, deferrable=True)
    assert CommitCountSensor(task_id="s", table="/lake/t", poke_interval=1).poke_interval == 1


def test_a_rendered_min_commits_of_a_whole_float_counts(table_path: str) -> None:
    """`min_commits="{{ params.min_commits }}"` renders "2.0" for a Param given as 2.0 (JSON Schema's integer)."""
    table = make_table(table_path)
    for _ in range(2):
        append(table, "a")
    sensor = CommitCountSensor(task_id="s", table=table_path, min_commits="{{ params.min_commits }}", since="start")
    sensor.min_commits = "2.0"  # as rendered
    result = sensor.poke({})  # type: ignore[arg-type]
    assert not isinstance(result, bool) and result.is_done
    sensor.min_commits = "2.5"
    with pytest.raises(ValueError, match=r"min_commits must be a whole number >= 0, got '2\.5'"):
        sensor.poke({})  # type: ignore[arg-type]
