"""The commit log: one immutable JSON file per completed action, numbered 0, 1, 2, ...

Completing an action is the exclusive creation of the next number. Two writers racing for the same
number cannot both win, which totally orders completions and makes every commit atomic.

Opening a log never lists it: the pointer to the newest checkpoint (`_lake/_last_checkpoint.json`) names an
entry known to exist, and only the entries after it are looked for (`CommitLog.head`). On a store each later look
for new entries is one HEAD of the next entry, and one listing after the known head only when it exists. `clean`
may expire entries older than the table's log retention (`log.retain.hours`) once a checkpoint covers them, oldest
first and never entry 0 (the table's creation: its spec and request id), so the entries left are entry 0 and one
run without holes up to the head (`CommitLog.start`); reading an expired one raises `LogEntryExpired`.

A writer looks the head up once per step and carries it (`carrying`): within such a section `head()` answers the
head last seen instead of asking the store again, and entries read or written in it are not read twice. A stale
head is harmless there only because an append at a stale head fails (the entry exists: the exclusive create
catches it), after which the next `head()` looks again. Whatever must see the log as it is now — whether an
instant id is taken (`instants.request` asks `uncarried`), whether a request already committed (`begin` looks
first) — looks the head up.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeError, LakeSnapshotNotFound
from airflow_lake.lake.format import commit_info, paths
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.storage import Storage, dumps, loads

COMPLETES = "completes"  # log entry metadata: the requested instant (plan) the entry completes
# ... and the request id the plan was scheduled under: a retry of that schedule finds the plan executed
PLAN_REQUEST_ID = "plan_request_id"

ACTIONS = frozenset({"create", "commit", "replace", "upsert", "clean", "rollback", "restore", "alter"})
RETENTION_PROPERTY = "log.retain.hours"
SECTION_ENTRIES = 256  # entries a carrying section keeps per log (the newest; a fold of thousands reads the rest)
log = logging.getLogger(__name__)


_UNREAD = object()


class _Carry(threading.local):
    """Per thread: how deep in `carrying` sections it is, which section (entries are kept per section), and the
    logs' section states to empty when it ends."""

    depth = 0
    section = 0
    fresh = 0  # within `uncarried`: heads are looked up (entries kept are still used: they never change)
    touched: list[_Section]

    def __init__(self) -> None:
        self.touched = []


_carry = _Carry()


@contextmanager
def carrying() -> Iterator[None]:
    """Within: `CommitLog.head()` answers the head this process last saw (no request; the first call of a log not
    opened yet still opens it), until an append of this thread fails, and an entry read or written in the section
    is not read again. For one writer's step (begin, commit, abort), whose appends are exclusive creates: a
    stale head only costs a failed create. Per thread; sections nest."""
    if _carry.depth == 0:
        _carry.section += 1
    _carry.depth += 1
    try:
        yield
    finally:
        _carry.depth -= 1
        if _carry.depth == 0:
            _carry.section += 1
            for state in _carry.touched:  # what the section kept is dropped
                state.entries.clear()
            _carry.touched.clear()


@contextmanager
def uncarried() -> Iterator[None]:
    """Within: `head()` looks the head up, even inside a `carrying` section (for whatever must see the log as it
    is now); entries the section kept are still not read again (an entry never changes)."""
    _carry.fresh += 1
    try:
        yield
    finally:
        _carry.fresh -= 1


class LogEntryExpired(LakeSnapshotNotFound):
    """A log entry `clean` deleted: it was older than the table's log retention and a checkpoint covered it."""

    def __init__(self, message: str, seq: int, start: int) -> None:
        super().__init__(message)
        self.seq = seq
        self.start = start  # the first entry of the log's run up to the head (entry 0 is kept besides)


def checkpoint_pointer(storage: Storage) -> tuple[int, str] | None:
    """(seq, format) of the newest checkpoint as `_lake/_last_checkpoint.json` names it; None if it is missing or
    damaged. Only a hint: whoever uses it checks that what it names exists. (Read here, not in `checkpoints.py`,
    so opening a log imports no pyarrow.)"""
    try:
        raw = storage.read_json(paths.LAST_CHECKPOINT)
        seq = raw["seq"]
        fmt = raw.get("format", "json")  # pointers without a format predate Parquet checkpoints
    except (FileNotFoundError, KeyError, ValueError, TypeError, AttributeError):
        return None
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0 or not isinstance(fmt, str):
        return None
    return seq, fmt


