"""The lake core: tables, timeline, snapshots and commits. Imports nothing from Airflow."""

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
from airflow_lake.lake.files import ColumnStats, DataFile
from airflow_lake.lake.instants import Instant
from airflow_lake.lake.scan import Scan
from airflow_lake.lake.snapshot import Snapshot
from airflow_lake.lake.spec import BucketSpec, Column, TableSpec
from airflow_lake.lake.table import LakeTable

__all__ = [
    "BucketSpec", "Column", "ColumnStats", "DataFile", "Instant", "LakeCommitConflict", "LakeError",
    "LakeInstantRolledBack", "LakeSchemaError", "LakeSnapshotNotFound", "LakeSpecError", "LakeTable",
    "LakeTableExists", "LakeTableNotFound", "Scan", "Snapshot", "TableSpec",
]
