"""A writer's heartbeat: a file it touches while alive, so others can tell a dead writer from a slow one."""

from __future__ import annotations

import logging
import threading

from airflow_lake.lake.format.instants import heartbeat_file, requested_file
from airflow_lake.lake.format.storage import Storage

log = logging.getLogger(__name__)


class Heartbeat:
    """Touches an instant's heartbeat file every `interval` seconds on a daemon thread."""

    def __init__(self, storage: Storage, instant: str, interval: float) -> None:
        self._storage = storage
        self._instant = instant
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lake-heartbeat-{instant}", daemon=True)

    def start(self, *, beat: bool = True) -> None:
        """Beat now (`beat=False`: the caller just did, e.g. `instants.mark_inflight`) and keep beating."""
        if beat:
            self._storage.touch(heartbeat_file(self._instant))
        self._thread.start()

    def stop(self) -> None:
        """Stop beating (the file stays until the instant's pending files are removed)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._interval + 5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if not self._storage.is_file(requested_file(self._instant)):  # (on a store one HEAD)
                    return  # rolled back by another process: do not bring the heartbeat file back
                self._storage.touch(heartbeat_file(self._instant))
            except OSError:  # a missed beat is not fatal; a stale one gets us rolled back
                log.warning("heartbeat of instant %s failed", self._instant, exc_info=True)
