"""`schedule_clustering`: decide whether and what to cluster, and store the plan as a requested `replace`
instant (executed later by `execute_clustering`)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering import planner
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION, SCHEDULE_OPERATION, ClusteringPlan
from airflow_lake.lake.clustering.strategy import COMMITS_SINCE_LAST_CLUSTERING, PlanStrategy
from airflow_lake.lake.clustering.timeline import PendingPlan, commits_since, pending_plans, planned_files
from airflow_lake.lake.commit import requests
from airflow_lake.lake.errors import LakeCommitConflict, LakeSpecError
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import COMPLETES, PLAN_REQUEST_ID, LogEntryExpired

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
LOCK = f"{paths.LOCKS}/schedule_clustering.json"
LOCK_STALE_SECONDS = 60.0
LOCK_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class ScheduleResult:
    """A plan id (None: no plan) and why; `existing_plan`: the plan was stored before this call (by an earlier try
    of the request, or by another schedule whose plan holds the files), `executed_by`: the instant that has
    executed it since."""

    plan_id: str | None
    reason: str
    commits: int
    plan: ClusteringPlan | None = None
    existing_plan: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    executed_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Metrics for XCom; each field means one thing (docs/api.md, "XCom of the clustering operators"):
        `noop` is true exactly when no plan was created or returned (`plan_id` null; `reason` says why)."""
        out: dict[str, Any] = {"plan_id": self.plan_id, "noop": self.plan_id is None,
                               "scheduled": self.plan_id is not None, "existing_plan": self.existing_plan,
                               "already_scheduled": self.existing_plan,  # (its older name)
                               "already_committed": self.executed_by is not None, "reason": self.reason,
                               "commits_since_last_clustering": self.commits, **self.details}
        if self.executed_by is not None:
            out["executed_by"] = self.executed_by
        if self.plan is not None:
            out.update(self.plan.summary())
        return out


def schedule_clustering(table: TableMetadata, strategy: PlanStrategy, layout: Layout,
                        request_id: str | None = None, request_fingerprint: str | None = None) -> ScheduleResult:
    """Plan a clustering if at least `min_commits` commits completed since the last one; the plan's files
    are small files of the chosen partitions not under another pending plan. A retry with the same
    `request_id` returns the plan its first try stored (`request_fingerprint`, of the request's inputs, is
    stored with the plan: `commit.requests`)."""
    if table.spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has a primary key: its files hold upserts that clustering would "
                            "not merge.", "Compact it (`compact`: one file per bucket, sorted by the key).")
    request = requests.Request(SCHEDULE_OPERATION, request_id, request_fingerprint)
    executed = _executed_plan(table, request_id)
    if executed is not None:
        return executed
    # A plan is a requested instant, not a commit: the log holds a schedule's request id only if its plan was
    # executed (above) or another operation used it, which `committed` refuses.
    requests.committed(table, request)
    if request_id:
        for pending in pending_plans(table):
            if pending.request_id == request_id:
                stored = next((p.metadata for p in instants.pending(table.storage) if p.id == pending.id), {})
                request.check_same(stored, f"clustering plan {pending.id}")
                return ScheduleResult(pending.id, "scheduled by an earlier try of this request", 0, pending.plan,
                                      existing_plan=True)
    counted = commits_since(table)
    if counted.count < strategy.min_commits:
        reason = (f"{counted.count} commit(s) since the last clustering, fewer than min_commits="
                  f"{strategy.min_commits}")
        log.info("no clustering plan for %s: %s", table.url, reason)
        return ScheduleResult(None, reason, counted.count)
    with _schedule_lock(table):
        state = table.state()
        spec = table.spec
        files = list(state.files.values())
        existing = list({f.partition_key(): dict(f.partition) for f in files}.values())
        chosen = planner.select_partitions(spec, existing, strategy, committed=counted.partitions)
        waiting = pending_plans(table)
        excluded = planned_files(waiting)
        groups = planner.build_groups(spec, files, chosen, strategy, excluded=excluded, sorts=bool(layout.columns),
                                      made_by_clustering=_made_by_clustering(table, state.instants))
        details: dict[str, Any] = {"partitions_chosen": len(chosen), "files_under_pending_plans": len(excluded)}
        if strategy.filter_mode == COMMITS_SINCE_LAST_CLUSTERING:
            details["partitions_with_commits"] = len(counted.partitions)
        if not groups:
            holding = _pending_plans_over(waiting, chosen)
            reason = f"nothing to cluster in {len(chosen)} chosen partition(s) (no small files to merge)"
            if holding:
                # not this request's plans: another schedule's (whose execute may have failed) — never planned
                # twice, and not run by this request's execute either; say where the files are
                ids = " ".join(p.id for p in holding)
                reason = (f"nothing to cluster in {len(chosen)} chosen partition(s): their small files are under "
                          f"pending plan(s) {ids}, scheduled by another request and not executed yet (run them with "
                          f"ExecuteClusteringOperator(which=\"all\") or drop them: `airflow-lake rollback-pending "
                          f"{table.url} {ids}`)")
                details["pending_plans"] = [p.id for p in holding]
            log.info("no clustering plan for %s: %s", table.url, reason)
            return ScheduleResult(None, reason, counted.count, details=details)
        plan = ClusteringPlan(tuple(groups), layout, state.seq, strategy.to_dict())
        plan_id = instants.request(table.storage, "replace", SCHEDULE_OPERATION,
                                   {"plan": plan.to_dict(), **request.metadata()}, request_id,
                                   not_before=state.instant or None, finished=table.is_finished)
    summary = plan.summary()
    log.info("clustering plan %s for %s: %d group(s), %d file(s) (%d bytes) -> %d file(s), %s", plan_id, table.url,
             summary["groups"], summary["input_files"], summary["input_bytes"], summary["output_files"],
             summary["layout"])
    return ScheduleResult(plan_id, f"{counted.count} commit(s) since the last clustering", counted.count, plan,
                          details=details)


