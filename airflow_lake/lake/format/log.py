"""The commit log: one immutable JSON file per completed action, numbered 0, 1, 2, ...

Completing an action is the exclusive creation of the next number. Two writers racing for the same
number cannot both win, which totally orders completions and makes every commit atomic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import commit_info, paths
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.storage import Storage

COMPLETES = "completes"  # log entry metadata: the requested instant (plan) the entry completes
# ... and the request id the plan was scheduled under: a retry of that schedule finds the plan executed
PLAN_REQUEST_ID = "plan_request_id"

ACTIONS = frozenset({"create", "commit", "replace", "upsert", "clean", "rollback", "restore", "alter"})


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


class CommitLog:
    """Reads and appends log entries of one table."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._known = -1  # a sequence number known to exist; the log only grows, without gaps

    def head(self) -> int:
        """The highest sequence number in the log, -1 if empty.

        The first call lists the log; later calls probe forward from the last head seen, which costs one
        existence check per new entry instead of a listing of thousands of files.
        """
        if self._known < 0:
            seqs = [s for s in (paths.seq_of(n) for n in self.storage.list_dir(paths.LOG)) if s is not None]
            self._known = max(seqs, default=-1)
            return self._known
        known = self._known  # a local probe: threads sharing this object only ever store verified numbers
        while self.storage.exists(paths.log_file(known + 1)):
            known += 1
        self._known = max(self._known, known)
        return known

    def read(self, seq: int) -> LogEntry:
        """The entry with sequence number `seq`; a `LakeError` naming the file if it is missing or damaged."""
        rel = paths.log_file(seq)
        try:
            raw = self.storage.read_json(rel)
        except FileNotFoundError:
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
        return entry

    def entries(self, after: int, upto: int | None = None) -> Iterator[LogEntry]:
        """Entries after `after` up to `upto` (inclusive; default the head), in order."""
        end = self.head() if upto is None else upto
        for seq in range(after + 1, end + 1):
            yield self.read(seq)

    def try_append(self, entry: LogEntry) -> bool:
        """Create the entry's file; False if another writer took that number first. Every writer of the log
        passes here, so this is where an entry records the context's commit info (`commit_info`)."""
        raw = entry.to_dict()
        raw["metadata"] = commit_info.stamp(raw["metadata"])
        return self.storage.create_json(paths.log_file(entry.seq), raw)  # head() probes past it
