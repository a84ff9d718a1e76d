"""`execute_clustering`: run a scheduled plan as one `replace` commit.

Each group's files are read, ordered by the plan's layout and written as the planned number of files
(bucketed groups: one file per bucket); groups run in parallel Spark jobs. The commit removes exactly the
plan's input files and completes the plan's instant.

- Retry: a completed plan returns its commit and writes nothing; an earlier attempt of the same plan whose
  writer died is rolled back first (same host and its process gone, or its heartbeat stale); a live one
  makes this attempt stop with a retryable conflict.
- Concurrent writers: appends (even to the same partitions) land, both. A writer that replaced one of the
  plan's input files (an overwrite, a bucket rewrite, another clustering) wins: the plan is rolled back
  with the reason and `LakePlanAborted` is raised; nothing of it was committed, and the next schedule
  plans the files again. Rows are counted in and out: a mismatch fails the commit.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering import jvm_words
from airflow_lake.lake.clustering.keys import add_keys
from airflow_lake.lake.clustering.layout import LINEAR, Layout
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION, ClusteringPlan, PlanGroup
from airflow_lake.lake.clustering.timeline import PendingPlan, pending_plans, rollback_command
from airflow_lake.lake.commit import recovery, requests
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakePlanAborted, LakeSpecError
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import COMPLETES, PLAN_REQUEST_ID, LogEntry, LogEntryExpired
from airflow_lake.lake.format.snapshots import Snapshot, snapshot_of
from airflow_lake.lake.spark.file_writer import WRITE_CONF, write_dataframe
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.spark.session_conf import session_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
OLDEST, ALL = "oldest", "all"
DEFAULT_PARALLELISM = 4
# Curve coordinates of timestamps without time zone are read in UTC, where the cast to TIMESTAMP is exact.
EXECUTE_CONF = {**WRITE_CONF, "spark.sql.session.timeZone": "UTC"}


@dataclass(frozen=True)
class Executed:
    """One plan's outcome: its commit, and whether an earlier run had made it."""

    plan_id: str
    entry: LogEntry
    already_committed: bool


def execute_clustering(table: TableMetadata, spark: SparkSession, *, plan_id: str | None = None, which: str = OLDEST,
                       request_id: str | None = None, parallelism: int = DEFAULT_PARALLELISM,
                       request_fingerprint: str | None = None) -> list[Executed]:
    """Run the plan `plan_id`, else the oldest pending plan (`which="oldest"`) or every pending plan in
    order (`which="all"`). Returns what ran (empty: no pending plan).

    Each plan is one commit under its own request id (`request_id`, then `request_id#1`, `#2`, ...), so a
    retry returns every commit its earlier tries made (flagged `already_committed`) and, for "all", then
    runs the plans still pending. A plan that cannot be run (damaged or edited) is skipped with a warning;
    when nothing else is left to run, `LakeSpecError` names it and the command that drops it.
    `request_fingerprint` (of the request's inputs, `commit.requests`) goes with each of those commits.
    """
    if plan_id is None and which not in (OLDEST, ALL):
        raise LakeSpecError("which", f"{which!r} is not allowed.", "Use 'oldest' or 'all', or give plan_id.")
    if plan_id is not None:
        if (done := _committed_plan(table, plan_id, request_id, request_fingerprint)) is not None:
            return [done]
        return [execute_plan(table, spark, plan_id, request_id=request_id, parallelism=parallelism,
                             request_fingerprint=request_fingerprint)]
    out = _earlier_runs(table, request_id, request_fingerprint)
    if which == OLDEST and out:
        return out
    pending = pending_plans(table)
    damaged = _warn_damaged(table, pending)
    todo = [p.id for p in pending if p.plan is not None][:1 if which == OLDEST else None]
    if damaged and not todo and not out:
        ids = ", ".join(p.id for p in damaged)
        raise LakeSpecError("which", f"the pending clustering plan(s) {ids} of {table.url!r} cannot be run "
                            f"({damaged[0].id}: {damaged[0].problem}). Nothing was committed.",
                            f"Drop them with `airflow-lake rollback-pending {table.url} "
                            f"{' '.join(p.id for p in damaged)}` and schedule a new plan.")
    for pid in todo:
        rid = None if request_id is None else _nth_request(request_id, len(out))
        out.append(execute_plan(table, spark, pid, request_id=rid, parallelism=parallelism,
                                request_fingerprint=request_fingerprint))
    return out


