"""Clean: delete removed files that no snapshot within the retention period needs."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from airflow_lake.lake.format.log import LogEntry

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)


def clean(table: TableMetadata, retain_hours: float | None = None, request_id: str | None = None,
          now: float | None = None) -> LogEntry | None:
    """Delete files removed before `now - retain_hours`; None if there was nothing to delete.

    A snapshot that was current within the retention period keeps every file it needs: a file
    removed at time T was last needed by the snapshot current just before T.
    """
    hours = table.spec.float_property("clean.retain.hours") if retain_hours is None else retain_hours
    cutoff = (time.time() if now is None else now) - hours * 3600
    state = table.state()
    expired = {path: int(seq) for path, (seq, removed_at) in state.tombstones.items() if removed_at < cutoff}
    if not expired:
        return None
    freed = 0
    for path in sorted(expired):  # files first: a crash before the entry only repeats the deletes
        with contextlib.suppress(FileNotFoundError):
            freed += table.storage.size(path)
        table.storage.delete(path)
    entry = table.append_entry(
        "clean", "clean", request_id=request_id,
        metadata={"deleted": sorted(expired), "cleaned_before": max(expired.values()),
                  "retain_hours": hours},
        metrics_of=lambda: {"files_deleted": len(expired), "bytes_freed": freed},
    )
    log.info("clean deleted %d file(s), %d bytes", len(expired), freed)
    return entry
