"""`LakeTable`: the one façade over a lake table's spec, timeline, snapshots, reads and commits."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import clean as clean_module
from airflow_lake.lake import instants, recovery, table_roots
from airflow_lake.lake.errors import LakeSnapshotNotFound, LakeSpecError, LakeTableExists, LakeTableNotFound
from airflow_lake.lake.filters import may_match, parse_filters
from airflow_lake.lake.instants import Instant
from airflow_lake.lake.log import CommitLog, LogEntry
from airflow_lake.lake.scan import Scan
from airflow_lake.lake.snapshot import Snapshot, SnapshotResolver, TableState, snapshot_of
from airflow_lake.lake.spec import TableSpec, check_identifier, stored_spec
from airflow_lake.lake.storage import Storage
from airflow_lake.lake.transaction import Transaction

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.vacuum import VacuumResult

log = logging.getLogger(__name__)
AsOf = int | str | None


class LakeTable:
    """A lake table at a URL. Use `LakeTable.create` or `LakeTable.open`."""

    def __init__(self, url: str) -> None:
        self.storage = Storage(url)
        self.commit_log = CommitLog(self.storage)
        self._resolver = SnapshotResolver(self.storage, self.commit_log)

    def __repr__(self) -> str:
        return f"LakeTable({self.url!r})"

    @property
    def url(self) -> str:
        """The table's normalized URL."""
        return self.storage.url

    # -- lifecycle -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str, spec: TableSpec | Mapping[str, Any], *, exist_ok: bool = False,
               request_id: str | None = None) -> LakeTable:
        """Create a table (log entry 0 holds its spec). With `exist_ok`, an identical table is fine.

        Refused (`LakeSpecError`, nothing written) inside another table or over a directory that holds one
        (`table_roots.check_new_root`)."""
        table_spec = spec if isinstance(spec, TableSpec) else TableSpec.from_dict(spec)
        table = cls(path)
        if table.storage.local and os.path.isfile(table.url):
            raise LakeSpecError("table", f"{table.url!r} is a file, not a directory.",
                                "Give the path of a directory (it is created if it does not exist).")
        if not table.storage.local:
            # Spark writes the data files and the core moves them into place and commits; both are
            # checked end to end on local (or mounted, shared) paths only, so refuse the rest up front.
            raise LakeSpecError("table", f"{table.url!r} is not a local or mounted path; lake tables live on a "
                                "file system path for now.", "Use a local path, or mount the store (a shared "
                                "volume that Airflow and every Spark executor see).")
        now = time.time()
        entry = LogEntry(seq=0, instant=instants.format_id(int(now * 1000)), action="create",
                         operation="create_table", started_at=now, completed_at=now,
                         request_id=request_id, metadata={"spec": table_spec.to_dict()},
                         metrics={"columns": len(table_spec.columns), "created": True})
        if table.commit_log.head() < 0:
            table_roots.check_new_root(table.url)  # before anything is written: no `_lake` left behind
            if table.commit_log.try_append(entry):
                log.info("created lake table %s", table.url)
                return table
        existing = table.spec
        first = table.commit_log.read(0)
        if (exist_ok or (request_id is not None and first.request_id == request_id)) and existing == table_spec:
            return table  # identical table, or a retry of the request that created it
        if exist_ok:
            raise LakeTableExists(f"a lake table with a different spec exists at {table.url!r}. Fix: use "
                                  "another path, or give the existing spec (see `airflow-lake show`).")
        raise LakeTableExists(f"a lake table already exists at {table.url!r}. Fix: pass exist_ok=True "
                              "(if_exists='ignore') or use another path.")

    @classmethod
    def open(cls, path: str) -> LakeTable:
        """Open an existing table."""
        table = cls(path)
        if table.commit_log.head() < 0:
            raise LakeTableNotFound(f"no lake table at {table.url!r}. Fix: create it first (operation "
                                    "create_table) or check the path.")
        return table

    @staticmethod
    def exists(path: str) -> bool:
        """True if a lake table exists at `path`."""
        return CommitLog(Storage(path)).head() >= 0

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
        seq = self.resolve(as_of)
        latest = self.state()
        return snapshot_of(self.state(seq), cleaned_before=latest.cleaned_before)

    def timeline(self, limit: int | None = None) -> list[Instant]:
        """Instants in log order (completed and rolled back), then pending ones; `limit` keeps the last N."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise LakeSpecError("limit", f"{limit!r} is not a whole number >= 0.", "Give e.g. 10, or None for all.")
        head = self.commit_log.head()
        first = 0 if limit is None else max(0, head - limit + 1)
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
        """Log entries completed after `seq`, in order."""
        return list(self.commit_log.entries(seq))

    def is_finished(self, instant: str) -> bool:
        """True if `instant` is completed or rolled back (in the log)."""
        state = self.state()
        return instant in state.instants or instant in state.rolled_back

    def find_request(self, request_id: str, operation: str | None = None) -> LogEntry | None:
        """The completed entry recorded with `request_id` (makes retries idempotent), if any.

        With `operation`, an entry of another operation under the same request id is an error: a retry
        is the same operation with the same request id, so taking that entry for this one's result would
        turn the call into a silent no-op.
        """
        seq = self.state().requests.get(request_id)
        entry = None if seq is None else self.commit_log.read(seq)
        if entry is not None and operation is not None and entry.operation != operation:
            raise LakeSpecError("request_id", f"{request_id!r} was already used by instant {entry.instant} "
                                f"(operation {entry.operation}, log entry {entry.seq}); a retry is the same operation "
                                "with the same request id.",
                                f"Give this {operation} a request id of its own (Airflow's is dag/task/run/map index).")
        if entry is not None:  # a retry: its first try may have died after committing, before tidying up
            recovery.tidy_if_left(self, entry)
        return entry

    # -- reads ---------------------------------------------------------------------------------------
    def scan(self, filters: Iterable[Sequence[Any]] | None = None, as_of: AsOf = None) -> Scan:
        """Plan a read: the snapshot's files that may match `filters` (files_skipped tells how many not)."""
        snap = self.snapshot(as_of)
        parsed = parse_filters(filters, snap.spec)
        files = tuple(f for f in snap.files if may_match(f, parsed, snap.spec))
        return Scan(self.storage, snap, tuple(parsed), files)

    def read(self, spark: SparkSession, as_of: AsOf = None, filters: Iterable[Sequence[Any]] | None = None,
             columns: Sequence[str] | None = None) -> DataFrame:
        """Read a snapshot as a Spark DataFrame, skipping files by their stats.

        A bucketed table (or the bucketed partitions `filters` select) is read as a Spark bucketed table:
        point filters read one bucket, joins and group-bys on the bucket columns need no shuffle (see
        `buckets.catalog`, and `buckets.catalog.READ_CONF` for the session settings that help).
        """
        from airflow_lake.lake.buckets.catalog import scan_df

        if self.spec.primary_key:  # one row per key, merged over the upserts (`upsert.merge_read`)
            from airflow_lake.lake.upsert.merge_read import read_merged

            return read_merged(self, spark, as_of, filters, columns)
        scan = self.scan(filters, as_of)
        log.info("scan of %s at %d: %d of %d file(s) read, %d skipped", self.url, scan.snapshot.seq,
                 len(scan.files), scan.files_total, scan.files_skipped)
        df = scan_df(spark, scan)
        return df.select(*[f"`{c}`" for c in columns]) if columns else df

    def register(self, spark: SparkSession, name: str, as_of: AsOf = None,
                 filters: Iterable[Sequence[Any]] | None = None) -> DataFrame:
        """Make a snapshot queryable in Spark SQL as the temporary view `name` (bucketed like `read`)."""
        from airflow_lake.lake.buckets.catalog import register

        check_identifier(name, "name")
        if self.spec.primary_key:
            df = self.read(spark, as_of, filters)
            df.createOrReplaceTempView(name)
            return df
        return register(spark, self.scan(filters, as_of), name)

    def to_arrow(self, as_of: AsOf = None, columns: Sequence[str] | None = None) -> pa.Table:
        """A snapshot as an Arrow table, read with pyarrow on this machine (no Spark): for small tables."""
        from airflow_lake.lake.arrow_read import read_files

        snap = self.snapshot(as_of)
        if snap.spec.primary_key:
            raise LakeSpecError("table", f"{self.url!r} has a primary key: its files hold upserts to merge.",
                                "Read it with `read(spark)` (merged per key).")
        return read_files(self.storage, snap.spec, snap.files, columns)

    # -- writes --------------------------------------------------------------------------------------
    def begin(self, action: str, operation: str, metadata: Mapping[str, Any] | None = None,
              request_id: str | None = None, recover: bool = True, *, base: TableState | None = None
              ) -> Transaction:
        """Start a transaction; first rolls back instants whose writer died.

        `base`: the state the job read (its spec, its files, a query over the table itself), taken with
        `state()` BEFORE reading; default the latest. Every commit since the base is checked against what
        the transaction read and replaces, so a job must never read a newer state than its base.
        """
        if request_id is not None:
            self.find_request(request_id, operation)  # refuses a request id of another operation
        if recover:
            recovery.recover(self)
        return Transaction(self, action, operation, self.state() if base is None else base,
                           metadata=metadata or {}, request_id=request_id)

    def write(self, df: DataFrame, *, mode: str = "append", partitions: Sequence[Mapping[str, Any]] | str | None = None,
              request_id: str | None = None) -> LogEntry:
        """Append `df`, or overwrite the whole table, the listed partitions, or ('dynamic') those in `df`."""
        from airflow_lake.lake import write as lake_write

        return lake_write.write(self, df, mode=mode, partitions=partitions, request_id=request_id)

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

    def rollback(self, instant_ids: Iterable[str] | None = None, request_id: str | None = None) -> LogEntry | None:
        """Roll back the named pending instants, or (None) every one whose writer is dead."""
        if instant_ids is None:
            return recovery.recover(self, request_id=request_id)
        return recovery.rollback(self, list(instant_ids), request_id=request_id)

    def rollback_unchecked(self, instant_ids: Iterable[str], reason: str) -> LogEntry | None:
        """Roll back instants WITHOUT checking that their writer is dead: for instants the caller owns
        (its own aborted write, a task it killed). Use `rollback` for anyone else's."""
        return recovery.rollback_unchecked(self, instant_ids, reason)

    def clean(self, retain_hours: float | None = None, request_id: str | None = None) -> LogEntry | None:
        """Delete removed files no snapshot within `retain_hours` needs (default: the table property)."""
        return clean_module.clean(self, retain_hours, request_id=request_id)

    def vacuum(self, older_than_hours: float | None = None, *, dry_run: bool = False,
               request_id: str | None = None) -> VacuumResult:
        """Delete files under the root that no log entry holds, untouched for `older_than_hours` (default:
        the property `clean.retain.hours`); `dry_run` only lists them."""
        from airflow_lake.lake import vacuum as vacuum_module

        return vacuum_module.vacuum(self, older_than_hours, dry_run=dry_run, request_id=request_id)