def committed_runs(table: TableMetadata, *, plan_id: str | None = None, which: str = OLDEST,
                   request_id: str | None = None, request_fingerprint: str | None = None) -> list[Executed] | None:
    """What `execute_clustering` returns when all it would do is return commits already made — by earlier tries of
    the request, or the plan `plan_id` executed already — read from the log alone, with no Spark; None when a plan
    is left to run, or when nothing was committed (then the run itself reports a no-op or an error)."""
    if plan_id is not None:
        done = _committed_plan(table, plan_id, request_id, request_fingerprint)
        return None if done is None else [done]
    out = _earlier_runs(table, request_id, request_fingerprint)
    if not out or which == OLDEST:
        return out or None
    pending = pending_plans(table)
    if any(p.plan is not None for p in pending):  # "all" runs the plans still pending
        return None
    _warn_damaged(table, pending)
    return out


def _committed_plan(table: TableMetadata, plan_id: str, request_id: str | None,
                    request_fingerprint: str | None) -> Executed | None:
    """The commit that executed plan `plan_id` under this request, or under any (`_executed_already`), if any."""
    prior = requests.committed(table, requests.Request(EXECUTE_OPERATION, request_id, request_fingerprint))
    if prior is not None and prior.metadata.get(COMPLETES) == plan_id:
        return Executed(plan_id, prior, True)
    return _executed_already(table, plan_id)


def _warn_damaged(table: TableMetadata, pending: list[PendingPlan]) -> list[PendingPlan]:
    """The pending plans that cannot be run, each logged with the command that drops it."""
    damaged = [p for p in pending if p.plan is None]
    for plan in damaged:
        log.warning("skipping clustering plan %s: it cannot be run (%s). Fix: `%s`, then schedule a new plan.",
                    plan.id, plan.problem, rollback_command(table, plan.id))
    return damaged


def _nth_request(request_id: str, index: int) -> str:
    """The request id of a request's `index`-th plan commit."""
    return request_id if index == 0 else f"{request_id}#{index}"


def _earlier_runs(table: TableMetadata, request_id: str | None, fingerprint: str | None) -> list[Executed]:
    """The plan commits earlier tries of `request_id` made, in order."""
    out: list[Executed] = []
    while request_id and (prior := requests.committed(table, requests.Request(
            EXECUTE_OPERATION, _nth_request(request_id, len(out)), fingerprint))) is not None:
        out.append(Executed(str(prior.metadata.get(COMPLETES)), prior, True))
    return out


