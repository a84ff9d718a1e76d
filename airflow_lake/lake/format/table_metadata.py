"""`TableMetadata`: a table's log, states and snapshots, and small commits to its log — no Spark, no operations.

The operations and the commit protocol take a `TableMetadata`; users get a `LakeTable` (`lake/table.py`), the door
that adds creating, reading with Spark or pyarrow, and the operations on top of it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_lake.lake.errors import LakeError, LakeSnapshotNotFound, LakeSpecError
from airflow_lake.lake.format import history, identity, instants
from airflow_lake.lake.format.instants import Instant
from airflow_lake.lake.format.log import RETENTION_PROPERTY, CommitLog, LogEntry, carrying
from airflow_lake.lake.format.snapshots import Snapshot, SnapshotResolver, TableState, snapshot_of
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

log = logging.getLogger(__name__)
AsOf = int | str | None


class TableMetadata:
    """The metadata of the lake table at a URL (which need not exist yet: see `LakeTable.open`)."""

    def __init__(self, url: str) -> None:
        self.storage = Storage(url)
        self.commit_log = CommitLog(self.storage, explain_expired=self._explain_expired)
        self._resolver = SnapshotResolver(self.storage, self.commit_log)
        self._explaining = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def url(self) -> str:
        """The table's normalized URL."""
        return self.storage.url

    @property
    def table_id(self) -> str | None:
        """The id the table's create entry gave it (None: created before ids existed)."""
        return self.state().table_id

    def identity(self, state: TableState | None = None) -> str:
        """The table's one identity (`format.identity`), whatever the spelling of its URL: what pins a job's reads
        of its own table and keys the reads its commit is checked against. `state`: one already resolved."""
        return identity.identity((self.state() if state is None else state).table_id, self.url)

    @property
    def canonical_url(self) -> str:
        """The table's URL in its one spelling (real path; a store's own scheme): its name for assets, lineage
        and the Lake page."""
        return identity.canonical_url(self.url)

    # -- state, snapshots, timeline ------------------------------------------------------------------
    def state(self, seq: int | None = None) -> TableState:
        """The folded state after log entry `seq` (default: the latest). Treat as read-only."""
        return self._resolver.state(seq)

    @property
    def spec(self) -> TableSpec:
        """The table spec of the latest snapshot."""
        return stored_spec(self.state().spec)

    def resolve(self, as_of: AsOf) -> int:
        """The log sequence number of `as_of`: None (latest), a sequence number or an instant id."""
        latest = self.state()
        if as_of is None:
            return latest.seq
        if isinstance(as_of, bool):
            raise LakeSpecError("as_of", f"{as_of!r} is not a snapshot.", "Give a sequence number or instant id.")
        if isinstance(as_of, int):
            return as_of
        text = str(as_of).strip()
        if instants.is_instant_id(text):
            if text in latest.instants:
                return latest.instants[text]
            raise LakeSnapshotNotFound(f"instant {text} is not completed on {self.url!r}. Fix: pick a "
                                       "completed instant from `airflow-lake timeline`.")
        if text.isascii() and text.isdigit():  # "²".isdigit() is True too
            return int(text)
        raise LakeSpecError("as_of", f"{as_of!r} is neither a sequence number nor an instant id.",
                            "Give e.g. 3 or 20261121054330123.")

    def snapshot(self, as_of: AsOf = None) -> Snapshot:
        """The table as of an instant or sequence number (time travel), default the latest."""
        self.commit_log.head()  # looked up once: the three resolutions below carry it
        with carrying():
            seq = self.resolve(as_of)
            latest = self.state()
            return snapshot_of(self.state(seq), cleaned_before=latest.cleaned_before)

    def oldest_reachable(self) -> int:
        """The oldest snapshot time travel still reaches: 0, unless `clean` expired log entries older than the log
        retention (`log.retain.hours`)."""
        return self._resolver.oldest_reachable()

    def timeline(self, limit: int | None = None) -> list[Instant]:
        """Instants in log order (completed and rolled back), then pending ones; `limit` keeps the last N. Only
        the log `clean` left is shown: from its start (`CommitLog.start`) on."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise LakeSpecError("limit", f"{limit!r} is not a whole number >= 0.", "Give e.g. 10, or None for all.")
        head = self.commit_log.head()
        start = self.commit_log.start()
        first = start if limit is None else max(start, head - limit + 1)
        out: list[Instant] = []
        for entry in self.commit_log.entries(first - 1, head):
            for rolled in entry.rolled_back:
                info = entry.metadata.get("instants", {}).get(rolled, {})
                out.append(Instant(rolled, info.get("action", "?"), instants.ROLLED_BACK,
                                   info.get("operation", ""), seq=entry.seq, completed_at=entry.completed_at,
                                   request_id=info.get("request_id"),
                                   metadata={"rolled_back_by": entry.instant,
                                             "reason": str(entry.metadata.get("reason") or "")}))
            out.append(Instant(entry.instant, entry.action, instants.COMPLETED, entry.operation, seq=entry.seq,
                               started_at=entry.started_at, completed_at=entry.completed_at,
                               request_id=entry.request_id, metadata=entry.metadata, metrics=entry.metrics))
        state = self.state()
        for item in instants.pending(self.storage):
            if item.id in state.instants or item.id in state.rolled_back:
                continue
            out.append(Instant(item.id, item.action, instants.INFLIGHT if item.inflight else instants.REQUESTED,
                               item.operation, started_at=item.requested_at, request_id=item.request_id,
                               metadata=item.metadata))
        return out

    def entries_since(self, seq: int) -> list[LogEntry]:
        """Log entries completed after `seq`, in order (`LogEntryExpired` if `clean` expired the first of them)."""
        return list(self.commit_log.entries(seq))

    def _explain_expired(self, seq: int, start: int) -> str:
        """The message of `LogEntryExpired`: which entry, the retention that expired it, and the oldest snapshot
        that time travel still reaches, with its instant and time."""
        if self._explaining:  # resolving what the message needs ran into an expired entry itself
            raise LakeError("no explanation")
        self._explaining = True
        try:
            spec = self.spec
            oldest = self.oldest_reachable()
            entry = self.commit_log.read(oldest)
        finally:
            self._explaining = False
        hours = history.retention_hours(spec)
        configured = spec.float_property(RETENTION_PROPERTY)
        raised = "" if hours == configured else f", raised to clean.retain.hours = {hours:g} h"
        when = dt.datetime.fromtimestamp(entry.completed_at, tz=dt.UTC).isoformat(timespec="seconds")
        return (f"log entry {seq} of {self.url!r} has expired: `clean` deleted the log entries before {start}, older "
                f"than the table's log retention ({RETENTION_PROPERTY} = {configured:g} h{raised}) and covered by "
                f"a checkpoint. The oldest snapshot still reachable is seq {oldest} (instant {entry.instant}, "
                f"completed {when.replace('+00:00', 'Z')}). Fix: ask for seq {oldest} or later (`airflow-lake "
                f"timeline {self.url}` lists the log that is left); to keep more history from now on, raise "
                f"{RETENTION_PROPERTY} (alter_table).")

    def is_finished(self, instant: str) -> bool:
        """True if `instant` is completed or rolled back (in the log)."""
        state = self.state()
        return instant in state.instants or instant in state.rolled_back

    # -- small commits ------------------------------------------------------------------------------
    def append_entry(self, action: str, operation: str, *, added: Sequence[Any] = (),
                     removed: Sequence[str] = (), rolled_back: Sequence[str] = (),
                     metadata: Mapping[str, Any] | None = None, request_id: str | None = None,
                     precheck: Callable[[list[LogEntry]], bool] | None = None,
                     metrics_of: Callable[[], Mapping[str, Any]] | None = None,
                     base: TableState | None = None) -> LogEntry | None:
        """Append a small entry (rollback, clean) under a fresh instant; `precheck` may veto it.

        `precheck` sees every entry completed after `base` (default: the latest state), so a caller that
        decided from an older state passes that state.
        """
        base = self.state() if base is None else base
        instant = instants.request(self.storage, action, operation, metadata or {}, request_id,
                                   not_before=base.instant or None, finished=self.is_finished)
        started = time.time()
        checked = base.seq
        try:
            while True:
                head = self.commit_log.head()
                since = list(self.commit_log.entries(checked, head))
                checked = head
                if precheck is not None and not precheck(since):
                    return None
                now = time.time()
                entry = LogEntry(seq=head + 1, instant=instant, action=action, operation=operation,
                                 started_at=started, completed_at=now, base_seq=base.seq,
                                 added=tuple(added), removed=tuple(removed), rolled_back=tuple(rolled_back),
                                 request_id=request_id, metadata=dict(metadata or {}),
                                 metrics=dict(metrics_of() if metrics_of else {}))
                if self.commit_log.try_append(entry):
                    self.after_commit(entry)
                    return entry
        finally:
            try:
                instants.remove_pending(self.storage, instant)
            except OSError:  # leftovers of a finished instant; the next writer removes them
                log.warning("removing the pending files of instant %s failed", instant, exc_info=True)

    def after_commit(self, entry: LogEntry) -> None:
        """Housekeeping after an entry lands: a checkpoint every `checkpoint.interval` entries.

        Never raises: the entry is in the log, so the commit succeeded. A missing checkpoint only makes
        resolution fold more entries (the next one is written `checkpoint.interval` entries later).
        """
        try:
            interval = int(self.spec.float_property("checkpoint.interval"))
            if entry.seq > 0 and entry.seq % interval == 0:
                state = self.state(entry.seq)
                self._resolver.write_checkpoint(state)
                log.info("checkpoint written at %d (%d live files)", entry.seq, len(state.files))
        except Exception:
            log.warning("log entry %d is committed, but writing its checkpoint failed; snapshots stay "
                        "correct (they fold the log from an older checkpoint)", entry.seq, exc_info=True)
