"""The lake core: tables, timeline, snapshots and commits. Imports nothing from Airflow.

Rooms, lowest first; a room imports only rooms below it (`tests/lake/test_rooms.py` checks it):
- the floor: `errors`, `faults`;
- `spec/`: the table spec, types, partitions, bucketing, merge operators, strict reading;
- `format/`: the table on disk: paths, storage, log, instants, data files, state, checkpoints, snapshots, filters;
- `commit/` (the commit protocol) and `spark/` (the Spark side), side by side, neither importing the other;
- the operations: `write/`, `upsert/`, `buckets/`, `clustering/`, `delete/`, `alter/`, `maintenance/` (clean,
  orphan removal, restore);
- `changes/`: the changes between two snapshots (the commits of a window, read as inserted, deleted and updated
  rows), over the operations' reads;
- `table.py`: `LakeTable`, the one door for users, over all of the above;
- `sources/`: what a job reads, opening other tables through the door.
See docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import (
    LakeChangesUnavailable,
    LakeCommitConflict,
    LakeError,
    LakeInstantRolledBack,
    LakeSchemaError,
    LakeSnapshotNotFound,
    LakeSpecError,
    LakeTableExists,
    LakeTableNotFound,
    LakeUnsafePath,
)

if TYPE_CHECKING:
    from airflow_lake.lake.format.data_files import ColumnStats, DataFile
    from airflow_lake.lake.format.instants import Instant
    from airflow_lake.lake.format.snapshots import Snapshot
    from airflow_lake.lake.spark.scan import Scan
    from airflow_lake.lake.spec.table_spec import BucketSpec, Column, TableSpec
    from airflow_lake.lake.table import LakeTable

# The door's names load on first use: an Airflow DAG file that imports a light module of the core (errors, storage)
# must not pull in pyarrow through `LakeTable` at every parse (tests/test_parse_light.py).
_LAZY = {
    "ColumnStats": "airflow_lake.lake.format.data_files", "DataFile": "airflow_lake.lake.format.data_files",
    "Instant": "airflow_lake.lake.format.instants", "Snapshot": "airflow_lake.lake.format.snapshots",
    "Scan": "airflow_lake.lake.spark.scan", "BucketSpec": "airflow_lake.lake.spec.table_spec",
    "Column": "airflow_lake.lake.spec.table_spec", "TableSpec": "airflow_lake.lake.spec.table_spec",
    "LakeTable": "airflow_lake.lake.table",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BucketSpec", "Column", "ColumnStats", "DataFile", "Instant", "LakeChangesUnavailable", "LakeCommitConflict",
    "LakeError", "LakeInstantRolledBack", "LakeSchemaError", "LakeSnapshotNotFound", "LakeSpecError", "LakeTable",
    "LakeTableExists", "LakeTableNotFound", "LakeUnsafePath", "Scan", "Snapshot", "TableSpec",
]
