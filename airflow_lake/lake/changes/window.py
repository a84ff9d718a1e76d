"""The window of a change read: the commits between two snapshots that changed data, and the files each removed
(as they were live before it) and added. Metadata only: no Spark, and no data file is read.

`start` is exclusive, `end` inclusive; each is a log sequence number (an int, or its digits as text), an instant id,
or a time (a float of UNIX seconds, or ISO-8601 text): the last snapshot completed at or before it. `start = -1`
reads from the empty table: everything live at `end` is an insert (`initial`).

Data-free commits contribute nothing and their files are never read: commits that add and remove no file (create,
clean, rollback, an alter without data) and the layout-only replaces, which keep every row and only move rows
between files (`LAYOUT_OPERATIONS`: clustering, bucket rewrite, compaction of upserts).

A window needs the log entries after `start` and every file live in a snapshot from `start` on: a start older than
what `clean` kept (its `cleaned_before`, or entries expired past `log.retain.hours`) raises
`LakeChangesUnavailable`, naming the oldest snapshot changes can start from.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_lake.lake.errors import LakeChangesUnavailable, LakeSpecError
from airflow_lake.lake.format import history, instants
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import RETENTION_PROPERTY, LogEntry, LogEntryExpired, carrying
from airflow_lake.lake.format.operation_names import current_name
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.format.table_state import TableState

__all__ = ["FROM_EMPTY", "LAYOUT_OPERATIONS", "ChangeWindow", "CommitChange", "change_window", "changes_data",
           "oldest_start"]

FROM_EMPTY = -1  # a start before the first commit: the whole snapshot at `end` as inserts
# Replaces that keep every row (as the log records their operations; `current_name` maps the old "compact"):
# clustering.plan.EXECUTE_OPERATION, buckets.rewrite.OPERATION, upsert.compact.OPERATION (a test checks the names)
LAYOUT_OPERATIONS = frozenset({"execute_clustering", "bucket_rewrite", "compact_upserts"})
_SECONDS = re.compile(r"[0-9]+\.[0-9]*|\.[0-9]+")  # UNIX seconds as text need a decimal point: digits are a seq
_SEQ = re.compile(r"-?[0-9]+")
TIMELINE_FIX = "Pick snapshots from `airflow-lake timeline PATH` (their seq, instant or time)."


@dataclass(frozen=True)
class CommitChange:
    """One data-changing commit in the window."""

    seq: int
    completed_at: float
    operation: str
    removed: tuple[DataFile, ...]  # the files it removed, as they were live before it
    added: tuple[DataFile, ...]


@dataclass(frozen=True)
class ChangeWindow:
    """The commits between snapshot `start` (exclusive) and `end` (inclusive) and what they did to the files."""

    start: int  # exclusive; -1 = from the empty table (everything live at `end` is an insert)
    end: int  # inclusive
    spec: TableSpec  # the end snapshot's spec: rows are read in its columns
    commits: tuple[CommitChange, ...]  # data-changing commits in (start, end], oldest first
    skipped: tuple[int, ...]  # seqs in the window that change no data
    initial: tuple[DataFile, ...] = ()  # start == -1: the files live at `end` (all inserts); else ()
    end_completed_at: float = 0.0  # when snapshot `end` was committed (the time of `initial` rows)

    @property
    def empty(self) -> bool:
        """No data-changing commit and no initial file: the changes are no rows, and nothing needs reading."""
        return not self.commits and not self.initial

    def partitions(self) -> list[dict[str, str | None]]:
        """The partitions any removed, added or initial file is in (the only ones whose rows can have changed),
        in a stable order."""
        keys = {f.partition_key() for c in self.commits for f in (*c.removed, *c.added)}
        keys.update(f.partition_key() for f in self.initial)
        return [dict(key) for key in sorted(keys, key=lambda k: [(c, v is None, v or "") for c, v in k])]

    def describe(self) -> str:
        """The window as a log line."""
        since = "the empty table" if self.start == FROM_EMPTY else f"snapshot {self.start}"
        return (f"changes from {since} to snapshot {self.end}: {len(self.commits)} data-changing commit(s), "
                f"{len(self.skipped)} data-free, {len(self.initial)} initial file(s)")


def changes_data(entry: LogEntry) -> bool:
    """Whether a log entry may change the table's rows: it adds or removes files, and is no layout-only replace."""
    return bool(entry.added or entry.removed) and current_name(entry.operation) not in LAYOUT_OPERATIONS