def execute_plan(table: TableMetadata, spark: SparkSession, plan_id: str, *, request_id: str | None = None,
                 parallelism: int = DEFAULT_PARALLELISM, request_fingerprint: str | None = None) -> Executed:
    """Run one plan (see the module docstring)."""
    if (done := _executed_already(table, plan_id)) is not None:
        return done
    state = table.state()
    if plan_id in state.rolled_back:
        raise LakePlanAborted(f"clustering plan {plan_id} was rolled back ({_rollback_reason(table, plan_id)}); "
                              "nothing of it was committed. Fix: schedule a new plan (its files are planned again).")
    recovery.recover(table)  # rolls back earlier attempts whose writer died
    pending = _pending(table, plan_id)
    if pending.attempts:
        raise LakeCommitConflict(f"clustering plan {plan_id} is being executed by instant {pending.attempts[0]}, "
                                 "whose writer is alive; run this again once it has finished or died.")
    plan = pending.plan
    assert plan is not None
    state = table.state()
    _check_inputs(table, plan_id, plan, state.files)
    scheduled_as = {PLAN_REQUEST_ID: pending.request_id} if pending.request_id else {}
    txn = begin(table, "replace", EXECUTE_OPERATION, metadata={COMPLETES: plan_id, **scheduled_as},
                request_id=request_id, recover=False, request_fingerprint=request_fingerprint)
    try:
        _check_inputs(table, plan_id, plan, txn.base.files)
        started = time.monotonic()
        words = _words_engine(spark, plan.layout)
        added, group_metrics = _run_groups(table, spark, txn.instant, plan, snap=snapshot_of(txn.base),
                                           parallelism=parallelism)
        removed = [txn.base.files[p] for p in plan.files]
        rows_in, rows_out = sum(f.rows for f in removed), sum(f.rows for f in added)
        if rows_in != rows_out:
            raise LakeError(f"clustering plan {plan_id} read {rows_in} rows but wrote {rows_out}; nothing was "
                            "committed. This is a bug: please report it with the table's timeline.")
        metrics = {"plan_id": plan_id, "groups": len(plan.groups), "layout": plan.layout.describe(),
                   "files_before": len(removed), "files_after": len(added),
                   "bytes_before": sum(f.bytes for f in removed), "bytes_after": sum(f.bytes for f in added),
                   "rows": rows_out, "partitions": len({g.partition_key for g in group_metrics}),
                   "execute_seconds": round(time.monotonic() - started, 3), **words}
        entry = txn.commit(added=added, removed=plan.files, metrics=metrics,
                           metadata={"layout": plan.layout.to_dict()})
    except LakeCommitConflict as err:
        txn.abort()
        gone = [p for p in plan.files if p not in table.state().files]
        if gone and plan_id not in table.state().rolled_back:
            _abort_plan(table, plan_id, f"{len(gone)} input file(s) were replaced meanwhile, e.g. {gone[0]!r}")
            raise LakePlanAborted(f"clustering plan {plan_id} was aborted: a concurrent commit replaced {len(gone)} of "
                                  f"its input files ({err}). Nothing of it was committed. Fix: schedule a new "
                                  "plan (the files are planned again).") from err
        raise
    except BaseException:
        txn.abort()
        raise
    try:
        instants.remove_pending(table.storage, plan_id)
    except OSError:  # a finished plan's leftovers; the next writer tidies them
        log.warning("removing the pending files of plan %s failed", plan_id, exc_info=True)
    return Executed(plan_id, entry, False)


def _executed_already(table: TableMetadata, plan_id: str) -> Executed | None:
    """The commit that executed plan `plan_id`, if it has been executed (metadata only)."""
    if not instants.is_instant_id(str(plan_id)):
        raise LakeSpecError("plan_id", f"{plan_id!r} is not an instant id.", "Give the id schedule_clustering "
                            "returned (17 digits), or leave it out to run the oldest pending plan.")
    state = table.state()
    if plan_id not in state.instants:
        return None
    entry = table.commit_log.read(state.instants[plan_id])
    log.info("clustering plan %s was already executed by instant %s", plan_id, entry.instant)
    recovery.tidy_if_left(table, entry)  # its executor may have died just past the commit
    return Executed(plan_id, entry, True)


@dataclass(frozen=True)
class _GroupResult:
    partition_key: tuple[tuple[str, str | None], ...]
    files: int


def _words_engine(spark: SparkSession, layout: Layout) -> dict[str, str]:
    """Where a curve layout's words are computed (`keys.words_column`), for the metrics: "jvm" or "python"."""
    if layout.effective_kind == LINEAR:
        return {}
    return {"curve_words": "jvm" if jvm_words.available(spark, len(layout.columns)) else "python"}


def _run_groups(table: TableMetadata, spark: SparkSession, instant: str, plan: ClusteringPlan, *, snap: Snapshot,
                parallelism: int) -> tuple[list[DataFile], list[_GroupResult]]:
    total = len(plan.groups)
    done: list[int] = []

    def run(index: int, group: PlanGroup) -> list[DataFile]:
        files = rewrite_group(table, spark, instant, snap=snap, group=group, layout=plan.layout, seed=index)
        done.append(index)
        log.info("clustering: group %d/%d done (%d of %d groups): partition %s, %d file(s) -> %d", index + 1,
                 total, len(done), total, dict(group.partition), len(group.files), len(files))
        return files

    log.info("clustering %s: %d group(s), %d file(s), layout %s, %d at a time", table.url, total, len(plan.files),
             plan.layout.describe(), max(1, min(parallelism, total)))
    with session_conf(spark, EXECUTE_CONF), \
            ThreadPoolExecutor(max_workers=max(1, min(parallelism, total))) as pool:
        results = list(pool.map(lambda item: run(*item), enumerate(plan.groups)))
    added = [f for files in results for f in files]
    return added, [_GroupResult(tuple(sorted(g.partition.items())), len(r)) for g, r in zip(plan.groups, results,
                                                                                            strict=True)]


