"""Restore (Delta's RESTORE, Iceberg's `rollback_to_snapshot`): a new commit whose snapshot equals an earlier one.

The `restore` entry removes every live file the target snapshot does not hold and re-adds every file of the target
that is not live now (its `DataFile` record from the target state, stats included). Its metadata carries what the
fold needs to make the state equal to the target's: the target's `spec`, its upsert version index (`versions`,
pairs as `table_state.versions_to_pairs` writes them), its request-id index (`requests`) and its consumed upstream
positions (`consumed`, `format.consumed`), plus `restored_to` (seq and instant of the target). So after restoring
to before version 7 was upserted, version 7 is not applied any more, a task whose commit was undone runs again,
and an incremental job re-consumes the upstream changes the undone commits had consumed. History stays: the entries
in between are still in the log, and time travel to them works until `clean` deletes the files they need.

A re-added file must still be on disk and must have been removed less than the table's `clean.retain.hours` ago
(an older one may be deleted by a clean at this very moment): otherwise the restore is refused, nothing
committed. The restore conflicts with every commit since the state it read that changed files or the spec, and
with a `clean` that deleted a file it re-adds.
"""

from __future__ import annotations

import array as array_module
import dataclasses
import datetime as dt
import json
import logging
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeCommitConflict, LakeSpecError
from airflow_lake.lake.format import history, instants
from airflow_lake.lake.format.consumed import CONSUMED, recorded
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.log import RETENTION_PROPERTY, LogEntry, LogEntryExpired
from airflow_lake.lake.format.stats_columns import LazyStats, StatsColumns
from airflow_lake.lake.format.table_state import (
    RESTORE_ACTION,
    TableState,
    fold_versions,
    versions_to_pairs,
)
from airflow_lake.lake.spec.table_spec import stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)

OPERATION = "restore"
TARGET_FIELDS = ("to_seq", "to_instant", "to_timestamp")
PATHS_IN_MESSAGES = 3
_EPOCH = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
TIMELINE_FIX = "Pick a snapshot from `airflow-lake timeline PATH` (its seq or instant)."


# -- the target --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RestoreTarget:
    """Which snapshot to restore: exactly one of a log sequence number, an instant id or a point in time."""

    field: str  # one of TARGET_FIELDS: the spec field it came from, named in errors
    seq: int | None = None
    instant: str | None = None
    timestamp: float | None = None  # UNIX seconds: the last snapshot completed at or before it

    def describe(self) -> str:
        """The target as a user gave it."""
        if self.seq is not None:
            return f"snapshot {self.seq}"
        if self.instant is not None:
            return f"instant {self.instant}"
        return f"the last snapshot at or before {iso(self.timestamp or 0.0)}"

    def label(self, seq: int) -> str:
        """The target and the seq it resolved to, for messages."""
        return self.describe() if self.seq is not None else f"{self.describe()} (seq {seq})"

    def to_dict(self) -> dict[str, Any]:
        """The spec fields of this target (what a request fingerprints)."""
        value: Any = self.seq if self.seq is not None else self.instant if self.instant is not None else self.timestamp
        return {self.field: value}


# 9999-12-31T23:59:59Z: the last UNIX second a datetime (and `iso`) can take
LATEST_SECONDS = 253_402_300_799


def iso(seconds: float) -> str:
    """A UNIX time as ISO-8601 in UTC, to the millisecond."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_seq(value: Any, name: str = "to_seq") -> int:
    """A log sequence number: a whole number >= 0, or its digits as text (a rendered template)."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LakeSpecError(name, f"{value!r} is not a log sequence number.",
                            f"Give a whole number >= 0. {TIMELINE_FIX}")
    return value


def parse_instant(value: Any, name: str = "to_instant") -> str:
    """An instant id (17 digits, as the timeline shows it)."""
    text = value.strip() if isinstance(value, str) else value
    if not isinstance(text, str) or not instants.is_instant_id(text):
        raise LakeSpecError(name, f"{value!r} is not an instant id.",
                            f"Give the 17 digits (yyyyMMddHHmmssSSS) of a completed instant. {TIMELINE_FIX}")
    return text


