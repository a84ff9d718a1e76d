"""Which live files another engine may see: every file of a plain table; a primary-key table's base files only.

A primary-key table's rows are a merge of base files (written by `compact_upserts`) and the delta files of the
upserts since. Other engines cannot merge, so they see the table as of its last compaction, as Paimon's Iceberg
compatibility does: base files only, and of those only the ones that hold no delete tombstone (a key compaction
keeps as deleted: its row stamp `__lake_v` is NULL, `upsert/physical.py`). Compaction writes tombstones into files of
their own, so a base file is wholly visible or wholly not. The format's own columns (`__lake_*`) are never in the
published schema, so no engine shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import LogEntry, LogEntryExpired
from airflow_lake.lake.format.operation_names import same_operation
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.format.table_state import TableState

log = logging.getLogger(__name__)

COMPACTION = "compact_upserts"  # upsert/compact.py OPERATION (`same_operation` also takes its old name)
ROW_STAMP = "__lake_v"  # upsert/physical.py NEWEST: NULL in a tombstone row


def is_base(operation: str) -> bool:
    """Whether files added by `operation` are a primary-key table's base files."""
    return same_operation(operation, COMPACTION)


def tombstones(data_file: DataFile) -> int:
    """How many of a base file's rows are delete tombstones (0 when its stats do not say: files written before
    versioned deletes had none)."""
    stamp = data_file.stats.get(ROW_STAMP)
    return 0 if stamp is None else int(stamp.null_count)


def visible(data_file: DataFile, spec: TableSpec, operation_of: Callable[[DataFile], str | None]) -> bool:
    """Whether other engines see `data_file`; `operation_of` names the operation that wrote it (None: unknown)."""
    if not spec.primary_key:
        return True
    operation = operation_of(data_file)
    return operation is not None and is_base(operation) and tombstones(data_file) == 0


def hidden_reason(data_file: DataFile, spec: TableSpec, operation: str | None) -> str:
    """Why a primary-key table's file is not published (for logs and `airflow-lake ls`)."""
    if operation is None:
        return "the entry that wrote it has expired from the log"
    if not is_base(operation):
        return "an upsert's delta file, published by the next compact_upserts"
    rows = tombstones(data_file)
    return f"holds {rows} delete tombstone(s)" if rows else "visible"


def visible_files(files: Mapping[str, DataFile], spec: TableSpec,
                  operation_of: Callable[[DataFile], str | None]) -> dict[str, DataFile]:
    """The files of `files` other engines see."""
    return {path: f for path, f in files.items() if visible(f, spec, operation_of)}


class FileOperations:
    """The operation that wrote a file (`visible`'s `operation_of`), looked up once per instant in the log; only
    primary-key tables ask. `note` each entry being folded, so files it adds need no lookup."""

    def __init__(self, table: TableMetadata, state: TableState) -> None:
        self.table = table
        self.instants = state.instants
        self.known: dict[str, str | None] = {}

    def note(self, entry: LogEntry) -> None:
        self.known[entry.instant] = entry.operation

    def __call__(self, data_file: DataFile) -> str | None:
        if data_file.instant not in self.known:
            seq = self.instants.get(data_file.instant)
            operation = None
            if seq is not None:
                try:
                    operation = self.table.commit_log.read(seq).operation
                except LogEntryExpired:
                    log.warning("the log entry that wrote %s has expired: the file is not published", data_file.path)
            self.known[data_file.instant] = operation
        return self.known[data_file.instant]
