"""Snapshots: the fold of completed log entries, with checkpoints so resolving one stays fast.

`TableState` is the fold after some sequence number: the table spec, the live files, the removed
files not yet cleaned, and indexes (instant -> seq, request id -> seq). A checkpoint is that state
written to one file every `checkpoint.interval` entries; resolving a snapshot reads the newest
checkpoint at or before it and folds only the entries after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake import paths
from airflow_lake.lake.errors import LakeSnapshotNotFound, LakeTableNotFound
from airflow_lake.lake.files import DataFile
from airflow_lake.lake.log import CommitLog, LogEntry
from airflow_lake.lake.spec import TableSpec
from airflow_lake.lake.storage import Storage

STATE_FORMAT = 1


@dataclass
class TableState:
    """The table after log entry `seq` (mutable while folding, frozen in a Snapshot)."""

    seq: int = -1
    instant: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    files: dict[str, DataFile] = field(default_factory=dict)
    tombstones: dict[str, list[float]] = field(default_factory=dict)  # path -> [removed seq, removed at]
    instants: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    rolled_back: dict[str, int] = field(default_factory=dict)  # instant -> seq of its rollback
    cleaned_before: int = 0  # snapshots before this seq may miss cleaned files
    completed_at: float = 0.0

    def apply(self, entry: LogEntry) -> None:
        """Fold one entry into the state."""
        if entry.seq != self.seq + 1:
            raise LakeSnapshotNotFound(f"log entry {entry.seq} follows {self.seq}: the log has a gap.")
        if "spec" in entry.metadata:
            self.spec = dict(entry.metadata["spec"])
        for path in entry.removed:
            if self.files.pop(path, None) is not None:
                self.tombstones[path] = [entry.seq, entry.completed_at]
        for data_file in entry.added:
            self.files[data_file.path] = data_file
        if entry.action == "clean":
            for path in entry.metadata.get("deleted", ()):
                self.tombstones.pop(path, None)
            self.cleaned_before = max(self.cleaned_before, int(entry.metadata.get("cleaned_before", 0)))
        for instant in entry.rolled_back:
            self.rolled_back[instant] = entry.seq
        self.instants[entry.instant] = entry.seq
        if entry.request_id:
            self.requests[entry.request_id] = entry.seq
        self.seq = entry.seq
        self.instant = entry.instant
        self.completed_at = entry.completed_at

    def copy(self) -> TableState:
        """A copy that folding more entries does not change."""
        return TableState(self.seq, self.instant, dict(self.spec), dict(self.files),
                          dict(self.tombstones), dict(self.instants), dict(self.requests),
                          dict(self.rolled_back), self.cleaned_before, self.completed_at)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (a checkpoint)."""
        return {
            "format": STATE_FORMAT, "seq": self.seq, "instant": self.instant, "spec": self.spec,
            "files": [f.to_dict() for f in self.files.values()], "tombstones": self.tombstones,
            "instants": self.instants, "requests": self.requests, "rolled_back": self.rolled_back,
            "cleaned_before": self.cleaned_before, "completed_at": self.completed_at,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TableState:
        """Inverse of `to_dict`."""
        files = (DataFile.from_dict(f) for f in raw["files"])
        return cls(int(raw["seq"]), raw["instant"], dict(raw["spec"]), {f.path: f for f in files},
                   dict(raw["tombstones"]), dict(raw["instants"]), dict(raw["requests"]),
                   dict(raw["rolled_back"]), int(raw["cleaned_before"]), float(raw["completed_at"]))


@dataclass(frozen=True)
class Snapshot:
    """The table as of one log entry: its spec and live files."""

    seq: int
    instant: str
    spec: TableSpec
    files: tuple[DataFile, ...]
    completed_at: float

    @property
    def rows(self) -> int:
        """Total rows in live files."""
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        """Total size of live files."""
        return sum(f.bytes for f in self.files)

    def partitions(self) -> dict[tuple[tuple[str, str | None], ...], list[DataFile]]:
        """Live files grouped by partition."""
        out: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
        for data_file in self.files:
            out.setdefault(data_file.partition_key(), []).append(data_file)
        return out


class SnapshotResolver:
    """Resolves table states from checkpoints and the log, caching the newest one it built."""

    def __init__(self, storage: Storage, log: CommitLog) -> None:
        self.storage = storage
        self.commit_log = log
        self._latest: TableState | None = None

    def state(self, seq: int | None = None) -> TableState:
        """The state after entry `seq` (default: the head of the log)."""
        head = self.commit_log.head()
        if head < 0:
            raise LakeTableNotFound(f"no lake table at {self.storage.url!r}. Fix: create it first "
                                    "(LakeTable.create or the create_table operation).")
        target = head if seq is None else seq
        if target < 0 or target > head:
            raise LakeSnapshotNotFound(f"snapshot {target} does not exist; the log ends at {head}.")
        cached = self._latest
        state = cached.copy() if cached is not None and cached.seq <= target else self._from_checkpoint(target)
        for entry in self.commit_log.entries(state.seq, target):
            state.apply(entry)
        if target == head:
            self._latest = state
        return state  # callers treat it as read-only

    def _from_checkpoint(self, target: int) -> TableState:
        """The newest readable checkpoint at or before `target`; the empty state if there is none.

        Checkpoints only speed things up: a missing or unreadable one falls back to an older one, and in
        the end to folding the log from the start.
        """
        try:
            hint = int(self.storage.read_json(paths.LAST_CHECKPOINT)["seq"])
        except (FileNotFoundError, KeyError, ValueError):
            hint = -1
        if 0 <= hint <= target:
            state = self._read_checkpoint(hint)
            if state is not None:
                return state
        older = (s for s in (paths.seq_of(n) for n in self.storage.list_dir(paths.CHECKPOINTS))
                 if s is not None and s <= target and s != hint)
        for seq in sorted(older, reverse=True):
            state = self._read_checkpoint(seq)
            if state is not None:
                return state
        return TableState()

    def _read_checkpoint(self, seq: int) -> TableState | None:
        try:
            return TableState.from_dict(self.storage.read_json(paths.checkpoint_file(seq)))
        except (FileNotFoundError, KeyError, ValueError):
            return None

    def write_checkpoint(self, state: TableState) -> None:
        """Persist `state` as a checkpoint and point the hint at it."""
        self.storage.write_json(paths.checkpoint_file(state.seq), state.to_dict())
        self.storage.write_json(paths.LAST_CHECKPOINT, {"seq": state.seq})


def snapshot_of(state: TableState, cleaned_before: int = 0) -> Snapshot:
    """Freeze a state into a snapshot; `cleaned_before` comes from the newest state."""
    cleaned_before = max(cleaned_before, state.cleaned_before)
    if state.seq < cleaned_before:
        raise LakeSnapshotNotFound(
            f"snapshot {state.seq} is older than the retention: its removed files were cleaned "
            f"(snapshots from {cleaned_before} on are readable). Fix: read a newer snapshot.")
    return Snapshot(state.seq, state.instant, TableSpec.from_dict(state.spec),
                    tuple(sorted(state.files.values(), key=lambda f: f.path)), state.completed_at)


def files_in_partitions(files: Iterable[DataFile],
                        partitions: Iterable[Mapping[str, str | None]]) -> list[DataFile]:
    """The files whose partition equals one of `partitions`."""
    keys = {tuple(sorted(p.items())) for p in partitions}
    return [f for f in files if f.partition_key() in keys]