def parse_timestamp(value: Any, name: str = "to_timestamp") -> float:
    """A point in time: UNIX seconds (a number, or its text), or ISO-8601 text (UTC unless it says otherwise)."""
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if _EPOCH.fullmatch(text):
            seconds = float(text)
        else:
            try:
                stamp = dt.datetime.fromisoformat(text)
            except ValueError:
                stamp = None
            if stamp is not None:
                seconds = (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)).timestamp()
    if seconds is not None and math.isfinite(seconds) and seconds > LATEST_SECONDS:  # no datetime holds it
        raise LakeSpecError(name, f"{value!r} is after the year 9999, the last time a date can name.",
                            "Give a time in UNIX seconds (e.g. 1772344800, not milliseconds) or ISO-8601 (e.g. "
                            "'2026-03-01T06:00:00Z'); to restore the latest snapshot, give its seq.")
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise LakeSpecError(name, f"{value!r} is not a point in time.",
                            "Give ISO-8601 (e.g. '2026-03-01T06:00:00Z'; without a zone it is UTC) or UNIX seconds "
                            "(e.g. 1772344800).")
    return seconds


def target_of(to_seq: Any = None, to_instant: Any = None, to_timestamp: Any = None) -> RestoreTarget:
    """The target from exactly one of the three fields (None: not given)."""
    given = [name for name, value in zip(TARGET_FIELDS, (to_seq, to_instant, to_timestamp), strict=True)
             if value is not None and value != ""]
    if len(given) != 1:
        problem = "no snapshot to restore was given" if not given else f"{' and '.join(given)} were both given"
        raise LakeSpecError(given[1] if len(given) > 1 else "to_seq", f"{problem}.",
                            "Give exactly one of to_seq (a log sequence number), to_instant (an instant id) or "
                            "to_timestamp (ISO-8601 or UNIX seconds).")
    if given == ["to_seq"]:
        return RestoreTarget("to_seq", seq=parse_seq(to_seq))
    if given == ["to_instant"]:
        return RestoreTarget("to_instant", instant=parse_instant(to_instant))
    return RestoreTarget("to_timestamp", timestamp=parse_timestamp(to_timestamp))


def target_from_text(text: str, name: str = "--to") -> RestoreTarget:
    """The target of the CLI's `--to`: an instant id (17 digits), else an all-digit seq, else a point in time."""
    value = text.strip()
    if instants.is_instant_id(value):
        return RestoreTarget("to_instant", instant=value)
    if value.isascii() and value.isdigit():
        return RestoreTarget("to_seq", seq=int(value))
    return RestoreTarget("to_timestamp", timestamp=parse_timestamp(value, name))


def resolve(table: TableMetadata, target: RestoreTarget, latest: TableState) -> int:
    """The log sequence number of `target` (refused with the reason when there is no such snapshot)."""
    if target.seq is not None:
        if target.seq > latest.seq:
            hint = (f" (if {target.seq} is a time in UNIX seconds, give it as to_timestamp or with a decimal point: "
                    f"{target.seq}.0)") if target.seq > 10**8 else ""
            raise LakeSpecError(target.field, f"snapshot {target.seq} does not exist: the log of {table.url!r} ends at "
                                f"{latest.seq}{hint}.", TIMELINE_FIX)
        return target.seq
    if target.instant is not None:
        if target.instant in latest.instants:
            return latest.instants[target.instant]
        if target.instant in latest.rolled_back:
            problem = f"instant {target.instant} was rolled back: it never changed the table."
        else:
            problem = f"instant {target.instant} is not a completed instant of {table.url!r}."
        raise LakeSpecError(target.field, problem, TIMELINE_FIX)
    assert target.timestamp is not None
    return _seq_at(table, target, latest.seq)


def _seq_at(table: TableMetadata, target: RestoreTarget, head: int) -> int:
    """The snapshot current at the target's time: the newest entry that, with every entry before it, completed at
    or before it (`history.newest_before`: writers' clocks disagree, so a later entry may carry an earlier time
    and the log is read in order up to the first entry past the time) — of the log `clean` left."""
    when = target.timestamp or 0.0
    start = table.commit_log.start()
    first = table.commit_log.read(start).completed_at
    if when < first and start > 0:
        oldest = table.oldest_reachable()
        raise LakeSpecError(target.field, f"{iso(when)} is before the oldest snapshot the log still holds (seq "
                            f"{start}, completed {iso(first)}): `clean` expired the entries before it, older than "
                            f"the table's log retention ({RETENTION_PROPERTY}). The oldest snapshot still "
                            f"reachable is seq {oldest}.",
                            f"Give a time at or after {iso(first)}. {TIMELINE_FIX}")
    if when < first:
        raise LakeSpecError(target.field, f"{iso(when)} is before the table was created ({iso(first)}).",
                            f"Give a time at or after {iso(first)}. {TIMELINE_FIX}")
    found = history.newest_before(lambda seq: table.commit_log.read(seq).completed_at, start, head, when,
                                  inclusive=True)
    assert found is not None  # (entry `start` completed at or before `when`: checked above)
    return found