def change_window(table: TableMetadata, start: int | float | str,
                  end: int | float | str | None = None) -> ChangeWindow:
    """The window of changes after snapshot `start` up to snapshot `end` (default: the latest); see the module
    docstring. Bad bounds raise `LakeSpecError`; a start (or, from -1, an end) older than what `clean` kept raises
    `LakeChangesUnavailable` naming the oldest start that works."""
    with carrying():  # one look at the head for the whole resolution
        head = table.commit_log.head()
        latest = table.state()
        end_seq = head if end is None else _resolve(table, end, "end", latest, head)
        start_seq = _resolve(table, start, "start", latest, head)
        _check_bounds(table, start_seq, end_seq, head)
        oldest = oldest_start(table, latest)
        if start_seq == FROM_EMPTY:
            return _from_empty(table, end_seq, oldest, latest)
        if start_seq < oldest:
            raise _unavailable(table, start_seq, oldest, latest)
        try:
            state = table.state(start_seq).copy()  # folded forward below: never the resolver's own state
            entries = list(table.commit_log.entries(start_seq, end_seq))
        except LogEntryExpired:  # a clean expired it after `oldest` was looked up
            raise _unavailable(table, start_seq, oldest_start(table, table.state()), latest) from None
    commits: list[CommitChange] = []
    skipped: list[int] = []
    for entry in entries:
        if changes_data(entry):
            removed = tuple(state.files[path] for path in entry.removed if path in state.files)
            commits.append(CommitChange(entry.seq, entry.completed_at, entry.operation, removed, entry.added))
        else:
            skipped.append(entry.seq)
        state.apply(entry)
    return ChangeWindow(start_seq, end_seq, stored_spec(state.spec), tuple(commits), tuple(skipped),
                        end_completed_at=state.completed_at)


def oldest_start(table: TableMetadata, latest: TableState | None = None) -> int:
    """The oldest snapshot changes can start from: every file live from it on is kept (`clean`'s
    `cleaned_before`) and its state still resolves from the log `clean` left (`oldest_reachable`)."""
    latest = table.state() if latest is None else latest
    return max(latest.cleaned_before, table.oldest_reachable())


def _from_empty(table: TableMetadata, end: int, oldest: int, latest: TableState) -> ChangeWindow:
    if end < oldest:
        raise _unavailable(table, end, oldest, latest, ending=True)
    try:
        state = table.state(end)
    except LogEntryExpired:
        raise _unavailable(table, end, oldest_start(table, table.state()), latest, ending=True) from None
    files = tuple(sorted(state.files.values(), key=lambda f: f.path))
    return ChangeWindow(FROM_EMPTY, end, stored_spec(state.spec), (), (), files, state.completed_at)


def _check_bounds(table: TableMetadata, start: int, end: int, head: int) -> None:
    if end > head:
        hint = (f" (if {end} is a time in UNIX seconds, give it as a float: {end}.0)") if end > 10**8 else ""
        raise LakeSpecError("end", f"snapshot {end} does not exist: the log of {table.url!r} ends at {head}{hint}.",
                            f"End at {head} or earlier, or leave the end out (the latest snapshot).")
    if end < 0:
        raise LakeSpecError("end", f"{end} is no snapshot.", f"Give a snapshot from 0 to {head}. {TIMELINE_FIX}")
    if start < FROM_EMPTY:
        raise LakeSpecError("start", f"{start} is no snapshot.",
                            f"Give a snapshot from 0 to {head}, or -1 for the whole table as inserts.")
    if start > end:
        hint = (f" (if {start} is a time in UNIX seconds, give it as a float: {start}.0)") if start > 10**8 else ""
        raise LakeSpecError("start", f"the window starts after it ends: start {start} > end {end}{hint}.",
                            "Give start <= end (start is exclusive, end inclusive: start == end is no change).")


