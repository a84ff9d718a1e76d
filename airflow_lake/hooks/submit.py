"""`LakeSubmitHook`: the Spark provider's `SparkSubmitHook`, reading the job's own word from its output.

The job prints its process group when it starts and its result or failure when it ends, each line ending
with this run's nonce (the lines of `airflow_lake.jobs.protocol`). This subclass
reads those lines as they stream by, so the caller learns the outcome from the job itself, not from the
text of the provider's exception; lines without the nonce (Spark echoing a data value, say) are only logged.
In cluster deploy mode the driver's output never reaches spark-submit: `outcome` then stays empty.

`kill_job` stops the job while, and only while, it can still be ours: spark-submit runs in a session of its
own, so its pid is also its process group's id, and that id cannot name another process until spark-submit
is reaped. The provider reaps it only after the output ends; the output's end and a kill take one lock.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_lake.jobs.protocol import Outcome


class LakeSubmitHook(SparkSubmitHook):
    """A SparkSubmitHook that collects the job's STARTED / RESULT / FAILED lines into `outcome`.

    :param nonce: the run's nonce (also given to the job as `$AIRFLOW_LAKE_RUN_NONCE`); only lines ending
        with it are the job's.
    """

    def __init__(self, *args: Any, nonce: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcome = Outcome(nonce)
        self._lock = threading.RLock()  # re-entrant: on_kill runs in a signal handler of the reading thread
        self._live = False  # spark-submit started and its output has not ended: it is not reaped yet
        self._kill_requested = False

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        with self._lock:
            self._live = self._submit_sp is not None
            if self._kill_requested:  # killed while spark-submit was being started
                self._kill_group()
        super()._process_spark_submit_log(self.outcome.watch(itr))  # logged without the nonce
        # The output ended: from here on the provider reaps spark-submit and its pid may name another
        # process. (Raising instead, it reaps nothing: the process is still ours to kill.)
        with self._lock:
            self._live = False

    @property
    def running(self) -> bool:
        """Whether spark-submit was started and its output has not ended (nor has it been killed)."""
        return self._live

    def kill_job(self) -> bool:
        """SIGKILL spark-submit's process group if it still runs (in client mode the driver and its Python
        workers are in it; if spark-submit is still starting, as soon as it has started), then let the
        provider stop what it tracks (a driver on a cluster). Call it only while `submit` runs.

        Returns True when the job's driver was in the killed group, so no step of it runs any more (its
        pending instant may be rolled back at once).
        """
        with self._lock:
            self._kill_requested = True
            was_live = self._live
            killed = self._kill_group()
        # Not after a local job's output ended: the provider would signal spark-submit's pid, which its wait()
        # may be reaping at that very moment.
        if was_live or self._driver_id or self._yarn_application_id or self._kubernetes_driver_pod:
            self.on_kill()
        return killed

    def _kill_group(self) -> bool:
        """Kill the group if spark-submit is still ours (call with the lock held); whether the job's driver
        was in it."""
        process = self._submit_sp
        if not self._live or process is None or process.returncode is not None:
            return False
        self._live = False  # one kill: after it the provider may reap the process at any time
        try:
            if os.getpgid(process.pid) != process.pid:
                process.kill()  # not started in a session of its own: its group is not the job's alone
                return False
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return False
        started = self.outcome.started
        return started is not None and started["pgid"] == process.pid