# -- the plan ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RestorePlan:
    """What a restore changes: the files it removes and re-adds, and whether the spec and indexes change."""

    table: str
    target: RestoreTarget
    base_seq: int  # the snapshot the plan was made from (the latest, when planned)
    seq: int  # the target snapshot
    instant: str
    completed_at: float
    removed: tuple[str, ...]
    readded: tuple[DataFile, ...]
    spec: Mapping[str, Any]
    spec_changed: bool
    versions: Mapping[int, int]
    versions_changed: bool
    requests: Mapping[str, int] = field(default_factory=dict)
    consumed: Mapping[str, int] = field(default_factory=dict)  # the target's consumed upstream positions
    consumed_changed: bool = False

    @property
    def noop(self) -> bool:
        """True when the latest snapshot already is the target (files, spec, upsert versions and consumed
        positions)."""
        return not self.removed and not self.readded and not self.spec_changed and not self.versions_changed \
            and not self.consumed_changed

    def metrics(self) -> dict[str, Any]:
        """What a restore reports besides its commit's counts."""
        return {"restored_to_seq": self.seq, "restored_to_instant": self.instant,
                "restored_to_completed_at": iso(self.completed_at), "restored_from_seq": self.base_seq,
                "files_readded": len(self.readded), "spec_changed": self.spec_changed,
                "versions_changed": self.versions_changed, "consumed_changed": self.consumed_changed}

    def to_dict(self) -> dict[str, Any]:
        """JSON form for a dry run: the counts and every path."""
        return {**self.metrics(), "table": self.table, "noop": self.noop, "removed": list(self.removed),
                "readded": [f.path for f in self.readded], "files_removed": len(self.removed),
                "rows_readded": sum(f.rows for f in self.readded)}


def plan(table: TableMetadata, target: RestoreTarget, *, latest: TableState | None = None,
         now: float | None = None) -> RestorePlan:
    """Plan restoring `target` from `latest` (default: the latest state); refused (`LakeSpecError`, nothing written)
    when the target does not exist, was cleaned, or needs files that are gone or that `clean` may delete now."""
    latest = table.state() if latest is None else latest
    seq = resolve(table, target, latest)
    if seq < latest.cleaned_before:
        oldest = latest.cleaned_before
        raise LakeSpecError(target.field, f"{target.label(seq)} is older than what `clean` kept: it "
                            f"deleted files that snapshot needs. The oldest restorable snapshot is seq {oldest} "
                            f"(instant {_instant_at(table, oldest)}).",
                            f"Restore seq {oldest} or later. To keep more history from now on, raise the table "
                            "property clean.retain.hours.")
    state = table.state(seq)
    readded = tuple(sorted((f for p, f in state.files.items() if p not in latest.files), key=lambda f: f.path))
    removed = tuple(sorted(p for p in latest.files if p not in state.files))
    _check_readded(table, target, seq, readded, latest=latest, now=time.time() if now is None else now)
    versions = state.versions if state.versions is not None else _versions_from_log(table, seq)
    current = latest.versions if latest.versions is not None else _versions_from_log(table, latest.seq)
    return RestorePlan(table.url, target, latest.seq, seq, state.instant, state.completed_at, removed, readded,
                       dict(state.spec), dict(state.spec) != dict(latest.spec), dict(versions),
                       dict(versions) != dict(current), dict(state.requests), dict(state.consumed),
                       dict(state.consumed) != dict(latest.consumed))


def _instant_at(table: TableMetadata, seq: int) -> str:
    try:
        return table.commit_log.read(seq).instant
    except LogEntryExpired:
        return "expired from the log"


def _versions_from_log(table: TableMetadata, seq: int) -> dict[int, int]:
    """The upsert version index after `seq`, folded from the log (a state from a checkpoint written before the
    index, whose log could not give it either: then this raises the log's error)."""
    versions: dict[int, int] = {}
    for entry in table.commit_log.entries(-1, seq):
        fold_versions(versions, entry)
    return versions