def _resolve(table: TableMetadata, value: int | float | str, name: str, latest: TableState, head: int) -> int:
    """The log sequence number of a window bound."""
    if isinstance(value, bool):
        raise LakeSpecError(name, f"{value!r} is not a snapshot.", _bound_fix(name))
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _at_time(table, _seconds(value, name), name, latest, head)
    if isinstance(value, str):
        text = value.strip()
        if instants.is_instant_id(text):
            if text in latest.instants:
                return latest.instants[text]
            problem = (f"instant {text} was rolled back: it never changed the table." if text in latest.rolled_back
                       else f"instant {text} is not a completed instant of {table.url!r}.")
            raise LakeSpecError(name, problem, TIMELINE_FIX)
        if _SEQ.fullmatch(text):
            return int(text)
        return _at_time(table, _seconds(text, name), name, latest, head)
    raise LakeSpecError(name, f"{value!r} is not a snapshot.", _bound_fix(name))


def _bound_fix(name: str) -> str:
    return (f"Give {name} as a log sequence number (e.g. 12), an instant id, UNIX seconds as a float or ISO-8601 "
            f"text (e.g. '2026-03-01T06:00:00Z': the last snapshot completed at or before it). {TIMELINE_FIX}")


def _seconds(value: float | str, name: str) -> float:
    """A point in time as UNIX seconds: a float, its text (with a decimal point), or ISO-8601 (UTC unless it says
    otherwise)."""
    seconds: float | None = None
    if isinstance(value, float):
        seconds = value
    elif _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        try:
            stamp = dt.datetime.fromisoformat(value)
        except ValueError:
            stamp = None
        if stamp is not None:
            seconds = (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)).timestamp()
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise LakeSpecError(name, f"{value!r} is neither a snapshot nor a point in time.", _bound_fix(name))
    return seconds


def _at_time(table: TableMetadata, when: float, name: str, latest: TableState, head: int) -> int:
    """The snapshot current at `when`: the newest entry that, with every entry before it, completed at or before it
    (writers' clocks disagree: `history.newest_before`), of the log `clean` left. Before the table was created: -1
    for a start (everything is new since), an error for an end."""
    first = table.commit_log.start()
    found = history.newest_before(lambda seq: table.commit_log.read(seq).completed_at, first, head, when,
                                  inclusive=True)
    if found is not None:
        return found
    oldest = oldest_start(table, latest)
    if first > 0:  # the snapshot current then was expired with the log
        raise _unavailable(table, None, oldest, latest, ending=name == "end", when=when)
    if name == "start":
        return FROM_EMPTY
    created = table.commit_log.read(0).completed_at
    raise LakeSpecError(name, f"{_iso(when)} is before the table was created ({_iso(created)}).",
                        f"Give a time at or after {_iso(created)}. {TIMELINE_FIX}")


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _unavailable(table: TableMetadata, seq: int | None, oldest: int, latest: TableState, *, ending: bool = False,
                 when: float | None = None) -> LakeChangesUnavailable:
    """The error of a window reaching past what `clean` kept: why, the oldest start that works, and the fix."""
    spec = stored_spec(latest.spec)
    reasons = []
    if seq is not None and seq < latest.cleaned_before:
        reasons.append(f"`clean` deleted files that snapshots before seq {latest.cleaned_before} need "
                       f"(clean.retain.hours = {spec.float_property('clean.retain.hours'):g})")
    log_start = table.commit_log.start()
    if log_start > 0 and (seq is None or seq < table.oldest_reachable()):
        reasons.append(f"`clean` expired the log entries before seq {log_start} ({RETENTION_PROPERTY} = "
                       f"{spec.float_property(RETENTION_PROPERTY):g})")
    what = f"snapshot {seq}" if when is None else f"the snapshot current at {_iso(when)}"
    why = "; ".join(reasons) or "that history is gone"
    if ending:
        message = (f"the changes of {table.url!r} up to {what} are no longer available: {why}. The oldest snapshot "
                   f"changes can be read from (and to) is seq {oldest}. Fix: end at seq {oldest} or later (the "
                   "latest by default)")
    else:
        message = (f"the changes of {table.url!r} after {what} are no longer available: {why}. The oldest snapshot "
                   f"changes can start from is seq {oldest}. Fix: start at seq {oldest} or later, or read the whole "
                   "table as inserts (start -1) and go on from its end")
    message += ("; to keep more history from now on, raise the table properties clean.retain.hours and "
                f"{RETENTION_PROPERTY} (alter_table).")
    return LakeChangesUnavailable(message, FROM_EMPTY if seq is None else seq, oldest)
