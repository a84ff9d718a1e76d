"""Optimistic concurrency: does a commit still hold after the entries completed since it started?"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airflow_lake.lake.commit.reads import TableRead, read_files
from airflow_lake.lake.errors import LakeCommitConflict, LakeInstantRolledBack
from airflow_lake.lake.format.consumed import CONSUMED, positions_of
from airflow_lake.lake.format.log import COMPLETES, LogEntry


@dataclass(frozen=True)
class CommitIntent:
    """What a commit depends on: the files it read and removes, the partitions it overwrites."""

    instant: str
    removes: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()
    # Partitions whose whole content this commit replaces (`whole_table` for all of them).
    overwrites: tuple[Mapping[str, str | None], ...] = ()
    whole_table: bool = False
    request_id: str | None = None
    # A requested instant this commit completes (a clustering plan): another entry completing or rolling
    # it back makes this commit obsolete.
    completes: str | None = None
    # Versions an upsert applies: another upsert of one of them committed meanwhile is a conflict (rule 8).
    versions: frozenset[int] = frozenset()
    # Scans of this table the job's data came from (a query over the table itself): a file added since the
    # base that one of them could have selected is a conflict (WriteSerializable; blind appends have none).
    table_reads: tuple[TableRead, ...] = ()
    # Upstream positions this commit records (`format.consumed`), upstream identity -> this table's position at
    # the base (None: none yet): the job read the upstream's changes from there, so an entry since the base that
    # recorded one of them (another run of the consumer) took changes of that window meanwhile.
    consumed: Mapping[str, int | None] = field(default_factory=dict)


def check(intent: CommitIntent, since: Iterable[LogEntry]) -> None:
    """Raise a retryable conflict if an entry completed since the writer's base invalidates it."""
    touched = intent.removes | intent.reads | read_files(intent.table_reads)
    overwrite_keys = {tuple(sorted(p.items())) for p in intent.overwrites}
    for entry in since:
        if intent.instant in entry.rolled_back:
            raise LakeInstantRolledBack(
                f"instant {intent.instant} was rolled back by instant {entry.instant} (its heartbeat went "
                "stale). Nothing of it was committed; run the job again.")
        if intent.request_id and entry.request_id == intent.request_id:
            raise LakeCommitConflict(
                f"request {intent.request_id!r} was committed meanwhile by instant {entry.instant} (another try of "
                "the same task?). Nothing more was committed; a retry returns that commit.")
        if intent.completes and (intent.completes in entry.rolled_back
                                 or entry.metadata.get(COMPLETES) == intent.completes):
            done = "rolled back" if intent.completes in entry.rolled_back else "completed"
            raise LakeCommitConflict(
                f"instant {intent.completes} was {done} meanwhile by instant {entry.instant} ({entry.operation}); "
                "nothing more was committed.")
        if entry.instant == intent.instant:
            raise LakeCommitConflict(f"instant {intent.instant} is already in the log at {entry.seq}.")
        if "spec" in entry.metadata and entry.action != "create":
            raise LakeCommitConflict(
                f"instant {entry.instant} changed the table spec meanwhile; run the job again.")
        # a clean's entry removes no live file, but the files it deleted are gone for a commit that re-adds them
        cleaned = touched.intersection(entry.metadata.get("deleted") or ()) if entry.action == "clean" else set()
        if cleaned:
            raise LakeCommitConflict(
                f"instant {entry.instant} (clean) deleted {len(cleaned)} file(s) this job needs, e.g. "
                f"{sorted(cleaned)[0]!r}. Nothing was committed.")
        gone = touched.intersection(entry.removed)
        if gone:
            example = sorted(gone)[0]
            raise LakeCommitConflict(
                f"instant {entry.instant} ({entry.operation}) replaced {len(gone)} file(s) this job read or "
                f"replaces, e.g. {example!r}. Nothing was committed; run the job again.")
        if intent.versions and entry.action == "upsert":
            clash = intent.versions.intersection(int(v) for v in entry.metadata.get("versions") or ())
            if clash:
                raise LakeCommitConflict(
                    f"instant {entry.instant} upserted version {min(clash)} meanwhile; nothing was committed. Run "
                    "the upsert again: the same data is then a no-op, other data needs replace_version.")
        if intent.consumed:
            _check_consumed(intent, entry)
        if intent.table_reads and entry.added:
            seen = [f.path for f in entry.added if any(r.may_see(f) for r in intent.table_reads)]
            if seen:
                raise LakeCommitConflict(
                    f"instant {entry.instant} ({entry.operation}) added {len(seen)} file(s) that this job's read of "
                    f"the table ({intent.table_reads[0].describe()}) could have seen, e.g. {seen[0]!r}: its result "
                    "may be stale. Nothing was committed; run the job again (it then reads the new snapshot).")
        if intent.whole_table and entry.added:
            raise LakeCommitConflict(
                f"instant {entry.instant} ({entry.operation}) added files while this job overwrote the "
                "whole table. Nothing was committed; run the job again.")
        if overwrite_keys:
            hit = [f.path for f in entry.added if f.partition_key() in overwrite_keys]
            if hit:
                raise LakeCommitConflict(
                    f"instant {entry.instant} ({entry.operation}) added {len(hit)} file(s) to partitions "
                    f"this job overwrites, e.g. {hit[0]!r}. Nothing was committed; run the job again.")


def _check_consumed(intent: CommitIntent, entry: LogEntry) -> None:
    """A conflict when `entry` recorded a position this commit records: another run consumed changes of that
    upstream, and this job's window started before them. (A restore, which sets every position, records the
    spec too: it conflicts with every commit since its base anyway.)"""
    positions = positions_of(entry.metadata.get(CONSUMED))
    moved = sorted(set(positions).intersection(intent.consumed))
    if moved:
        upstream = entry.metadata[CONSUMED].get(moved[0])
        name = upstream.get("table") if isinstance(upstream, Mapping) else None
        read = intent.consumed[moved[0]]
        since = "its first snapshot" if read is None else f"seq {read}"
        raise LakeCommitConflict(
            f"instant {entry.instant} ({entry.operation}) recorded consumed position(s) of {len(moved)} upstream "
            f"table(s) this job consumes meanwhile, e.g. {name or moved[0]!r} at seq {positions[moved[0]]} "
            f"(this job read its changes since {since}): another run consumed them. Nothing "
            "was committed; run the job again (it then reads only the changes left).")