@dataclass(frozen=True)
class LogEntry:
    """A completed action: what it added and removed, and its metrics."""

    seq: int
    instant: str
    action: str
    operation: str
    started_at: float
    completed_at: float
    base_seq: int | None = None
    added: tuple[DataFile, ...] = ()
    removed: tuple[str, ...] = ()
    rolled_back: tuple[str, ...] = ()
    request_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "seq": self.seq,
            "instant": self.instant,
            "action": self.action,
            "operation": self.operation,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "base_seq": self.base_seq,
            "added": [f.to_dict() for f in self.added],
            "removed": list(self.removed),
            "rolled_back": list(self.rolled_back),
            "request_id": self.request_id,
            "metadata": dict(self.metadata),
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LogEntry:
        """Inverse of `to_dict`."""
        return cls(
            seq=int(raw["seq"]),
            instant=raw["instant"],
            action=raw["action"],
            operation=raw.get("operation", raw["action"]),
            started_at=float(raw.get("started_at", 0.0)),
            completed_at=float(raw.get("completed_at", 0.0)),
            base_seq=raw.get("base_seq"),
            added=tuple(DataFile.from_dict(f) for f in raw.get("added") or ()),
            removed=tuple(raw.get("removed") or ()),
            rolled_back=tuple(raw.get("rolled_back") or ()),
            request_id=raw.get("request_id"),
            metadata=dict(raw.get("metadata") or {}),
            metrics=dict(raw.get("metrics") or {}),
        )

    def with_seq(self, seq: int) -> LogEntry:
        """The same entry numbered `seq` (a writer that lost a race retries at the next number)."""
        raw = self.to_dict()
        raw["seq"] = seq
        return LogEntry.from_dict(raw)


def check_paths(entry: LogEntry, source: str) -> None:
    """Every path an entry names — the files it adds and removes, the files a clean deleted (`metadata.deleted`)
    — inside the table's data area (`paths.confined`), or `LakeUnsafePath` naming `source` and the field: checked
    when the entry is read, so no fold, read, conflict check or clean ever sees such a path."""
    paths.confined([f.path for f in entry.added], f"{source} (added)")
    paths.confined(entry.removed, f"{source} (removed)")
    deleted = entry.metadata.get("deleted")
    if deleted is not None and entry.action == "clean":
        paths.confined(deleted if isinstance(deleted, list) else [deleted], f"{source} (metadata.deleted)")