def _executed_plan(table: TableMetadata, request_id: str | None) -> ScheduleResult | None:
    """The plan an earlier try of this schedule stored, if it has been executed since (a retry after its
    executor ran: planning again would cluster what the first plan just did)."""
    seq = table.state().requests.get(request_id) if request_id else None
    try:
        entry = None if seq is None else table.commit_log.read(seq)
    except LogEntryExpired:
        return None  # (`requests.committed` then refuses the request, saying why)
    if entry is None or entry.metadata.get(PLAN_REQUEST_ID) != request_id:
        return None
    plan_id = str(entry.metadata[COMPLETES])
    log.info("clustering plan %s of request %s was executed by instant %s", plan_id, request_id, entry.instant)
    return ScheduleResult(plan_id, f"scheduled by an earlier try of this request, executed since by instant "
                          f"{entry.instant}", 0, None, existing_plan=True, executed_by=entry.instant)


def _pending_plans_over(pending: list[PendingPlan], chosen: list[dict[str, str | None]]) -> list[PendingPlan]:
    """The pending plans with a group in one of the chosen partitions, oldest first."""
    wanted = {tuple(sorted(p.items())) for p in chosen}
    return [p for p in pending if p.plan is not None
            and any(tuple(sorted(g.partition.items())) in wanted for g in p.plan.groups)]


def _made_by_clustering(table: TableMetadata, seqs: dict[str, int]) -> Any:
    """Whether a file was written by a clustering (asked only for lone files: one log read each). A file whose
    entry the log retention expired counts as clustered: re-sorting a lone file nobody touched for that long
    buys little."""
    def check(data_file: DataFile) -> bool:
        seq = seqs.get(data_file.instant)
        try:
            return seq is not None and table.commit_log.read(seq).operation == EXECUTE_OPERATION
        except LogEntryExpired:
            return True
    return check


@contextmanager
def _schedule_lock(table: TableMetadata) -> Iterator[None]:
    """An exclusive lock file so two schedulers never plan the same files; a lock this process saw unchanged for
    `LOCK_STALE_SECONDS` by its own clock (its holder died) is broken.

    Never judged by comparing the lock's time stamp (the store's clock, or its writer's) with this process's clock:
    a clock that is off would break a live holder's lock at once. A lock whose stamp looks stale is only watched
    longer (past `LOCK_WAIT_SECONDS`, up to `LOCK_STALE_SECONDS` from the first look), as `instants.watch` watches
    a heartbeat."""
    storage = table.storage
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    first: tuple[str, float] | None = None  # the lock's token when this process first saw it, and when
    # the holder's nonce makes its lock bytes its own: a create whose answer was lost reads them back as its own
    # (`stores.create`), never another scheduler's
    mine = {"at": time.time(), "holder": uuid.uuid4().hex}
    while not storage.create_json(LOCK, mine):
        try:
            stamp, token = storage.touched(LOCK)
        except FileNotFoundError:
            continue
        clock = time.monotonic()
        if first is None or first[0] != token:  # another holder (or the first look): watched from now
            first = (token, clock)
        if clock - first[1] > LOCK_STALE_SECONDS:
            log.warning("breaking a stale clustering schedule lock on %s (unchanged for %.0f s)", storage.url,
                        clock - first[1])
            storage.delete(LOCK)
            continue
        if abs(time.time() - stamp) > LOCK_STALE_SECONDS:  # stale by its stamp: watch it for the whole time
            deadline = max(deadline, first[1] + LOCK_STALE_SECONDS + 1)
        if clock > deadline:
            raise LakeCommitConflict(f"another schedule_clustering holds {LOCK} on {storage.url!r}; run the job "
                                     "again.")
        time.sleep(0.2)
    try:
        yield
    finally:
        storage.delete(LOCK)
