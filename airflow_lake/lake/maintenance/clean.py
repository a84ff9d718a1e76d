"""Clean: delete removed files that no snapshot within the retention period needs."""

from __future__ import annotations

import contextlib
import logging
import time
from functools import partial
from typing import TYPE_CHECKING

from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.maintenance import retention

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)


def clean(table: TableMetadata, retain_hours: float | None = None, request_id: str | None = None,
          now: float | None = None, *, force: bool = False) -> LogEntry | None:
    """Delete files removed before `now - retain_hours`; None if there was nothing to delete.

    A snapshot that was current within the retention period keeps every file it needs: a file
    removed at time T was last needed by the snapshot current just before T. A `retain_hours` shorter than
    the table's `clean.retain.hours` is refused unless `force` (`retention.guard`).
    """
    configured = table.spec.float_property(retention.PROPERTY)
    hours = configured if retain_hours is None else retain_hours
    forced = retention.guard(table.url, "retain_hours", hours, configured, force=force, operation="clean",
                             risk="time travel and restore to snapshots younger than the table's retention, and "
                                  "queries or writers still reading them, would find their files deleted")
    cutoff = (time.time() if now is None else now) - hours * 3600
    while True:
        state = table.state()
        expired = {path: int(seq) for path, (seq, removed_at) in state.tombstones.items() if removed_at < cutoff}
        if not expired:
            return None
        freed = 0
        for path in expired:
            with contextlib.suppress(FileNotFoundError):
                freed += table.storage.size(path)

        def none_readded(since: list[LogEntry], expired: dict[str, int] = expired) -> bool:
            return not any(f.path in expired for entry in since for f in entry.added)

        # The entry first, the deletes after it: a restore that re-adds one of these files either landed before
        # (the precheck sees it, and the clean is planned again) or conflicts with this entry. A crash between
        # the two leaves files no log entry holds: orphan removal deletes them.
        entry = table.append_entry(
            "clean", "clean", request_id=request_id, base=state, precheck=none_readded,
            metadata={"deleted": sorted(expired), "cleaned_before": max(expired.values()),
                      "retain_hours": hours, **({"forced": True} if forced else {})},
            metrics_of=partial(dict, files_deleted=len(expired), bytes_freed=freed),
        )
        if entry is not None:
            break
        log.info("clean of %s: a restore re-added files it was about to delete; planning again", table.url)
    for path in sorted(expired):
        table.storage.delete(path)
    log.info("clean deleted %d file(s), %d bytes", len(expired), freed)
    return entry
