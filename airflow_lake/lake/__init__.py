"""The lake core: tables, timeline, snapshots and commits. Imports nothing from Airflow.

Rooms, lowest first; a room imports only rooms below it (`tests/lake/test_rooms.py` checks it):
- the floor: `errors`, `faults`;
- `spec/`: the table spec, types, partitions, bucketing, merge operators, strict reading;
- `format/`: the table on disk: paths, storage, log, instants, data files, state, checkpoints, snapshots, filters;
- `commit/` (the commit protocol) and `spark/` (the Spark side), side by side, neither importing the other;
- the operations: `write/`, `upsert/`, `buckets/`, `clustering/`, `maintenance/`;
- `table.py`: `LakeTable`, the one door for users, over all of the above;
- `sources/`: what a job reads, opening other tables through the door.
See docs/architecture.md.
"""

from __future__ import annotations

from airflow_lake.lake.errors import (
    LakeCommitConflict,
    LakeError,
    LakeInstantRolledBack,
    LakeSchemaError,
    LakeSnapshotNotFound,
    LakeSpecError,
    LakeTableExists,
    LakeTableNotFound,
)
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.instants import Instant
from airflow_lake.lake.format.snapshots import Snapshot
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.spec.table_spec import BucketSpec, Column, TableSpec
from airflow_lake.lake.table import LakeTable

__all__ = [
    "BucketSpec", "Column", "ColumnStats", "DataFile", "Instant", "LakeCommitConflict", "LakeError",
    "LakeInstantRolledBack", "LakeSchemaError", "LakeSnapshotNotFound", "LakeSpecError", "LakeTable",
    "LakeTableExists", "LakeTableNotFound", "Scan", "Snapshot", "TableSpec",
]