def _check_readded(table: TableMetadata, target: RestoreTarget, seq: int, readded: Iterable[DataFile], *,
                   latest: TableState, now: float) -> None:
    """Refuse re-adding files that are gone, or that `clean` may be deleting right now."""
    hours = stored_spec(latest.spec).float_property("clean.retain.hours")
    cutoff = now - hours * 3600
    cleaned, expired, missing = [], [], []
    for data_file in readded:
        tombstone = latest.tombstones.get(data_file.path)
        if tombstone is None:
            cleaned.append(data_file.path)
        elif float(tombstone[1]) < cutoff:
            expired.append((data_file.path, float(tombstone[1])))
    if cleaned:
        raise LakeSpecError(target.field, f"{target.label(seq)} needs {len(cleaned)} file(s) that `clean` "
                            f"deleted, e.g. {_some(cleaned)}.", f"Restore a newer snapshot. {TIMELINE_FIX}")
    if expired:
        oldest_path, oldest_at = min(expired, key=lambda item: item[1])
        age = (now - oldest_at) / 3600
        raise LakeSpecError(
            target.field, f"{target.label(seq)} needs {len(expired)} file(s) removed longer ago than the "
            f"table's clean retention (clean.retain.hours = {hours:g}), e.g. {oldest_path!r}, removed "
            f"{age:.4g} h ago at {iso(oldest_at)}: a `clean` may be deleting them right now. Nothing was committed.",
            f"Raise the table property clean.retain.hours above {math.ceil(age)} (alter_table with "
            "`properties`), so clean keeps them, then restore again; or restore a newer snapshot.")
    for data_file in readded:
        if not table.storage.exists(data_file.path):
            missing.append(data_file.path)
    if missing:
        raise LakeSpecError(
            target.field, f"{target.label(seq)} needs {len(missing)} file(s) that are missing on disk, "
            f"e.g. {_some(missing)} (deleted outside the log: by hand, or by a clean that stopped before recording "
            "its deletes). Nothing was committed.",
            f"Restore a newer snapshot whose files are all there. {TIMELINE_FIX}")


def _some(paths: list[str]) -> str:
    shown = ", ".join(repr(p) for p in paths[:PATHS_IN_MESSAGES])
    return shown + (f" and {len(paths) - PATHS_IN_MESSAGES} more" if len(paths) > PATHS_IN_MESSAGES else "")


# -- the commit --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RestoreResult:
    """A restore: its plan, and the entry it committed (None: a dry run, or the table already was the target)."""

    plan: RestorePlan
    entry: LogEntry | None
    already_committed: bool = False
    dry_run: bool = False

    def metrics(self) -> dict[str, Any]:
        """The result as an operation returns it (the entry's metrics when it committed)."""
        if self.entry is not None:
            return requests.entry_result(self.entry, already_committed=self.already_committed)
        reason = "dry run: nothing committed" if self.dry_run else \
            f"the latest snapshot (seq {self.plan.base_seq}) already equals {self.plan.target.describe()}"
        return {**self.plan.metrics(), "files_added": 0, "files_removed": 0,
                "files_would_remove": len(self.plan.removed), "files_would_readd": len(self.plan.readded),
                "noop": True, "reason": reason, "dry_run": self.dry_run, "already_committed": False}


