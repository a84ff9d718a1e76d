"""Named fault points, so crash tests can stop a real writer at an exact step and SIGKILL it.

Inert unless AIRFLOW_LAKE_FAULT_POINT names the point. Then the process writes the file named by
AIRFLOW_LAKE_FAULT_FLAG (so the test knows where it stands) and sleeps until it is killed.
"""

from __future__ import annotations

import os
import time

POINTS = ("before_write", "during_write", "before_commit", "after_commit")


def reach(point: str) -> None:
    """Stop here forever if a test asked for this point."""
    if os.environ.get("AIRFLOW_LAKE_FAULT_POINT") != point:
        return
    flag = os.environ.get("AIRFLOW_LAKE_FAULT_FLAG")
    if flag:
        with open(flag, "w") as handle:
            handle.write(f"{point} {os.getpid()}\n")
    while True:  # the test kills us
        time.sleep(1)
