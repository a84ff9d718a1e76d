"""Snapshots: the fold of completed log entries, with checkpoints so resolving one stays fast.

`TableState` (`state.py`) is the fold after some sequence number. A checkpoint is that state written to
one file every `checkpoint.interval` entries (`checkpoints.py`); resolving a snapshot reads the newest
checkpoint at or before it and folds only the entries after.

Resolving the latest state lists nothing: the checkpoint pointer names the checkpoint to start from, and the
log's head was found from the same pointer (`CommitLog.head`). Only when the pointer's checkpoint is missing,
unreadable or newer than the snapshot asked for are the checkpoints listed.

A resolver keeps the newest state it built and the last checkpoints it decoded (they never change), so one
process asking for the latest state and then an older one (a restore, a time-travel read) decodes each
checkpoint once.

A snapshot older than the log keeps (`clean` expires entries past `log.retain.hours` that a checkpoint covers)
raises `LogEntryExpired`, naming the oldest snapshot still reachable (`oldest_reachable`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from airflow_lake.lake.errors import LakeError, LakeSnapshotNotFound, LakeTableNotFound, LakeUnsafePath
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.gc_pause import cyclic_gc_paused
from airflow_lake.lake.format.log import CommitLog, LogEntryExpired
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.format.table_state import TableState, upsert_versions
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

__all__ = ["Snapshot", "SnapshotResolver", "TableState", "files_in_partitions", "snapshot_of"]
log = logging.getLogger(__name__)
DECODED_CHECKPOINTS = 2  # decoded checkpoints a resolver keeps (each holds every live file of its snapshot)


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
    """Resolves table states from checkpoints and the log, caching the newest one it built and the last
    checkpoints it decoded."""

    def __init__(self, storage: Storage, log: CommitLog) -> None:
        self.storage = storage
        self.commit_log = log
        self._latest: TableState | None = None
        self._decoded: OrderedDict[int, TableState] = OrderedDict()  # checkpoint seq -> its state, untouched

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
        if cached is not None and cached.seq == target:
            return cached  # callers treat it as read-only, so it needs no copy (100k files: a copy is not free)
        with cyclic_gc_paused():
            state = cached.copy() if cached is not None and cached.seq < target else self._from_checkpoint(target)
            try:
                self._fold(state, target)
            except LogEntryExpired as err:
                # folding from a checkpoint older than the log's start (a stale pointer named it): from one after
                state = self._from_checkpoint(target, at_least=err.start - 1)
                try:
                    self._fold(state, target)
                except LogEntryExpired as again:
                    raise LogEntryExpired(f"snapshot {target} is older than the log keeps: {again}", again.seq,
                                          again.start) from None
        if target == head:
            self._latest = state
        return state  # callers treat it as read-only

    def _fold(self, state: TableState, target: int) -> None:
        for entry in self.commit_log.entries(state.seq, target):
            state.apply(entry)

    def _from_checkpoint(self, target: int, exclude: int | None = None, at_least: int = -1) -> TableState:
        """A copy of the newest readable checkpoint at or before `target` (never `exclude`, none before
        `at_least`); the empty state if none.

        Checkpoints only speed things up: a missing or unreadable one falls back to an older one, and in
        the end to folding the log from the start.
        """
        for seq, fmt in self._checkpoints(target, exclude):
            if seq < at_least:
                continue
            state = self._decoded.get(seq)
            if state is None:
                state = self._read_checkpoint(seq, fmt)
                if state is None:
                    continue
                self._decoded[seq] = state
                while len(self._decoded) > DECODED_CHECKPOINTS:
                    self._decoded.popitem(last=False)
            else:
                self._decoded.move_to_end(seq)
            return state.copy()  # the caller folds entries into it; the decoded one stays as the checkpoint
        return TableState()

    def _checkpoints(self, target: int, exclude: int | None) -> Iterator[tuple[int, str]]:
        """Candidate checkpoints, best first: the one the hint names, then the others newest first."""
        hint = self.commit_log.checkpoint_hint()  # (after an open: the pointer the open read)
        if hint is not None and hint[1] in paths.CHECKPOINT_FORMATS and hint[0] <= target and hint[0] != exclude:
            yield hint  # the usual case: nothing is listed
        listed = (c for c in map(paths.checkpoint_of, self.storage.list_dir(paths.CHECKPOINTS)) if c is not None)
        rank = {fmt: i for i, fmt in enumerate(paths.CHECKPOINT_FORMATS)}  # at one seq, Parquet first
        for candidate in sorted(listed, key=lambda c: (-c[0], rank[c[1]])):
            if candidate[0] <= target and candidate[0] != exclude and candidate != hint:
                yield candidate

    def _read_checkpoint(self, seq: int, fmt: str) -> TableState | None:
        # (imported here: checkpoints need pyarrow, which a state folded from the log alone does not)
        from airflow_lake.lake.format import checkpoints

        try:
            state = checkpoints.read(self.storage, seq, fmt, recover=partial(self._stats_at, seq))
        except FileNotFoundError:
            return None
        except LakeUnsafePath as err:  # damaged or planted: the log (the truth) decides without it
            log.warning("checkpoint %s is not used: %s; using an older one or the log", paths.checkpoint_file(seq, fmt),
                        err)
            return None
        except checkpoints.UNREADABLE as err:
            log.warning("checkpoint %s is unreadable (%s: %s); using an older one or the log",
                        paths.checkpoint_file(seq, fmt), type(err).__name__, err)
            return None
        if state.versions is None:  # written before the version index: build it once from the log
            state.versions = self._versions_upto(seq)
        return state

    def _versions_upto(self, seq: int) -> dict[int, int] | None:
        """The upsert version index after entry `seq`, from the log; None if the log cannot give it."""
        versions: dict[int, int] = {}
        try:
            for entry in self.commit_log.entries(-1, seq):
                for version in upsert_versions(entry):
                    versions[version] = entry.seq
        except LakeError as err:
            log.warning("no upsert version index before entry %d (%s): an upsert will look its versions up in the "
                        "whole log, and fail naming the entry it cannot read", seq, err)
            return None
        return versions

    def _stats_at(self, seq: int) -> dict[str, Mapping[str, ColumnStats]]:
        """The stats of the files live after `seq`, without checkpoint `seq` (whose stats are unreadable)."""
        with cyclic_gc_paused():
            state = self._from_checkpoint(seq, exclude=seq)
            for entry in self.commit_log.entries(state.seq, seq):
                state.apply(entry)
        return {path: data_file.stats for path, data_file in state.files.items()}

    def write_checkpoint(self, state: TableState) -> None:
        """Persist `state` as a checkpoint, point the hint at it, and delete the checkpoints retention does not
        keep (`history.kept_checkpoints`: all but the newest `checkpoint.retain.count`, the one the log's start
        folds from, and the one a clean is moving the start to)."""
        from airflow_lake.lake.format import checkpoints  # (pyarrow: see `_read_checkpoint`)

        checkpoints.write(self.storage, state)
        keep = int(stored_spec(state.spec).float_property("checkpoint.retain.count"))
        deleted = checkpoints.retain(self.storage, keep, self.commit_log.start)
        if deleted:
            log.info("deleted %d checkpoint(s) beyond the newest %d: %s", len(deleted), keep, ", ".join(deleted))

    def oldest_reachable(self) -> int:
        """The oldest snapshot that still resolves: 0 while the log is whole, else the oldest checkpoint at or after
        the start of the log (snapshots before it would fold expired entries)."""
        start = self.commit_log.start()
        if start == 0:
            return 0
        listed = {c[0] for c in map(paths.checkpoint_of, self.storage.list_dir(paths.CHECKPOINTS))
                  if c is not None and c[0] >= start}
        return min(listed, default=start)


def snapshot_of(state: TableState, cleaned_before: int = 0) -> Snapshot:
    """Freeze a state into a snapshot; `cleaned_before` comes from the newest state."""
    cleaned_before = max(cleaned_before, state.cleaned_before)
    if state.seq < cleaned_before:
        raise LakeSnapshotNotFound(
            f"snapshot {state.seq} is older than the retention: its removed files were cleaned "
            f"(snapshots from {cleaned_before} on are readable). Fix: read a newer snapshot.")
    return Snapshot(state.seq, state.instant, stored_spec(state.spec),
                    tuple(sorted(state.files.values(), key=lambda f: f.path)), state.completed_at)


def files_in_partitions(files: Iterable[DataFile],
                        partitions: Iterable[Mapping[str, str | None]]) -> list[DataFile]:
    """The files whose partition equals one of `partitions`."""
    keys = {tuple(sorted(p.items())) for p in partitions}
    return [f for f in files if f.partition_key() in keys]