class CommitLog:
    """Reads and appends log entries of one table."""

    def __init__(self, storage: Storage, explain_expired: Callable[[int, int], str] | None = None) -> None:
        self.storage = storage
        self._known = -1  # a sequence number known to exist; the log only grows, without gaps
        self._start = 1  # entries 1 .. _start-1 are known to be expired (`start`)
        # the message of `LogEntryExpired` for (seq, start), naming the retention and the oldest reachable snapshot
        # (the table knows them: its spec and its checkpoints); None: a plainer message
        self.explain_expired = explain_expired
        self._local = _Section()  # per thread: what this log keeps within a `carrying` section
        self._pointer: Any = _UNREAD  # the checkpoint pointer the open read, until `checkpoint_hint` takes it

    def __getstate__(self) -> dict[str, Any]:  # pickles and copies without what only this process's threads keep
        state = dict(self.__dict__)
        del state["_local"], state["_pointer"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = _Section()
        self._pointer = _UNREAD

    def head(self) -> int:
        """The highest sequence number in the log, -1 if empty.

        The first call starts from the entry the checkpoint pointer names (`_open`), later calls from the last
        head seen: locally one existence check per new entry; on a store one HEAD of the next entry, and if it
        exists one listing of the entries after the known head — never a listing of thousands of files. Within
        `carrying`, the head last seen (see there).
        """
        if self._known < 0:
            found = self._open()
            self._known = max(self._known, found)
            return found
        section = self._section()
        if section is not None and not section.stale and not _carry.fresh:
            return self._known
        known = self._probe(self._known)  # threads sharing this object only ever store verified numbers
        self._known = max(self._known, known)
        if section is not None:
            section.stale = False
        return known

    def _probe(self, known: int) -> int:
        """The head, found forward from entry `known` (which exists)."""
        if not self._has(known + 1):
            return known
        known += 1
        if self.storage.seeks:  # one listing for however many landed meanwhile (a race: many)
            after = {s for s in map(paths.seq_of, self.storage.list_after(paths.LOG, _name(known))) if s is not None}
            while known + 1 in after:  # (without holes: a stray file far ahead is no entry)
                known += 1
            return known
        while self._has(known + 1):
            known += 1
        return known

    def _has(self, seq: int) -> bool:
        """Whether entry `seq` exists: a stat locally (an `exists`, as always), one HEAD of its key on a store (not a
        listing: a log entry is a file)."""
        rel = paths.log_file(seq)
        return self.storage.exists(rel) if self.storage.local else self.storage.is_file(rel)

    def _section(self) -> _Section | None:
        """This thread's state of the `carrying` section it is in (None outside one)."""
        if _carry.depth == 0:
            return None
        local = self._local
        if local.section != _carry.section:  # a new section: nothing carried over from an older one
            local.section, local.stale = _carry.section, False
            local.entries.clear()
            _carry.touched.append(local)
        return local

    def _keep(self, entry: LogEntry) -> None:
        """Keep an entry for the rest of this thread's section (entries never change once written)."""
        section = self._section()
        if section is not None:
            section.entries[entry.seq] = entry
            while len(section.entries) > SECTION_ENTRIES:
                section.entries.popitem(last=False)

    def _open(self) -> int:
        """The head, found from the checkpoint pointer: the entry it names must exist (a pointer left behind by a
        crash, a damaged one, or one naming an expired entry is not trusted), then the entries after it are
        looked for — on local disk by existence checks (at most `checkpoint.interval` of them, usually), on a
        store by one listing that starts after it. Without a usable pointer (a young table, a table written
        before pointers, a damaged pointer): a listing of the whole log, as before."""
        pointer = self._pointer = checkpoint_pointer(self.storage)
        if pointer is not None and pointer[0] >= 1:  # (entry 0 is never expired: it proves nothing about a run)
            seq = pointer[0]
            if self.storage.local:
                if self.storage.exists(paths.log_file(seq)):
                    while self.storage.exists(paths.log_file(seq + 1)):
                        seq += 1
                    return seq
            else:
                after = self.storage.list_after(paths.LOG, _name(seq - 1))  # entry `seq` itself, and those after
                seqs = [s for s in map(paths.seq_of, after) if s is not None]
                if seq in seqs:
                    return max(seqs)
            log.info("the checkpoint pointer of %s names entry %d, which is not in the log; listing the log",
                     self.storage.url, seq)
        seqs = [s for s in (paths.seq_of(n) for n in self.storage.list_dir(paths.LOG)) if s is not None]
        return max(seqs, default=-1)

    def checkpoint_hint(self) -> tuple[int, str] | None:
        """The checkpoint pointer (`checkpoint_pointer`): the first time after the open, the one the open read (the
        resolution that follows an open does not read it again); then read each time. A hint either way."""
        pointer, self._pointer = self._pointer, _UNREAD
        return checkpoint_pointer(self.storage) if pointer is _UNREAD else pointer  # type: ignore[no-any-return]

    def start(self) -> int:
        """The first entry of the run of entries that ends at the head: 0, unless `clean` expired older entries
        (`log.retain.hours`), then the first one it left. (Entry 0, the table's creation, is kept either way.)

        Entries are expired oldest first, so the entries left after entry 0 are one run: a binary search with
        existence checks finds where it starts (about 17 checks for 100,000 entries; one when nothing expired
        since the last call).
        """
        head = self.head()
        low = self._start  # known expired below it: entries 1 .. low-1
        if head < low or self._has(low):
            first = low
        else:
            high = head  # invariant: entry `low` is gone, entry `high` exists
            while high - low > 1:
                middle = (low + high) // 2
                if self._has(middle):
                    high = middle
                else:
                    low = middle
            first = high
        self._start = max(self._start, first)
        return 0 if first <= 1 else first

    def read(self, seq: int) -> LogEntry:
        """The entry with sequence number `seq`; a `LakeError` naming the file if it is missing or damaged."""
        section = self._section()
        if section is not None and seq in section.entries:
            return section.entries[seq]
        entry = self._read(seq)
        self._keep(entry)
        return entry

    def _read(self, seq: int) -> LogEntry:
        rel = paths.log_file(seq)
        try:
            raw = self.storage.read_json(rel)
        except FileNotFoundError:
            self._raise_if_expired(seq)
            head = self._known
            later = f", but the log goes on to {paths.log_file(head)}" if head > seq else ""
            raise LakeError(
                f"log entry {self.storage.url}/{rel} is missing{later}. Commits never skip a number, so either "
                "that entry was lost or a later file is a stray. Fix: restore the entry from a backup, or move "
                "stray files out of the log directory.") from None
        except ValueError as err:
            raise LakeError(f"log entry {self.storage.url}/{rel} is damaged (not JSON: {err}). Fix: restore it "
                            "from a backup; a cut-short entry means the disk lost data after the commit.") from err
        try:
            entry = LogEntry.from_dict(raw)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise LakeError(f"log entry {self.storage.url}/{rel} is damaged (a missing or malformed field: "
                            f"{type(err).__name__}: {err}). Fix: restore it from a backup.") from err
        if entry.seq != seq:
            raise LakeError(f"log entry {self.storage.url}/{rel} says it is entry {entry.seq}. Fix: put it back "
                            f"under its own name ({paths.log_file(entry.seq)}) or restore the original.")
        check_paths(entry, f"log entry {self.storage.url}/{rel}")
        return entry

    def _raise_if_expired(self, seq: int) -> None:
        """Raise `LogEntryExpired` if the missing entry `seq` lies before the start of the log."""
        if seq < 1:
            return
        start = self.start()
        if seq >= start:
            return
        message = None
        if self.explain_expired is not None:
            try:
                message = self.explain_expired(seq, start)
            except Exception:  # the message is a courtesy: never hide the error behind another one
                log.debug("explaining expired log entry %d failed", seq, exc_info=True)
        if message is None:
            message = (f"log entry {seq} of {self.storage.url} has expired: `clean` deleted the log entries before "
                       f"{start} (older than the table's log retention, {RETENTION_PROPERTY}, and covered by a "
                       f"checkpoint). Fix: ask for snapshot {start} or later (`airflow-lake timeline` lists the "
                       f"log that is left); to keep more history, raise {RETENTION_PROPERTY} (alter_table).")
        raise LogEntryExpired(message, seq, start)

    def entries(self, after: int, upto: int | None = None) -> Iterator[LogEntry]:
        """Entries after `after` up to `upto` (inclusive; default the head), in order."""
        end = self.head() if upto is None else upto
        for seq in range(after + 1, end + 1):
            yield self.read(seq)

    def try_append(self, entry: LogEntry) -> bool:
        """Create the entry's file; False if another writer took that number first. Every writer of the log
        passes here, so this is where an entry records the context's commit info (`commit_info`).

        Either way the head is known to be at least the entry's number afterwards; within `carrying` the entry
        created is kept (a fold after the commit does not read it back), and a failed create makes the next
        `head()` look the head up."""
        raw = entry.to_dict()
        raw["metadata"] = commit_info.stamp(raw["metadata"])
        data = dumps(raw)
        created = self.storage.create_bytes(paths.log_file(entry.seq), data)
        if entry.seq - 1 <= self._known:  # either way entry `seq` exists now (ours, or the one that took the number),
            self._known = max(self._known, entry.seq)  # and the log has no holes: the head is at least it
        section = self._section()
        if created:
            if section is not None:  # as a reader would read it back (what JSON made of it included)
                self._keep(LogEntry.from_dict(loads(data)))
        elif section is not None:
            section.stale = True  # the head carried was stale: the next `head()` looks again
        return created


class _Section(threading.local):
    """A log's per-thread state within a `carrying` section: which section, whether an append failed since the
    head was last looked up, and the entries read or written in it (newest last)."""

    section = -1
    stale = False
    entries: OrderedDict[int, LogEntry]

    def __init__(self) -> None:
        self.entries = OrderedDict()


def _name(seq: int) -> str:
    """The file name of log entry `seq` within the log directory."""
    return paths.log_file(seq)[len(paths.LOG) + 1:]
