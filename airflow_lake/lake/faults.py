"""Named fault points, so crash tests can stop a real writer at an exact step and SIGKILL it.

Inert unless AIRFLOW_LAKE_FAULT_POINT names the point. Then the process writes the file named by
AIRFLOW_LAKE_FAULT_FLAG (so the test knows where it stands) and sleeps until it is killed.
"""

from __future__ import annotations

import os
import time

# (A kill while Spark's writer runs needs no point: the crash test watches the staging area for it.)
# before_query: an incremental job fixed its upstreams' windows and read none of their changes (`sources.incremental`)
POINTS = ("before_query", "after_request", "before_write", "during_place", "before_commit", "after_commit",
          "before_publish", "mid_publish")  # the last two: publishing a landed entry (`lake.publish`)
_ENV = "AIRFLOW_LAKE_FAULT_POINT"


def armed(point: str) -> bool:
    """True if a test asked to stop at `point`."""
    return os.environ.get(_ENV) == point


def reach(point: str) -> None:
    """Stop here forever if a test asked for this point; wait here for others if a test asked for a
    rendezvous at it."""
    _rendezvous(point)
    if not armed(point):
        return
    flag = os.environ.get("AIRFLOW_LAKE_FAULT_FLAG")
    if flag:
        with open(flag, "w") as handle:
            handle.write(f"{point} {os.getpid()}\n")
    while True:  # the test kills us
        time.sleep(1)


def _rendezvous(point: str) -> None:
    """With AIRFLOW_LAKE_RENDEZVOUS_POINT = `point`, wait until AIRFLOW_LAKE_RENDEZVOUS_COUNT processes
    reached it (each leaves a file in AIRFLOW_LAKE_RENDEZVOUS_DIR), at most two minutes: a test uses it to
    make concurrent writers overlap for sure instead of by luck."""
    directory = os.environ.get("AIRFLOW_LAKE_RENDEZVOUS_DIR")
    if not directory or os.environ.get("AIRFLOW_LAKE_RENDEZVOUS_POINT") != point:
        return
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, str(os.getpid())), "w"):
        pass
    deadline = time.monotonic() + 120
    while len(os.listdir(directory)) < int(os.environ.get("AIRFLOW_LAKE_RENDEZVOUS_COUNT", "2")):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
