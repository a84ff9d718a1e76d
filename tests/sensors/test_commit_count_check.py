"""CommitCountSensor and its trigger refuse actions that would make them wait for good (issue 20, item 21)."""
# mypy: disable-error-code="index"

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_lake.sensors.commit_count import CommitCountSensor
from airflow_lake.triggers.commit_count import CommitCountTrigger
from tests.lake.lake_core_helpers import append, make_table

KNOWN = "alter, clean, commit, create, replace, restore, rollback, upsert"


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
