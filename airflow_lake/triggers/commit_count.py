"""`CommitCountTrigger`: fires once a lake table has had `min_commits` commits (for `CommitCountSensor`).

It reads only the table's timeline, in a worker thread (`asyncio.to_thread`): the triggerer's event loop
never blocks on file I/O. On an object store too: s3fs (gcsfs, adlfs) sends its requests from fsspec's own I/O
thread and event loop, and the worker thread waits for them (tests/triggers/test_commit_count_stores.py measures the
triggerer's loop while a poll reads a table on S3). The triggerer reaches the store with its own environment:
the store's credentials and endpoint must be configured for it as for the workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_lake.sensors.commit_count_check import MIN_POKE_INTERVAL, check_actions, count_commits


class CommitCountTrigger(BaseTrigger):
    """Poll the timeline every `poke_interval` seconds until `min_commits` commits are counted.

    :param table: path of the lake table.
    :param min_commits: commits needed.
    :param since: "last_clustering", "start" or an instant id.
    :param actions: actions counted (default commit and upsert; one name or a list of known actions).
    :param poke_interval: seconds between checks, at least 1 (a smaller one is raised to 1).
    """

    def __init__(self, table: str, min_commits: int, since: str = "last_clustering",
                 actions: str | Sequence[str] | None = None, poke_interval: float = 60.0) -> None:
        super().__init__()
        self.table = table
        self.min_commits = min_commits
        self.since = since
        self.actions = check_actions(actions)
        # raised, not refused: a trigger stored by an older version must still run (just not spin)
        self.poke_interval = max(float(poke_interval), MIN_POKE_INTERVAL)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and arguments, for the triggerer to rebuild it."""
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table": self.table, "min_commits": self.min_commits, "since": self.since,
                 "actions": self.actions, "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Yield one event: success with the count, or an error with its message."""
        while True:
            try:
                found = await asyncio.to_thread(count_commits, self.table, self.since, self.actions)
            except Exception as err:  # a missing table, a bad instant id: the sensor raises it
                yield TriggerEvent({"status": "error", "message": f"{type(err).__name__}: {err}"})
                return
            if found["count"] >= self.min_commits:
                yield TriggerEvent({"status": "success", **found})
                return
            self.log.info("%s: %d of %d commit(s) since %s", self.table, found["count"], self.min_commits,
                          found["since_instant"] or self.since)
            await asyncio.sleep(self.poke_interval)
