"""What the timeline says about clustering, read without Spark: commits since the last clustering (the
schedule rule and `CommitCountSensor`) and the pending plans."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION, SCHEDULE_OPERATION, ClusteringPlan, PlanFormatError
from airflow_lake.lake.errors import LakeSnapshotNotFound, LakeSpecError
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.log import COMPLETES, LogEntryExpired

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
LAST_CLUSTERING, START = "last_clustering", "start"
DATA_ACTIONS = ("commit", "upsert")  # what counts as a commit by default: writes of data


@dataclass(frozen=True)
class CommitCount:
    """Completed commits after a point of the timeline."""

    count: int
    instants: tuple[str, ...]  # the counted commits, oldest first
    since: str  # "last_clustering", "start" or an instant id
    since_instant: str | None  # the instant counted from (None: the table's start)
    head_seq: int
    # the partitions the counted commits added files to (what COMMITS_SINCE_LAST_CLUSTERING plans), by their
    # latest counted commit, oldest first
    partitions: tuple[tuple[tuple[str, str | None], ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form (XCom, trigger events)."""
        return {"count": self.count, "instants": list(self.instants), "since": self.since,
                "since_instant": self.since_instant, "head_seq": self.head_seq}


def commits_since(table: TableMetadata, since: str = LAST_CLUSTERING, actions: Collection[str] | None = None
                  ) -> CommitCount:
    """Completed commits of `actions` (default: commit and upsert) after the last completed clustering (the
    default), after an instant id, or since the table's start. Reads log entries newest first and stops at
    the point counted from, or where the log starts when `clean` expired the entries before it
    (`log.retain.hours`): then only the commits the log still holds are counted (a lower bound; logged)."""
    wanted = frozenset(DATA_ACTIONS if actions is None else actions)
    head = table.commit_log.head()
    stop = -1
    since_instant: str | None = None
    if since not in (LAST_CLUSTERING, START):
        seq = table.state().instants.get(since)
        if seq is None:
            raise LakeSnapshotNotFound(f"instant {since} is not completed on {table.url!r}. Fix: pick a completed "
                                       "instant from `airflow-lake timeline`, or count since 'last_clustering' "
                                       "or 'start'.")
        stop, since_instant = seq, since
    counted: list[str] = []
    partitions: dict[tuple[tuple[str, str | None], ...], None] = {}  # (ordered: newest first, reversed below)
    seq = head
    while seq > stop:
        try:
            entry = table.commit_log.read(seq)
        except LogEntryExpired as err:
            log.info("counting commits of %s since %s: the log before entry %d has expired (log.retain.hours); "
                     "counted the %d commit(s) after it", table.url, since_instant or since, err.start,
                     len(counted))
            break
        if since == LAST_CLUSTERING and entry.operation == EXECUTE_OPERATION:
            since_instant = entry.instant
            break
        if entry.action in wanted:
            counted.append(entry.instant)
            for data_file in entry.added:
                partitions[data_file.partition_key()] = None
        seq -= 1
    counted.reverse()
    return CommitCount(len(counted), tuple(counted), since, since_instant, head, tuple(reversed(partitions)))


def check_since(since: Any) -> str:
    """A `since` value: 'last_clustering', 'start' or an instant id."""
    if isinstance(since, str) and (since in (LAST_CLUSTERING, START) or instants.is_instant_id(since)):
        return since
    raise LakeSpecError("since", f"{since!r} is not a point of the timeline.",
                        "Give 'last_clustering' (default), 'start', or an instant id (17 digits).")


@dataclass(frozen=True)
class PendingPlan:
    """A scheduled plan not executed yet, and the attempts executing it now."""

    id: str
    requested_at: float
    request_id: str | None
    plan: ClusteringPlan | None  # None if it cannot be run: `problem` says why
    attempts: tuple[str, ...] = field(default_factory=tuple)  # pending execute instants of this plan
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (CLI, XCom)."""
        return {"id": self.id, "requested_at": self.requested_at, "request_id": self.request_id,
                "attempts": list(self.attempts),
                **(self.plan.summary() if self.plan else {"damaged": True, "problem": self.problem})}


def rollback_command(table: TableMetadata, plan_id: str) -> str:
    """The command that drops a plan (it exists: `airflow-lake rollback-pending`)."""
    return f"airflow-lake rollback-pending {table.url} {plan_id}"


def pending_plans(table: TableMetadata) -> list[PendingPlan]:
    """Plans scheduled and neither executed nor rolled back, oldest first. A plan that cannot be run as it
    is (damaged or edited: a bad field, a file listed twice, a column the table lacks) is listed with
    `plan` None and the `problem`."""
    state = table.state()
    spec = table.spec
    pending = [p for p in instants.pending(table.storage)
               if p.id not in state.instants and p.id not in state.rolled_back]
    attempts: dict[str, list[str]] = {}
    for item in pending:
        if item.operation == EXECUTE_OPERATION and isinstance(item.metadata.get(COMPLETES), str):
            attempts.setdefault(item.metadata[COMPLETES], []).append(item.id)
    out = []
    for item in pending:
        if item.operation != SCHEDULE_OPERATION or item.inflight:
            continue
        plan, problem = None, None
        try:
            plan = ClusteringPlan.from_dict(item.metadata.get("plan"))
            plan.check_against(spec)
        except (KeyError, TypeError, ValueError) as err:
            plan, problem = None, str(err) if isinstance(err, PlanFormatError) else f"{type(err).__name__}: {err}"
            log.info("clustering plan %s on %s cannot be run (%s). Fix: `%s`, then schedule a new plan",
                     item.id, table.url, problem, rollback_command(table, item.id))
        out.append(PendingPlan(item.id, item.requested_at, item.request_id, plan, tuple(attempts.get(item.id, ())),
                               problem))
    return out


def planned_files(plans: Iterable[PendingPlan]) -> frozenset[str]:
    """Every input file of the given plans."""
    return frozenset(f for p in plans if p.plan is not None for f in p.plan.files)
