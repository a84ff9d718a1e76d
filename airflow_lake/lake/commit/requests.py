"""Requests: has this request (operation, request id, fingerprint) already committed, and what did it return?

Every operation asks here before it writes, and the hook asks here after a job ends, so an Airflow retry of a
committed task returns the first try's result instead of committing twice.

A request id is the caller's promise that two calls are one request (Airflow's: dag/task/run/map index). The
fingerprint checks that promise: a hash of the request's inputs that define the data (the job spec without its
request id and without settings that do not change the result), recorded with the commit. A later call with the
same request id and operation but another fingerprint is not a retry but another load under a reused id, and is
refused before anything is written; taking the first commit for its result would silently drop its data.
Entries committed before fingerprints existed carry none and are taken as the retry's, as they always were.

A request whose query reads lake tables also depends on what those tables held: the same spec over other
snapshots is another request. Its commit records what it read of them (`READS`: per view the table's identity and
a digest of the files read, `sources.load.snapshots_read`); a later call with the same id whose tables now hold
other files is not a retry. An overwrite (`Request.rebuild`) then runs again: it replaces what the first one
wrote, from the new snapshots, which is what re-running a rebuild is for. Anything else (an append, an upsert)
is refused, naming the views that changed: running it again would add its rows a second time. A retry whose
tables did not change returns the first result, as any retry does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import recovery
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.instants import PLAN_OPERATION
from airflow_lake.lake.format.log import PLAN_REQUEST_ID, LogEntryExpired
from airflow_lake.lake.format.operation_names import same_operation

if TYPE_CHECKING:
    from airflow_lake.lake.format.log import LogEntry
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
FINGERPRINT = "request_fingerprint"  # the metadata key of a commit (or a stored plan) that records it
READS = "request_reads"  # the metadata key of a commit that records what its query read of other lake tables
FIX = "Give each distinct load its own request id (Airflow's is dag/task/run/map index)."


@dataclass(frozen=True)
class Request:
    """One request of an operation: its id (None: the caller asked for no idempotency) and the fingerprint of
    its inputs (None: not checked, e.g. the API called without one)."""

    operation: str
    request_id: str | None
    fingerprint: str | None = None
    # what its query reads of lake tables other than its own (`sources.load.snapshots_read`); None: no query
    reads: Mapping[str, Any] | None = None
    # an overwrite: with other snapshots read than its commit recorded, it runs again instead of being refused
    rebuild: bool = False

    def __post_init__(self) -> None:
        # "" used to pass for "no request id", so a template that rendered empty silently turned a retry into a
        # second commit: only None asks for no idempotency
        if self.request_id is not None and (not isinstance(self.request_id, str) or not self.request_id.strip()):
            raise LakeSpecError("request_id", f"{self.request_id!r} is no request id: a blank id would make every "
                                "call a new request, so a retry would commit again.",
                                "Give a non-blank string (or None for no idempotency). " + FIX)

    def metadata(self) -> dict[str, str]:
        """What a commit of this request records, so a later call can tell a retry from a reused id."""
        out: dict[str, Any] = {}
        if self.request_id and self.fingerprint:
            out[FINGERPRINT] = self.fingerprint
        if self.request_id and self.reads:
            out[READS] = _canonical(self.reads)
        return out

    def changed_reads(self, recorded: Mapping[str, Any]) -> list[str]:
        """The views whose table holds other files (or is another table) than when `recorded` (a commit's
        metadata) was committed; empty when nothing changed or nothing can be compared (no query, or a commit
        from before reads were recorded)."""
        theirs = recorded.get(READS)
        if not self.reads or not isinstance(theirs, Mapping):
            return []
        ours = _canonical(self.reads)
        return sorted(name for name in {*ours, *theirs} if ours.get(name) != theirs.get(name))

    def check_same(self, recorded: Mapping[str, Any], where: str) -> None:
        """Refuse this request if what `where` recorded (its metadata) has another fingerprint."""
        theirs = recorded.get(FINGERPRINT)
        if not self.fingerprint or not isinstance(theirs, str) or theirs == self.fingerprint:
            return  # nothing to compare: a call without a fingerprint, or an entry from before fingerprints
        raise LakeSpecError("request_id", f"{self.request_id!r} already belongs to {where}, a {self.operation} with "
                            f"other inputs (request fingerprint {theirs[:12]}, this one {self.fingerprint[:12]}): a "
                            "retry repeats its request exactly, so this is another load under a reused request id. "
                            "Nothing was written.", FIX)


def fingerprint(inputs: Mapping[str, Any]) -> str:
    """A stable hash of a request's inputs: sha256 of their canonical JSON (keys sorted, tuples as lists,
    dataclasses as their fields), the same in every process and on every machine."""
    text = json.dumps(_canonical(inputs), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):  # NaN and infinities have no JSON form
        return value if math.isfinite(value) else repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return str(value)  # (dates, decimals: their text is stable; the spec reader yields JSON types anyway)


def committed(table: TableMetadata, request: Request | None) -> LogEntry | None:
    """The completed entry of `request` (its first try committed: this call is a retry), if any.

    Refused (`LakeSpecError` on `request_id`): an entry of another operation under the same request id, and
    one whose recorded fingerprint differs — either would turn this call into a silent no-op.
    """
    if request is None or not request.request_id:
        return None
    entry = find_committed(table, request.request_id, request.operation, request.fingerprint)
    changed = [] if entry is None else request.changed_reads(entry.metadata)
    if entry is None or not changed:
        return entry
    views = ", ".join(changed)
    if request.rebuild:
        log.info("request %r committed instant %s from other snapshots of %s: the overwrite runs again from the "
                 "tables as they are now", request.request_id, entry.instant, views)
        return None
    raise LakeSpecError("request_id", f"{request.request_id!r} committed instant {entry.instant} (log entry "
                        f"{entry.seq}) from what the lake table(s) of its query held then, and {views} changed since: "
                        f"this {request.operation} is not a retry of it, and running it again would add its rows a "
                        "second time. Nothing was written.",
                        "To add the rows of the new snapshots, give this run its own request id; a retry of the "
                        "first run needs the tables as they were (restore them, or read them with `as_of`). An "
                        "overwrite from lake tables needs no fixed request id: it rebuilds from the current snapshots.")


def find_committed(table: TableMetadata, request_id: str | None, operation: str | None = None,
                   fingerprint: str | None = None) -> LogEntry | None:
    """The completed entry recorded with `request_id` (makes retries idempotent), if any.

    With `operation`, an entry of another operation under the same request id is an error: a retry
    is the same operation with the same request id, so taking that entry for this one's result would
    turn the call into a silent no-op. With `fingerprint`, so is an entry recorded with another one.
    """
    if not request_id:
        return None
    seq = table.state().requests.get(request_id)
    try:
        entry = None if seq is None else table.commit_log.read(seq)
    except LogEntryExpired as err:
        raise LakeSpecError("request_id", f"{request_id!r} was committed as log entry {seq}, which `clean` has "
                            "expired from the log (older than the table's log.retain.hours): what that commit did "
                            "cannot be read back, and running it again could apply it twice.",
                            "This request already ran; to run the operation again, give it a new request id.") from err
    if entry is None:
        return None
    if operation is not None and same_operation(operation, PLAN_OPERATION) and entry.request_id != request_id \
            and entry.metadata.get(PLAN_REQUEST_ID) == request_id:
        return None  # the commit that executed the plan this schedule stored: a schedule itself commits nothing
    if operation is not None and not same_operation(entry.operation, operation):  # (an entry under an old name too)
        raise LakeSpecError("request_id", f"{request_id!r} was already used by instant {entry.instant} "
                            f"(operation {entry.operation}, log entry {entry.seq}); a retry is the same operation "
                            "with the same request id.",
                            f"Give this {operation} a request id of its own (Airflow's is dag/task/run/map index).")
    Request(operation or entry.operation, request_id, fingerprint).check_same(
        entry.metadata, f"instant {entry.instant} (log entry {entry.seq})")
    recovery.tidy_if_left(table, entry)  # a retry: its first try may have died after committing, before tidying up
    return entry


def entry_result(entry: LogEntry, **extra: Any) -> dict[str, Any]:
    """What an operation returns about its commit: the entry's metrics and where it landed, plus `extra`
    (e.g. `already_committed`)."""
    return {**entry.metrics, "instant": entry.instant, "seq": entry.seq, "action": entry.action,
            "request_id": entry.request_id, **extra}


def result(table_url: str, operation: str, entry: LogEntry | None, **extra: Any) -> dict[str, Any]:
    """An operation's result (the job's metrics, XCom's value): the table and operation, then its commit's
    `entry_result` (none when it committed nothing), then `extra`."""
    out: dict[str, Any] = {"table": table_url, "operation": operation}
    if entry is not None:
        out.update(entry_result(entry))
    out.update(extra)
    return out


def recorded_result(table: TableMetadata, request: Request | None, **extra: Any) -> dict[str, Any] | None:
    """The result of `request` as its commit recorded it (with `extra`), if it committed; else None. For a
    caller that did not see the job's own output: the hook after a job in cluster deploy mode."""
    entry = committed(table, request)
    if entry is None or request is None:
        return None
    return result(table.url, request.operation, entry, **extra)


def retry_result(table: TableMetadata, request: Request | None) -> dict[str, Any] | None:
    """What the first try of `request` returned (flagged `already_committed`), if it committed; else None."""
    return recorded_result(table, request, already_committed=True)


__all__ = ["FINGERPRINT", "READS", "Request", "committed", "entry_result", "find_committed", "fingerprint",
           "recorded_result", "result", "retry_result"]
