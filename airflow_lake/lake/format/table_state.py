"""`TableState`: the fold of completed log entries after some sequence number.

The state holds the table spec, the live files, the removed files not yet cleaned, and indexes
(instant -> seq, request id -> seq, rolled-back instant -> seq, upsert version -> seq of the upsert that
applied it, the seqs of the entries that set the spec). Snapshots freeze it (`snapshot.py`); checkpoints store
it (`checkpoints.py`).

A `restore` entry (`maintenance/restore.py`) sets the upsert version index, the request index and the consumed
positions to those of the snapshot it restores (its metadata `versions`, `requests` and `consumed`): what it undid
is no longer applied, committed or consumed.

`consumed` (upstream table identity -> seq) is how far this table consumed each upstream's changes, from the
entries' metadata `consumed` (`consumed.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeSnapshotNotFound
from airflow_lake.lake.format.consumed import CONSUMED, fold_consumed, positions_of
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.identity import TABLE_ID
from airflow_lake.lake.format.log import COMPLETES, PLAN_REQUEST_ID, LogEntry
from airflow_lake.lake.spec.bucketing import MURMUR3, Bucketing

JSON_FORMAT = 1  # the JSON form of `to_dict`, which checkpoints used before they were Parquet
UPSERT_ACTION = "upsert"  # entries whose metadata `versions` the version index records (`upsert/versions.py`)
CREATE_ACTION = "create"  # the first entry: its metadata holds the table id
RESTORE_ACTION = "restore"  # entries whose metadata `versions` and `requests` replace the indexes


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
    # version -> seq of the upsert entry that applied it (a later replacing upsert wins); None: not known
    # (a state read from a checkpoint written before the index: `SnapshotResolver` rebuilds it from the log)
    versions: dict[int, int] | None = field(default_factory=dict)
    # seqs of the entries that set the spec, oldest first (0: the create), so the spec's history costs a few
    # log reads (`spec_history.py`); None: not known (a checkpoint written before the index)
    spec_changes: list[int] | None = field(default_factory=list)
    # the id the create entry gave the table (`identity.py`); None: a table created before ids existed
    table_id: str | None = None
    # upstream table identity -> the upstream seq this table consumed up to (`consumed.py`)
    consumed: dict[str, int] = field(default_factory=dict)

    def apply(self, entry: LogEntry) -> None:
        """Fold one entry into the state."""
        if entry.seq != self.seq + 1:
            raise LakeSnapshotNotFound(f"log entry {entry.seq} follows {self.seq}: the log has a gap.")
        if entry.action == CREATE_ACTION and isinstance(entry.metadata.get(TABLE_ID), str):
            self.table_id = entry.metadata[TABLE_ID]
        if "spec" in entry.metadata:
            if entry.metadata["spec"].get("bucket") != self.spec.get("bucket"):  # else every file reads as before
                _stamp_bucketing(self.files, self.spec)
            self.spec = dict(entry.metadata["spec"])
            if self.spec_changes is not None:
                self.spec_changes.append(entry.seq)
        for path in entry.removed:
            if self.files.pop(path, None) is not None:
                self.tombstones[path] = [entry.seq, entry.completed_at]
        for data_file in entry.added:
            self.files[data_file.path] = data_file
            # a restore re-adds removed files: no longer removed, so `clean` must not delete them
            self.tombstones.pop(data_file.path, None)
        if entry.action == "clean":
            for path in entry.metadata.get("deleted", ()):
                self.tombstones.pop(path, None)
            self.cleaned_before = max(self.cleaned_before, int(entry.metadata.get("cleaned_before", 0)))
        for instant in entry.rolled_back:
            self.rolled_back[instant] = entry.seq
        self.instants[entry.instant] = entry.seq
        completes = entry.metadata.get(COMPLETES)
        if isinstance(completes, str):  # a clustering plan's requested instant, completed by this entry
            self.instants[completes] = entry.seq
            plan_request = entry.metadata.get(PLAN_REQUEST_ID)
            if isinstance(plan_request, str) and plan_request:  # the schedule's retry finds its plan executed
                self.requests.setdefault(plan_request, entry.seq)
        if entry.action == RESTORE_ACTION and "requests" in entry.metadata:
            self.requests = {str(k): int(v) for k, v in entry.metadata["requests"].items()}
        if entry.request_id:
            self.requests[entry.request_id] = entry.seq
        if entry.action == RESTORE_ACTION and "versions" in entry.metadata:
            self.versions = {}  # known again, even after a checkpoint from before the index
        if self.versions is not None:
            fold_versions(self.versions, entry)
        fold_consumed(self.consumed, entry.metadata, restore=entry.action == RESTORE_ACTION)
        self.seq = entry.seq
        self.instant = entry.instant
        self.completed_at = entry.completed_at

    def copy(self) -> TableState:
        """A copy that folding more entries does not change."""
        return TableState(self.seq, self.instant, dict(self.spec), dict(self.files),
                          dict(self.tombstones), dict(self.instants), dict(self.requests),
                          dict(self.rolled_back), self.cleaned_before, self.completed_at,
                          None if self.versions is None else dict(self.versions),
                          None if self.spec_changes is None else list(self.spec_changes), self.table_id,
                          dict(self.consumed))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the legacy checkpoint format; also handy for tools)."""
        return {
            "format": JSON_FORMAT, "seq": self.seq, "instant": self.instant, "spec": self.spec,
            "files": [f.to_dict() for f in self.files.values()], "tombstones": self.tombstones,
            "instants": self.instants, "requests": self.requests, "rolled_back": self.rolled_back,
            "cleaned_before": self.cleaned_before, "completed_at": self.completed_at,
            **({} if self.versions is None else {"versions": versions_to_pairs(self.versions)}),
            **({} if self.spec_changes is None else {"spec_changes": self.spec_changes}),
            **({} if self.table_id is None else {TABLE_ID: self.table_id}),
            **({CONSUMED: self.consumed} if self.consumed else {}),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TableState:
        """Inverse of `to_dict`."""
        files = (DataFile.from_dict(f) for f in raw["files"])
        return cls(int(raw["seq"]), raw["instant"], dict(raw["spec"]), {f.path: f for f in files},
                   dict(raw["tombstones"]), dict(raw["instants"]), dict(raw["requests"]),
                   dict(raw["rolled_back"]), int(raw["cleaned_before"]), float(raw["completed_at"]),
                   versions_from_pairs(raw.get("versions")), spec_changes_from(raw.get("spec_changes")),
                   table_id_from(raw.get(TABLE_ID)), positions_of(raw.get(CONSUMED)))


def upsert_versions(entry: LogEntry) -> list[int]:
    """The versions an upsert entry applied (none for other entries)."""
    if entry.action != UPSERT_ACTION:
        return []
    return [int(v) for v in entry.metadata.get("versions") or ()]


def fold_versions(versions: dict[int, int], entry: LogEntry) -> None:
    """Fold one entry into an upsert version index: an upsert records its versions, a restore resets the index to
    the one of the snapshot it restored."""
    if entry.action == RESTORE_ACTION and "versions" in entry.metadata:
        versions.clear()
        versions.update(versions_from_pairs(entry.metadata["versions"]) or {})
    for version in upsert_versions(entry):
        versions[version] = entry.seq


def versions_to_pairs(versions: Mapping[int, int]) -> list[list[int]]:
    """The version index as JSON can hold it (object keys are strings; versions are 64-bit integers)."""
    return [[version, seq] for version, seq in sorted(versions.items())]


def versions_from_pairs(pairs: Any) -> dict[int, int] | None:
    """Inverse of `versions_to_pairs`; None when a stored state predates the index."""
    return None if pairs is None else {int(version): int(seq) for version, seq in pairs}


def spec_changes_from(raw: Any) -> list[int] | None:
    """The stored spec change index; None when a stored state predates it."""
    return None if raw is None else [int(seq) for seq in raw]


def table_id_from(raw: Any) -> str | None:
    """The stored table id; None when a stored state predates ids (or the table does)."""
    return raw if isinstance(raw, str) and raw else None


def _stamp_bucketing(files: dict[str, DataFile], spec: Mapping[str, Any]) -> None:
    """Before the spec changes, give bucketed files that do not record their bucketing (written before files
    did) the bucketing of the spec they were written under, so they are not read under the new one."""
    bucket = spec.get("bucket")
    if not bucket:
        return
    key = Bucketing(tuple(bucket["columns"]), int(bucket["count"]), bucket.get("hash") or MURMUR3).key()
    for path, data_file in files.items():
        if data_file.bucket is not None and data_file.bucketing is None:
            files[path] = dataclasses.replace(data_file, bucketing=key)
