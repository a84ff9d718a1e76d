"""CommitCountTrigger: round-trips through `serialize()`, fires once the commits arrive, reports errors as
an event, and never polls faster than once a second."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.triggers.commit_count import CommitCountTrigger
from tests.lake.lake_core_helpers import append, make_table


def test_the_trigger_serializes_to_itself() -> None:
    trigger = CommitCountTrigger("/lake/t", 5, since="20240301000000000", actions=["commit"], poke_interval=2.5)
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (path, kwargs)
    assert kwargs == {"table": "/lake/t", "min_commits": 5, "since": "20240301000000000", "actions": ["commit"],
                      "poke_interval": 2.5}


def first_event(trigger: CommitCountTrigger, timeout: float = 30) -> dict[str, Any]:
    async def take() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("no event")
    return asyncio.run(asyncio.wait_for(take(), timeout))


def test_the_trigger_fires_when_commits_arrive_and_reports_errors(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "a")
    late = threading.Timer(1.0, lambda: [append(LakeTable.open(table_path), "a") for _ in range(2)])
    late.start()
    started = time.monotonic()
    event = first_event(CommitCountTrigger(table_path, 3, poke_interval=0.2))
    late.join()
    assert event["status"] == "success" and event["count"] == 3 and time.monotonic() - started >= 1.0
    assert len(event["instants"]) == 3 and event["since_instant"] is None
    missing = first_event(CommitCountTrigger(table_path + "-nope", 1, poke_interval=0.2))
    assert missing["status"] == "error" and "no lake table" in missing["message"]


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
