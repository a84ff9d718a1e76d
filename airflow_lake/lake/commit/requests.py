"""Requests: has this request (operation, request id) already committed, and what did it return?

Every operation asks here before it writes, and the hook asks here after a job ends, so an Airflow retry of a
committed task returns the first try's result instead of committing twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lake.lake.commit import recovery
from airflow_lake.lake.errors import LakeSpecError

if TYPE_CHECKING:
    from airflow_lake.lake.format.log import LogEntry
    from airflow_lake.lake.format.table_metadata import TableMetadata


def find_committed(table: TableMetadata, request_id: str, operation: str | None = None) -> LogEntry | None:
    """The completed entry recorded with `request_id` (makes retries idempotent), if any.

    With `operation`, an entry of another operation under the same request id is an error: a retry
    is the same operation with the same request id, so taking that entry for this one's result would
    turn the call into a silent no-op.
    """
    seq = table.state().requests.get(request_id)
    entry = None if seq is None else table.commit_log.read(seq)
    if entry is not None and operation is not None and entry.operation != operation:
        raise LakeSpecError("request_id", f"{request_id!r} was already used by instant {entry.instant} "
                            f"(operation {entry.operation}, log entry {entry.seq}); a retry is the same operation "
                            "with the same request id.",
                            f"Give this {operation} a request id of its own (Airflow's is dag/task/run/map index).")
    if entry is not None:  # a retry: its first try may have died after committing, before tidying up
        recovery.tidy_if_left(table, entry)
    return entry