def restore(table: TableMetadata, target: RestoreTarget, *, dry_run: bool = False, request_id: str | None = None,
            request_fingerprint: str | None = None, now: float | None = None) -> RestoreResult:
    """Commit a `restore` entry that makes the latest snapshot equal `target` (see the module's doc).

    A committed `request_id` returns its commit (`already_committed`); restoring the snapshot the table already is
    commits nothing (`noop`); `dry_run` only plans. Refused before anything is written: see `plan`.
    """
    if not dry_run:
        prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
        if prior is not None:
            return RestoreResult(_plan_of(table, prior, target), prior, already_committed=True)
    latest = table.state()  # the base: every commit since is checked against what the plan read
    planned = plan(table, target, latest=latest, now=now)
    if dry_run or planned.noop:
        if planned.noop:
            log.info("restore of %s: the latest snapshot %d already equals %s; nothing to commit", table.url,
                     latest.seq, target.describe())
        return RestoreResult(planned, None, dry_run=dry_run)
    metadata = {"spec": dict(planned.spec), "restored_to": {"seq": planned.seq, "instant": planned.instant},
                "versions": versions_to_pairs(planned.versions), "requests": dict(planned.requests),
                CONSUMED: recorded(planned.consumed)}
    txn = begin(table, RESTORE_ACTION, OPERATION, metadata={"restored_to": metadata["restored_to"]},
                request_id=request_id, base=latest, request_fingerprint=request_fingerprint)
    try:
        _check_still_there(table, planned)
        removed = set(planned.removed)
        # what it keeps and re-adds: a commit since the base that removed or cleaned one of them is a conflict
        reads = [p for p in txn.base.files if p not in removed] + [f.path for f in planned.readded]
        entry = txn.commit(added=_with_plain_stats(planned.readded), removed=planned.removed, reads=reads,
                           whole_table=True, metadata=metadata, metrics=planned.metrics())
    except BaseException:
        txn.abort()
        raise
    log.info("restored %s to seq %d (instant %s): %d file(s) removed, %d re-added, as log entry %d", table.url,
             planned.seq, planned.instant, len(planned.removed), len(planned.readded), entry.seq)
    return RestoreResult(planned, entry)


def _check_still_there(table: TableMetadata, planned: RestorePlan) -> None:
    """Right before committing, every re-added file must still be on disk. (A clean that deleted one records it
    before deleting, and its entry conflicts with this commit: `conflicts.check`.)"""
    missing = [f.path for f in planned.readded if not table.storage.exists(f.path)]
    if missing:
        raise LakeCommitConflict(f"{len(missing)} file(s) this restore re-adds were deleted meanwhile, e.g. "
                                 f"{missing[0]!r}. Nothing was committed; restore a newer snapshot.")


def _with_plain_stats(files: tuple[DataFile, ...]) -> list[DataFile]:
    """`files` with their stats as plain dicts, for the restore entry to write.

    Files re-added from a checkpoint hold a lazy view on its stats columns, whose first use per file decodes
    each column for every file of the checkpoint (100,000 files to re-add 1,000): take only their rows.
    """
    out = list(files)
    by_columns: dict[int, tuple[StatsColumns, list[tuple[int, LazyStats]]]] = {}
    for position, data_file in enumerate(files):
        lazy = data_file.stats
        if isinstance(lazy, LazyStats):
            by_columns.setdefault(id(lazy.columns), (lazy.columns, []))[1].append((position, lazy))
    for columns, members in by_columns.values():
        stats: list[dict[str, ColumnStats]] = [{} for _ in members]
        for key in columns.keys:
            found = columns.arrow(key)
            if found is None:  # unreadable stats: the view takes them from the log, file by file
                stats = [dict(lazy) for _, lazy in members]
                break
            encoding, array = found
            # from a buffer: `pa.array(list)` first imports pandas, 0.4 s of a 2 s budget
            rows = pa.Array.from_buffers(pa.int64(), len(members),
                                         [None, pa.py_buffer(array_module.array("q", [m.row for _, m in members]))])
            for i, value in enumerate(array.take(rows).to_pylist()):
                if value is not None:
                    low, high = value["min"], value["max"]
                    if encoding == "json":  # (stats_columns.py: values of mixed types, each as JSON text)
                        low, high = (None if v is None else json.loads(v) for v in (low, high))
                    stats[i][key] = ColumnStats(low, high, int(value["nulls"]))
        for (position, _), file_stats in zip(members, stats, strict=True):
            out[position] = dataclasses.replace(files[position], stats=file_stats)
    return out


def _plan_of(table: TableMetadata, entry: LogEntry, target: RestoreTarget) -> RestorePlan:
    """The plan a committed restore carried out, from its entry (for a retry's result)."""
    restored = entry.metadata.get("restored_to") or {}
    seq = int(restored.get("seq", -1))
    return RestorePlan(table.url, target, int(entry.base_seq or 0), seq, str(restored.get("instant", "")), 0.0,
                       tuple(entry.removed), tuple(entry.added), dict(entry.metadata.get("spec") or {}),
                       bool(entry.metrics.get("spec_changed")), {}, bool(entry.metrics.get("versions_changed")))


__all__ = ["OPERATION", "TARGET_FIELDS", "RestorePlan", "RestoreResult", "RestoreTarget", "parse_instant",
           "parse_seq", "parse_timestamp", "plan", "resolve", "restore", "target_from_text", "target_of"]
