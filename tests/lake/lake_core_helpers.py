"""Helpers for the metadata-only tests of the lake core: tables and commits without Spark.

Commits go through the transaction API with synthetic `DataFile` entries. Where a test needs the data
files on disk (rollback, clean), `put_file` creates a small dummy file the way the writer does: the
marker `_lake/markers/<instant>/<relative path>` first, then the file itself.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_lake.lake import ColumnStats, DataFile, LakeTable
from airflow_lake.lake.commit.transaction import Transaction
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.instants import heartbeat_file, inflight_file, markers_dir, requested_file
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.spec.partitions import partition_dir

# Small heartbeat settings, so a dead writer is recognised within a second.
FAST = {"heartbeat.interval.seconds": "0.2", "heartbeat.timeout.seconds": "1"}
_counter = itertools.count()


def make_table(path: str, properties: Mapping[str, str] | None = None, *, schema: str = "id BIGINT, dt STRING",
               partition_by: Iterable[str] = ("dt",), **extra: Any) -> LakeTable:
    """Create a table with fast heartbeats (and any extra spec fields)."""
    return LakeTable.create(path, {"schema": schema, "partition_by": list(partition_by),
                                   "properties": {**FAST, **(properties or {})}, **extra})


def data_file(txn: Transaction | str, part: str | None = "a", *, rows: int = 10, lo: int = 0,
              hi: int | None = None, size: int = 100, stats: Mapping[str, ColumnStats] | None = None
              ) -> DataFile:
    """A synthetic data file of `txn` in partition dt=`part` (None: an unpartitioned table)."""
    instant = txn if isinstance(txn, str) else txn.instant
    name = f"part-{instant}-{next(_counter):06d}.parquet"
    path = name if part is None else f"{partition_dir(['dt'], {'dt': part})}/{name}"
    partition = {} if part is None else {"dt": part}
    if stats is None:
        stats = {"id": ColumnStats(lo, lo + rows - 1 if hi is None else hi, 0)}
    return DataFile(path=path, partition=partition, rows=rows, bytes=size, instant=instant, stats=stats)


def put_file(table: LakeTable, data: DataFile, content: bytes = b"PAR1 dummy PAR1") -> str:
    """Create `data` on disk as the writer would: marker first, then the file. Returns its absolute path."""
    table.storage.touch(f"{markers_dir(data.instant)}/{data.path}")
    target = table.storage.path(data.path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as handle:
        handle.write(content)
    return target


def on_disk(table: LakeTable, data: DataFile | str) -> bool:
    """True if the data file exists."""
    path = data if isinstance(data, str) else data.path
    return os.path.exists(table.storage.path(path))


def append(table: LakeTable, part: str = "a", *, files: int = 1, disk: bool = False, **kwargs: Any
           ) -> tuple[LogEntry, list[DataFile]]:
    """One append commit of `files` synthetic files into partition `part`."""
    txn = table.begin("commit", "write")
    added = [data_file(txn, part, **kwargs) for _ in range(files)]
    if disk:
        for item in added:
            put_file(table, item)
    return txn.commit(added=added), added


def live_paths(table: LakeTable, as_of: int | str | None = None) -> set[str]:
    """Paths of the live files of a snapshot."""
    return {f.path for f in table.snapshot(as_of).files}


def pending_names(table: LakeTable, instant: str) -> list[str]:
    """Every metadata file an unfinished instant keeps: pending files, heartbeat, markers."""
    names = [n for n in table.storage.list_dir(paths.PENDING) if n.startswith(instant)]
    if table.storage.exists(heartbeat_file(instant)):
        names.append("heartbeat")
    names.extend(table.storage.walk_files(markers_dir(instant)))
    return names


def backdate(table: LakeTable, instant: str, seconds: float) -> None:
    """Make an instant's pending files and heartbeat look `seconds` old (its heartbeat must be stopped)."""
    when = time.time() - seconds
    for rel in (requested_file(instant), inflight_file(instant), heartbeat_file(instant)):
        path = table.storage.path(rel)
        if os.path.exists(path):
            os.utime(path, (when, when))
