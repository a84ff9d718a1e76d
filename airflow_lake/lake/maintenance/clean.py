"""Clean: delete removed files that no snapshot within the retention period needs, and expire the log entries
older than the log retention that a checkpoint covers.

Log expiry (Delta's logRetentionDuration): with the horizon now - `log.retain.hours` (never less than
`clean.retain.hours` nor this clean's `retain_hours`: `history.retention_hours`), clean finds where the log may
start (`history.newest_before`: the newest entry that, with every entry before it, completed before the horizon),
marks that start (`history.mark_start`), makes sure a checkpoint at that entry carries the history (writing it if
needed, folded from the newest checkpoint before it), and deletes the entries before it, oldest first, entry 0
(the table's creation) excepted. Every snapshot current within the retention folds from that checkpoint, which
checkpoint retention keeps (`history.kept_checkpoints`: the checkpoint at the log's start), whatever retention
this clean was given. Clean writes it rather than hoping for one: the checkpoints writers make are deleted beyond
`checkpoint.retain.count` long before they age past a 30-day horizon.
Deleting oldest first keeps the entries left one run up to the head, so a reader folding forward from a checkpoint
never meets a hole, and a clean killed halfway leaves a readable table; the log is expired before the clean's
entry is written, so a retry (same request id or not) finds the rest still to do.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import history, paths
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.maintenance import retention
from airflow_lake.lake.publish import delta_publisher
from airflow_lake.lake.spec.table_spec import stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.format.table_state import TableState

log = logging.getLogger(__name__)


def clean(table: TableMetadata, retain_hours: float | None = None, request_id: str | None = None,
          now: float | None = None, *, force: bool = False) -> LogEntry | None:
    """Delete files removed before `now - retain_hours` and expire old log entries (see the module's doc); None if
    there was nothing to do.

    A snapshot that was current within the retention period keeps every file it needs: a file
    removed at time T was last needed by the snapshot current just before T. A `retain_hours` shorter than
    the table's `clean.retain.hours` is refused unless `force` (`retention.guard`); it never shortens the log
    retention.
    """
    configured = table.spec.float_property(retention.PROPERTY)
    hours = configured if retain_hours is None else retain_hours
    forced = retention.guard(table.url, "retain_hours", hours, configured, force=force, operation="clean",
                             risk="time travel and restore to snapshots younger than the table's retention, and "
                                  "queries or writers still reading them, would find their files deleted")
    if request_id is not None and (done := requests.find_committed(table, request_id, "clean")) is not None:
        finish(table, done)  # a retry: the first run may have died between its entry and its deletes
        return done
    now = time.time() if now is None else now
    cutoff = now - hours * 3600
    expired_log = expire_log(table, table.state(), now, hours)
    while True:
        state = table.state()
        expired = {path: int(seq) for path, (seq, removed_at) in state.tombstones.items() if removed_at < cutoff}
        if not expired and expired_log is None:
            return None
        freed = 0
        for path in expired:
            with contextlib.suppress(FileNotFoundError):
                freed += table.storage.size(path)

        def none_readded(since: list[LogEntry], expired: dict[str, int] = expired) -> bool:
            return not any(f.path in expired for entry in since for f in entry.added)

        # (every path came from a log entry or checkpoint, checked when read: `log.check_paths`; none may reach
        # outside the table through a symlink either — all checked before the entry, so a bad one deletes nothing)
        table.storage.refuse_escapes(expired, f"the clean of {table.url}")
        metadata: dict[str, Any] = {"deleted": sorted(expired), "retain_hours": hours}
        if expired:
            metadata["cleaned_before"] = max(expired.values())
        if forced:
            metadata["forced"] = True
        metrics = {"files_deleted": len(expired), "bytes_freed": freed}
        if expired_log is not None:
            metadata.update(expired_log.metadata())
            metrics.update(expired_log.metrics())
        # The entry first, the deletes after it: a restore that re-adds one of these files either landed before
        # (the precheck sees it, and the clean is planned again) or conflicts with this entry. A crash between
        # the two leaves files no log entry holds: a retry with the same request id (`finish`) or orphan removal
        # deletes them. No read depends on it: reads name exactly the live files (`spark.scan.exactly`).
        entry = table.append_entry(
            "clean", "clean", request_id=request_id, base=state, precheck=none_readded, metadata=metadata,
            metrics_of=partial(dict, metrics),
        )
        if entry is not None:
            break
        log.info("clean of %s: a restore re-added files it was about to delete; planning again", table.url)
    _delete(table, sorted(expired))
    log.info("clean deleted %d file(s), %d bytes", len(expired), freed)
    return entry


def finish(table: TableMetadata, entry: LogEntry) -> int:
    """Delete the files the committed clean `entry` deleted that are still there (its run was killed, or a delete
    failed, after the entry landed), unless a later entry holds them again (a restore re-added one); how many."""
    state = table.state()
    left = [p for p in entry.metadata.get("deleted") or () if p not in state.files and p not in state.tombstones]
    deleted = _delete(table, left)
    if deleted:
        log.info("clean %s (retry): deleted %d file(s) its first run left", entry.instant, deleted)
    return deleted


def _delete(table: TableMetadata, paths_: list[str]) -> int:
    return sum(table.storage.delete(path) for path in paths_)


# -- log expiry -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpiredLog:
    """What one clean expired of the log: `count` entries, so that the log now starts at `start` (the checkpoint
    there covers them), under a retention of `hours`."""

    count: int
    start: int
    hours: float

    def metadata(self) -> dict[str, Any]:
        """What the clean entry records."""
        return {"log_expired": self.count, "log_starts_at": self.start, "log_retain_hours": self.hours}

    def metrics(self) -> dict[str, Any]:
        """What the clean reports."""
        return {"log_entries_expired": self.count, "log_starts_at": self.start}


def expire_log(table: TableMetadata, state: TableState, now: float, data_hours: float = 0.0) -> ExpiredLog | None:
    """Delete, oldest first, the log entries before the newest entry completed before the log retention's horizon
    (never entry 0), once a checkpoint at that entry carries them; None if there is nothing to expire (fewer than
    `checkpoint.interval` entries: not worth a checkpoint) or it cannot be done safely (logged). `data_hours`: the
    data retention of this clean, which the log retention never undercuts."""
    spec = stored_spec(state.spec)
    hours = history.retention_hours(spec, data_hours)
    first = max(1, table.commit_log.start())
    try:
        floor = history.newest_before(lambda seq: table.commit_log.read(seq).completed_at, first, state.seq,
                                      now - hours * 3600)
        if floor is None or floor - first < int(spec.float_property("checkpoint.interval")):
            return None
        history.mark_start(table.storage, floor)  # before the checkpoint: a writer's retention then keeps it
        _checkpoint_at(table, floor)
    except LakeError as err:  # a damaged entry or checkpoint: the log stays whole until it is repaired
        log.warning("clean of %s expires no log entries: %s", table.url, err)
        return None
    deleted = 0
    for seq in range(first, floor):  # oldest first: what is left is one run up to the head
        deleted += table.storage.delete(paths.log_file(seq))
    log.info("clean of %s expired %d log entries (%d to %d, older than %g h; checkpoint %d carries them)",
             table.url, deleted, first, floor - 1, hours, floor)
    try:  # the published Delta log follows: it starts at a checkpoint of `floor` (`publish.delta_publisher.expire`)
        delta_publisher.expire(table, floor)
    except Exception:
        log.warning("clean of %s: expiring the published Delta log before version %d failed; the next clean "
                    "retries", table.url, floor, exc_info=True)
    return ExpiredLog(deleted, floor, hours)


def _checkpoint_at(table: TableMetadata, seq: int) -> None:
    """Make sure a checkpoint at `seq` can carry the history before it alone: written (without moving the pointer,
    from the newest checkpoint before it: usually the one the last clean wrote) unless there is one, then read back
    whole — checksums, every stats column, and the indexes that otherwise come from the log (upsert versions, spec
    changes). A `LakeError` says why not."""
    # (imported here: checkpoints need pyarrow, which opening a table for `airflow-lake ls` does not)
    from airflow_lake.lake.format import checkpoints
    from airflow_lake.lake.format.stats_columns import LazyStats

    fmt = next((f for s, f in checkpoints.listed(table.storage) if s == seq), None)
    if fmt is None:
        state = table.state(seq)
        if state.versions is None or state.spec_changes is None:
            raise LakeError(f"the state at entry {seq} lacks the upsert version or spec change index (it was folded "
                            "from a checkpoint written before them); a checkpoint written by this version has them")
        checkpoints.write(table.storage, state, point=False)
        fmt = "parquet"
    try:
        held = checkpoints.read(table.storage, seq, fmt)
        lazy = next((f.stats for f in held.files.values() if isinstance(f.stats, LazyStats)), None)
        if lazy is not None and not lazy.columns.decode_all():
            raise ValueError("its stats columns are unreadable")
    except (FileNotFoundError, *checkpoints.UNREADABLE) as err:
        raise LakeError(f"checkpoint {paths.checkpoint_file(seq, fmt)}, which would carry the history, cannot be "
                        f"read ({type(err).__name__}: {err})") from err
    if held.versions is None or held.spec_changes is None:
        raise LakeError(f"checkpoint {seq} was written before the indexes a table needs once its log is expired; "
                        "a checkpoint written by this version has them")