def rewrite_group(table: TableMetadata, spark: SparkSession, instant: str, *, snap: Snapshot, group: PlanGroup,
                  layout: Layout, seed: int = 0) -> list[DataFile]:
    """Read a group's files, order the rows by the layout, and write them as files of `instant`."""
    from pyspark.sql import functions as F

    spec = snap.spec
    by_path = {f.path: f for f in snap.files}
    df = Scan(table.storage, snap, (), tuple(by_path[p] for p in group.files)).to_df(spark)
    bucketed = bool(group.buckets)
    target = spec if bucketed or spec.bucket is None else dataclasses.replace(spec, bucket=None)  # plain partition
    df, keys, slot = add_keys(df, layout, spec, files=1 if bucketed else group.output_files, seed=seed,
                              rows=sum(by_path[p].rows for p in group.files))  # (the log's counts: no count job)
    helpers = [k for k in keys if k not in spec.column_names]
    partition = [dict(group.partition)] if spec.partition_columns else None
    if bucketed:  # the writer puts each bucket in one file, ordered by the bucket sort columns or the keys
        return write_dataframe(df, table.storage, target, instant, allowed_partitions=partition,
                               sort_within=keys if layout.columns else None, drop_columns=helpers)
    if slot is not None:  # curves: each row's file was cut from the sample (keys.py)
        ordered = df.repartition(group.output_files, slot)
    elif keys:  # ranges of the keys, one per output file; the writer sorts each by the keys
        ordered = df.repartitionByRange(group.output_files, *[F.col(f"`{k}`") for k in keys])
    else:
        ordered = df.repartition(group.output_files)
    return write_dataframe(ordered, table.storage, target, instant, allowed_partitions=partition,
                           sort_within=keys, drop_columns=helpers)


def _pending(table: TableMetadata, plan_id: str) -> PendingPlan:
    for pending in pending_plans(table):
        if pending.id == plan_id:
            if pending.plan is None:
                raise LakeSpecError("plan_id", f"clustering plan {plan_id} of {table.url!r} cannot be run: "
                                    f"{pending.problem}. Nothing was committed.",
                                    f"Drop it with `{rollback_command(table, plan_id)}` and schedule a new plan.")
            return pending
    raise LakeSpecError("plan_id", f"no pending clustering plan {plan_id} on {table.url!r}.",
                        "Give a plan from `airflow-lake plans PATH`, or leave plan_id out to run the oldest.")


def _check_inputs(table: TableMetadata, plan_id: str, plan: ClusteringPlan, live: Any) -> None:
    gone = [p for p in plan.files if p not in live]
    if gone:
        _abort_plan(table, plan_id, f"{len(gone)} input file(s) were replaced since it was planned, e.g. {gone[0]!r}")
        raise LakePlanAborted(f"clustering plan {plan_id} was aborted: {len(gone)} of its input files were replaced "
                              f"since it was planned (e.g. {gone[0]!r}). Nothing of it was committed. Fix: schedule "
                              "a new plan (the files are planned again).")


def _abort_plan(table: TableMetadata, plan_id: str, reason: str) -> None:
    log.warning("clustering plan %s aborted: %s", plan_id, reason)
    recovery.rollback_unchecked(table, [plan_id], reason=f"clustering plan aborted: {reason}")


def _rollback_reason(table: TableMetadata, plan_id: str) -> str:
    seq = table.state().rolled_back.get(plan_id)
    if seq is None:
        return "rolled back"
    try:
        return str(table.commit_log.read(seq).metadata.get("reason", "rolled back"))
    except LogEntryExpired:
        return "rolled back long ago: its log entry expired"


def result_metrics(executed: Executed) -> dict[str, Any]:
    """A plan run's metrics for XCom."""
    return requests.entry_result(executed.entry, plan_id=executed.plan_id,
                                 already_committed=executed.already_committed)


__all__ = ["ALL", "OLDEST", "Executed", "committed_runs", "execute_clustering", "execute_plan", "result_metrics",
           "rewrite_group"]
