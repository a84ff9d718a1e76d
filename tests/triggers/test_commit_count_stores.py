"""CommitCountSensor and CommitCountTrigger on a table on an object store (S3, GCS, Azure: real servers on
127.0.0.1, `tests/stores.py`): the sensor pokes and defers with the table's URL, and the trigger, polling from its
own event loop, fires once a commit lands between two of its polls — while that loop keeps ticking: each poll's
reads (s3fs's, gcsfs's or adlfs's requests, which run on fsspec's own I/O thread and loop) happen in a worker thread
(`asyncio.to_thread`), never on the loop."""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_lake.lake import LakeTable
from airflow_lake.sensors.commit_count import CommitCountSensor
from airflow_lake.sensors.commit_count_check import count_commits
from airflow_lake.triggers.commit_count import CommitCountTrigger
from tests.lake.lake_core_helpers import append, make_table
from tests.stores import StoreServer

ENTRIES = 40  # log entries after the create, no checkpoint: each poll reads them all (≈ 0.3 s here)
TICK = 0.01


def test_the_sensor_pokes_and_defers_with_the_tables_url(store_root: str) -> None:
    table = make_table(store_root)
    append(table, "a")
    poke = CommitCountSensor(task_id="s", table=store_root, min_commits=1, since="start")
    result = poke.poke({})  # type: ignore[arg-type]
    assert not isinstance(result, bool) and result.is_done
    assert result.xcom_value["count"] == 1 and result.xcom_value["table"] == store_root  # type: ignore[index]
    sensor = CommitCountSensor(task_id="s", table=store_root, min_commits=2, deferrable=True, poke_interval=5,
                               timeout=60)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    trigger = deferred.value.trigger
    assert isinstance(trigger, CommitCountTrigger) and trigger.table == store_root and trigger.min_commits == 2
    path, kwargs = trigger.serialize()  # what the triggerer stores and rebuilds: the URL, as given
    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name)(**kwargs).serialize() == (path, kwargs)
    assert kwargs["table"] == store_root


def test_the_trigger_fires_after_a_commit_lands_between_polls_without_blocking_its_loop(
        store: StoreServer, store_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(store_root, {"checkpoint.interval": "1000"})
    for _ in range(ENTRIES):
        append(table, "a")
    polls = []
    for _ in range(2):  # what one poll costs when the loop is not watching
        started = time.perf_counter()
        assert count_commits(store_root, "start", None)["count"] == ENTRIES
        polls.append(time.perf_counter() - started)
    poll = min(polls)
    wanted = ENTRIES + 1
    trigger = CommitCountTrigger(store_root, wanted, since="start", poke_interval=1)
    waiting = f"{ENTRIES} of {wanted} commit(s)"
    capsys.readouterr()

    async def scenario() -> tuple[dict[str, Any], str, float, float, float, str]:
        gaps: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(TICK)
                now = time.perf_counter()
                gaps.append(now - last - TICK)
                last = now

        async def first_event() -> dict[str, Any]:
            async for event in trigger.run():
                return dict(event.payload)
            raise AssertionError("no event")

        ticking = asyncio.create_task(ticker())
        firing = asyncio.create_task(first_event())
        seen = ""
        deadline = time.monotonic() + 60
        while waiting not in seen:  # the trigger has polled (and found too few): it sleeps until the next poll
            assert not firing.done(), firing.result()
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.02)
            captured = capsys.readouterr()
            seen += captured.out + captured.err
        entry, _ = await asyncio.to_thread(append, LakeTable.open(store_root), "b")  # lands between two polls
        landed = time.monotonic()
        event = await asyncio.wait_for(firing, 60)
        fired = time.monotonic()
        stop.set()
        await ticking
        return event, entry.instant, landed, fired, max(gaps), seen

    event, instant, landed, fired, lag, seen = asyncio.run(scenario())
    assert event["status"] == "success" and event["count"] == wanted and event["table"] == store_root
    assert event["instants"][-1] == instant  # the commit that landed between the polls
    assert seen.count(waiting) >= 1 and fired - landed < 1 + 10 * poll + 5  # the next poll saw it
    # each poll read ENTRIES log entries from the store, yet the loop never stalled for a fraction of one. On
    # fake-gcs-server a poll is too quick (≈ 0.03 s) to tell a stall from the machine's noise: not judged there; the
    # Azure SDK holds the GIL longer between requests than botocore (stalls up to half a poll seen): 3/4 there.
    print(f"{store.name}: one poll {poll:.3f} s; the loop's longest stall {lag:.3f} s")
    if store.name != "gcs":
        # (a poll of 0.099 s was seen on Azure: a stall of the whole poll is still well above the bound below)
        assert poll > 0.05, polls
        assert lag < (poll / 2 if store.name == "s3" else 0.75 * poll), (lag, poll)


def test_the_trigger_reports_a_missing_table_on_the_store(store_root: str) -> None:
    async def first() -> dict[str, Any]:
        async for event in CommitCountTrigger(store_root + "/nope", 1, poke_interval=1).run():
            return dict(event.payload)
        raise AssertionError("no event")

    event = asyncio.run(asyncio.wait_for(first(), 60))
    assert event["status"] == "error" and "no lake table" in event["message"]
