"""A writer's transaction: reserve an instant, write files, then complete it atomically or roll it back.

    txn = begin(table, "commit", operation="write")
    try:
        files = write_dataframe(df, table.storage, table.spec, txn.instant)  # writer.py: staged, then placed
        txn.commit(added=files, metrics={...})
    except BaseException:
        txn.abort()
        raise
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.commit import recovery, requests
from airflow_lake.lake.commit.conflicts import CommitIntent, check
from airflow_lake.lake.commit.heartbeat import Heartbeat
from airflow_lake.lake.commit.reads import TableRead
from airflow_lake.lake.errors import LakeCommitConflict, LakeError
from airflow_lake.lake.format import commit_info, instants
from airflow_lake.lake.format.consumed import CONSUMED, positions_of
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import COMPLETES, LogEntry, carrying
from airflow_lake.lake.format.snapshots import TableState

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
MAX_APPEND_ATTEMPTS = 1000


class Transaction:
    """One instant of one writer. Create through `TableMetadata.begin`."""

    def __init__(self, table: TableMetadata, action: str, operation: str, base: TableState | None, *,
                 metadata: Mapping[str, Any], request_id: str | None) -> None:
        """`base`: the state the job read (see `begin`); None: the latest, as the log is once the instant is
        reserved (the reservation looks the head up: entries that landed since `begin` looked are then folded
        into the base once, not read again by the commit's check)."""
        self.table = table
        self.action = action
        self.operation = operation
        self.metadata = commit_info.stamp(metadata)  # (as the log will record it: the entry returned matches)
        self.request_id = request_id
        self.started_at = time.time()
        storage = table.storage
        with carrying():  # the state begin resolved
            known = table.state() if base is None else base
        self.instant = instants.request(storage, action, operation, self.metadata, request_id,
                                        not_before=known.instant or None, finished=table.is_finished)
        if base is None:
            with carrying():  # the state `finished` just resolved: no request
                base = table.state()
        self.base = base
        faults.reach("after_request")
        instants.mark_inflight(storage, self.instant, base.seq)  # (the first heartbeat)
        with carrying():  # the spec of that state
            interval = table.spec.float_property("heartbeat.interval.seconds")
        self._heartbeat = Heartbeat(storage, self.instant, interval)
        self._heartbeat.start(beat=False)
        self._done = False
        log.info("instant %s (%s/%s) started from snapshot %d", self.instant, action, operation, base.seq)

    @property
    def base_files(self) -> list[DataFile]:
        """Live files of the snapshot this transaction started from."""
        return list(self.base.files.values())

    def commit(self, added: Iterable[DataFile] = (), removed: Iterable[str] = (), *,
               reads: Iterable[str] = (), overwrites: Iterable[Mapping[str, str | None]] = (),
               whole_table: bool = False, metrics: Mapping[str, Any] | None = None,
               metadata: Mapping[str, Any] | None = None, versions: Iterable[int] = (),
               table_reads: Iterable[TableRead] = ()) -> LogEntry:
        """Complete the instant: check conflicts, then exclusively create the next log entry.

        `reads`: files of this table the commit depends on (a conflict if one is removed meanwhile);
        `table_reads`: scans of this table at the base that the data came from (a conflict if a file one of
        them could have selected is added or removed meanwhile: `reads.py`).
        """
        if self._done:
            raise LakeError(f"instant {self.instant} is already finished.")
        faults.reach("before_commit")
        added_files = tuple(added)
        removed_paths = tuple(sorted(set(removed)))
        missing = [p for p in removed_paths if p not in self.base.files]
        if missing:
            raise LakeError(f"cannot remove {missing[0]!r}: it is not live in snapshot {self.base.seq}.")
        completes = self.metadata.get(COMPLETES)
        # upstream positions recorded (at begin or here): checked against entries that moved them since the base
        recorded = positions_of({**self.metadata, **(metadata or {})}.get(CONSUMED))
        intent = CommitIntent(self.instant, frozenset(removed_paths), frozenset(reads),
                              tuple(overwrites), whole_table, self.request_id,
                              completes if isinstance(completes, str) else None, frozenset(versions),
                              tuple(table_reads), {u: self.base.consumed.get(u) for u in recorded})
        stale = [r.seq for r in intent.table_reads if r.seq != self.base.seq]
        if stale:
            raise LakeError(f"a read of snapshot {stale[0]} cannot be checked against base {self.base.seq}: "
                            "read the table at the transaction's base (`TableMetadata.begin(base=...)`).")
        entry_metrics = {
            "files_added": len(added_files),
            "files_removed": len(removed_paths),
            "rows_added": sum(f.rows for f in added_files),
            "rows_removed": sum(self.base.files[p].rows for p in removed_paths),
            "bytes_added": sum(f.bytes for f in added_files),
            "bytes_removed": sum(self.base.files[p].bytes for p in removed_paths),
            **(metrics or {}),
        }
        with carrying():  # the head carried from begin: an append at a stale one fails, then the head is looked up
            entry = self._append(intent, added_files, removed_paths, entry_metrics, metadata)
            self._done = True
            self._heartbeat.stop()
            log.info("instant %s completed as log entry %d: %s", self.instant, entry.seq, entry_metrics)
            faults.reach("after_commit")
            # The entry is in the log: the commit has succeeded, whatever happens next. Housekeeping errors
            # (disk full while checkpointing, say) are logged, never raised: a caller that saw a failure
            # would run the write again and add the data twice.
            try:
                recovery.finish(self.table, self.instant, keep={f.path for f in added_files})
            except Exception:
                log.warning("instant %s committed; tidying its staging files failed (the next writer retries)",
                            self.instant, exc_info=True)
            self.table.after_commit(entry)  # (the head is this entry, and the entries read are kept: no request)
        return entry

    def _append(self, intent: CommitIntent, added: tuple[DataFile, ...], removed: tuple[str, ...],
                metrics: dict[str, Any], metadata: Mapping[str, Any] | None) -> LogEntry:
        """Check the entries since the base, then create the next entry; again from the new head while another
        writer took the number."""
        checked = self.base.seq
        log_ = self.table.commit_log
        for _ in range(MAX_APPEND_ATTEMPTS):
            head = log_.head()
            check(intent, log_.entries(checked, head))
            checked = head
            now = time.time()
            metrics["duration_seconds"] = round(now - self.started_at, 3)
            entry = LogEntry(
                seq=head + 1, instant=self.instant, action=self.action, operation=self.operation,
                started_at=self.started_at, completed_at=now, base_seq=self.base.seq,
                added=added, removed=removed, request_id=self.request_id,
                metadata={**self.metadata, **(metadata or {})}, metrics=metrics,
            )
            if log_.try_append(entry):
                return entry
        raise LakeCommitConflict(f"instant {self.instant} lost the race for a log slot "
                                 f"{MAX_APPEND_ATTEMPTS} times; run the job again.")

    def discard(self) -> None:
        """End an instant that found nothing to commit without a trace: delete its files, then its pending files,
        and record nothing (a rollback entry would put a change of nothing in the log). A crash midway leaves it
        pending, and the next writer rolls it back as any dead writer's."""
        if self._done:
            return
        self._done = True
        self._heartbeat.stop()
        recovery.finish(self.table, self.instant)

    def abort(self, reason: str = "aborted by its writer") -> None:
        """Roll the instant back: delete its files, record the rollback (with `reason`, shown in the
        timeline), drop its pending files."""
        if self._done:
            return
        self._done = True
        self._heartbeat.stop()
        try:
            with carrying():  # the head last seen: the rollback's append catches a stale one
                recovery.rollback_unchecked(self.table, [self.instant], reason)
        except Exception:  # the next writer rolls it back once the heartbeat is stale
            log.warning("rollback of instant %s failed; it will be rolled back later", self.instant,
                        exc_info=True)


def begin(table: TableMetadata, action: str, operation: str, metadata: Mapping[str, Any] | None = None, *,
          request_id: str | None = None, recover: bool = True, base: TableState | None = None,
          request_fingerprint: str | None = None) -> Transaction:
    """Start a transaction; first rolls back instants whose writer died.

    `base`: the state the job read (its spec, its files, a query over the table itself), taken with
    `table.state()` BEFORE reading; default the latest. Every commit since the base is checked against what
    the transaction read and replaces, so a job must never read a newer state than its base.
    `request_fingerprint`: of the request's inputs (`requests.fingerprint`), recorded with the commit.
    """
    request = requests.Request(operation, request_id, request_fingerprint)
    table.commit_log.head()  # looked up once, then carried: has the request committed, which writers died
    with carrying():
        requests.committed(table, request)  # refuses a request id of another operation, or of other inputs
        if recover:
            recovery.recover(table)
    return Transaction(table, action, operation, base,
                       metadata={**(metadata or {}), **request.metadata()}, request_id=request_id)
