"""CommitCountSensor and its trigger refuse what would make them wait for good or spin (issue 20, item 21)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_lake.lake import LakeTable
from airflow_lake.sensors.commit_count import CommitCountSensor
from airflow_lake.triggers.commit_count import CommitCountTrigger
from tests.lake.lake_core_helpers import append, make_table

KNOWN = "clean, commit, create, replace, rollback, upsert"


def test_one_action_given_as_a_string_counts_that_action(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(2):
        append(table, "a")
    sensor = CommitCountSensor(task_id="s", table=table_path, min_commits=2, since="start", actions="commit")
    assert sensor.actions == ["commit"]  # not ["c", "o", "m", ...]
    result = sensor.poke({})  # type: ignore[arg-type]
    assert not isinstance(result, bool) and result.is_done and result.xcom_value["count"] == 2
    # deferrable: the trigger counts the same action
    waiting = CommitCountSensor(task_id="w", table=table_path, min_commits=3, since="start", actions="commit",
                                deferrable=True, poke_interval=5)
    with pytest.raises(TaskDeferred) as deferred:
        waiting.execute({})  # type: ignore[arg-type]
    trigger = deferred.value.trigger
    assert isinstance(trigger, CommitCountTrigger) and trigger.actions == ["commit"]
    assert trigger.serialize()[1]["actions"] == ["commit"]


@pytest.mark.parametrize(("actions", "message"), [
    (["comit"], f"actions: 'comit' is not an action of the timeline; use {KNOWN}"),
    (["commit", "upsert", "merge"], "actions: 'merge' is not an action"),
    ("comit", "actions: 'comit' is not an action"),
    ([], f"actions must name at least one of {KNOWN}"),
    ("", "actions: '' is not an action"),
])
def test_unknown_or_no_actions_are_refused_when_the_dag_is_parsed(actions: Any, message: str) -> None:
    """Such a sensor counted 0 commits for good ("0 of 1 commit(s)"); with soft_fail it skipped in silence."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CommitCountSensor(task_id="s", table="/lake/t", actions=actions, soft_fail=True)
    with pytest.raises(ValueError, match="actions"):
        CommitCountTrigger("/lake/t", 1, actions=actions)


@pytest.mark.parametrize("interval", [0, 0.5])
def test_the_sensor_refuses_a_poke_interval_below_one_second(interval: float) -> None:
    with pytest.raises(ValueError, match=f"poke_interval must be at least 1 second\\(s\\), got {interval!r}"):
        CommitCountSensor(task_id="s", table="/lake/t", poke_interval=interval, deferrable=True)
    assert CommitCountSensor(task_id="s", table="/lake/t", poke_interval=1).poke_interval == 1


def test_the_trigger_polls_at_most_once_a_second(table_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    """poke_interval=0 (a trigger stored by an older version) read the timeline ~3,600 times a second."""
    LakeTable.create(table_path, {"schema": "id BIGINT"})
    trigger = CommitCountTrigger(table_path, 1, poke_interval=0)
    assert trigger.poke_interval == 1.0 and trigger.serialize()[1]["poke_interval"] == 1.0

    async def wait() -> None:
        async for _ in trigger.run():
            raise AssertionError("no commit was made: the trigger must keep waiting")

    capsys.readouterr()
    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(wait(), 2.5))
    out = capsys.readouterr()
    polls = (out.out + out.err).count("0 of 1 commit(s)")  # the trigger logs each poll (structlog: stdout)
    assert 2 <= polls <= 3, polls


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
