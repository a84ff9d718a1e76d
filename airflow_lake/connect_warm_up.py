"""Warm a Spark Connect server up once it has started, so that the first lake task does not pay for its cold JVM.

On a server that has just started, the first session's first Python job (`mapInArrow`, which every task's check of
the workers' airflow_lake runs: Spark's Python runner, Arrow, the Python daemon) and its first Parquet write run on a
cold JVM (classes loading, nothing compiled yet) and a cold page cache, and cost several times what they cost the
next task (docs/benchmarks.md section 9). `airflow-lake connect-server` therefore starts this in the background:
when the server's port opens, it opens a session as a task does (its settings, the package, the workers' check: a
pass is remembered for this user's tasks on this host, which then skip it), runs a one-row Python job and a lake
write of 10 rows into a table in a temporary directory on the server's host (deleted after; with a cluster master,
whose executors could not write there, a 10-row shuffle and sort instead), then ends. Tasks never wait for it, and it
never stops the server: what goes wrong is logged, and the first task then pays as before.

    python -m airflow_lake.connect_warm_up sc://127.0.0.1:15002 [--wait 600] [--server-pid PID]
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
WAIT_SECONDS = 600.0  # a server on a busy machine may take minutes to open its port


def one_row(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` function of the warm-up: one row, like the workers' check (it needs only pyarrow)."""
    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"version": ["warm-up"], "file": [""]})


def wait_for_port(host: str, port: int, timeout: float, server_pid: int | None = None) -> bool:
    """Whether `host:port` accepts connections within `timeout` seconds (False at once when the process
    `server_pid` is gone: a server that failed to start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex((host, port)) == 0:
                return True
        if server_pid is not None and not _alive(server_pid):
            return False
        time.sleep(0.5)
    return False


def _exit_with(pid: int) -> None:
    """End this process as soon as the process `pid` (the server) is gone: a client of a stopped server would
    retry its connection for minutes."""
    while _alive(pid):
        time.sleep(1.0)
    log.warning("airflow-lake warm-up: the server (pid %d) ended; not warmed up", pid)
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: it exists
        return True
    return True


def warm_up(url: str) -> dict[str, float]:
    """Run the first steps of a lake task once on the server at `url` (`sc://host:port`); seconds per step.

    The session is opened as a task opens it (`ConnectClient`: its settings, the package shipped, the workers'
    check, whose pass is remembered for this user's later tasks on this host), then a one-row Python job and a lake
    write (a local master) or a shuffle (a cluster's) run in it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_lake.hooks.connect import ConnectClient
    from airflow_lake.jobs.identity import IDENTITY_SCHEMA
    from airflow_lake.jobs.runner import run
    from airflow_lake.lake.table import LakeTable

    seconds: dict[str, float] = {}
    started = time.monotonic()
    client = ConnectClient(url, {})
    spark = client.open()
    try:
        seconds["session"] = time.monotonic() - started
        spark.range(1).mapInArrow(one_row, IDENTITY_SCHEMA).collect()  # (when the check was remembered already)
        seconds["python_job"] = time.monotonic() - started - sum(seconds.values())
        if str(spark.conf.get("spark.master", "")).startswith("local"):
            with tempfile.TemporaryDirectory(prefix="airflow-lake-warm-up-") as tmp:
                source = os.path.join(tmp, "rows.parquet")
                pq.write_table(pa.table({"id": pa.array(range(10), pa.int64()),
                                         "v": [float(i) for i in range(10)]}), source)
                table = LakeTable.create(os.path.join(tmp, "table"), {"schema": "id BIGINT, v DOUBLE",
                                                                      "bucket": {"columns": ["id"], "count": 4}})
                run(spark, "write", {"table": table.url, "source": {"path": source}})
            seconds["lake_write"] = time.monotonic() - started - sum(seconds.values())
        else:  # executors on other hosts would write where this host cannot see (nor delete): the shuffle only
            spark.range(10).repartition(4, "id").sortWithinPartitions("id").collect()
            seconds["shuffle"] = time.monotonic() - started - sum(seconds.values())
    finally:
        client.close()
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    """Wait for the server's port, warm it up, log how long it took; 0 whatever happened (never fails a server)."""
    # its own handler: importing Airflow (the Connect client's errors) reconfigures the root logger
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    parser = argparse.ArgumentParser(prog="airflow-lake-connect-warm-up", description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="sc://host:port of the server")
    parser.add_argument("--wait", type=float, default=WAIT_SECONDS, help="seconds to wait for the server's port")
    parser.add_argument("--server-pid", type=int, default=None, help="stop waiting when this process is gone")
    args = parser.parse_args(argv)
    where = urlparse(args.url.replace("sc://", "http://", 1))
    if not wait_for_port(where.hostname or "127.0.0.1", where.port or 15002, args.wait, args.server_pid):
        log.warning("airflow-lake warm-up: %s did not open (within %.0f s, or its server ended); not warmed up",
                    args.url, args.wait)
        return 0
    if args.server_pid is not None:
        threading.Thread(target=_exit_with, args=(args.server_pid,), daemon=True).start()
    try:
        seconds = warm_up(args.url)
    except Exception as err:  # the server is what matters: its first task then pays the warm-up itself
        log.warning("airflow-lake warm-up of %s failed (%s); the first task pays for the cold server", args.url, err)
        return 0
    log.info("airflow-lake warm-up of %s done in %.1f s: %s", args.url, sum(seconds.values()),
             {k: round(v, 2) for k, v in seconds.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
