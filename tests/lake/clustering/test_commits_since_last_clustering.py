"""filter_mode COMMITS_SINCE_LAST_CLUSTERING (issue 23): plan the partitions the commits since the last clustering
wrote to — the commits that fired the sensor — not the newest partitions by value. Through the job runner (the
schedule needs no Spark); commits are metadata-only."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lake.jobs.runner import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION
from airflow_lake.lake.clustering.timeline import commits_since, pending_plans
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.log import COMPLETES
from airflow_lake.operators.clustering import ScheduleClusteringOperator
from tests.lake.lake_core_helpers import append, data_file, make_table

MB = 1024 * 1024
DAYS = [f"2024-03-0{d}" for d in range(1, 6)]
MODE = "COMMITS_SINCE_LAST_CLUSTERING"


def schedule(path: str, **spec: Any) -> dict[str, Any]:
    return run(None, "schedule_clustering", {"table": path, **spec})


def execute(table: LakeTable, plan_id: str) -> None:
    """Complete a plan as execute_clustering does: one output file per group, in the group's partition."""
    plan = next(p for p in pending_plans(table) if p.id == plan_id).plan
    assert plan is not None
    txn = table.begin("replace", EXECUTE_OPERATION, metadata={COMPLETES: plan_id})
    txn.commit(added=[data_file(txn, str(g.partition["dt"]), size=MB) for g in plan.groups], removed=plan.files)
    instants.remove_pending(table.storage, plan_id)


def planned_days(out: dict[str, Any], table: LakeTable) -> list[str]:
    plan = next(p for p in pending_plans(table) if p.id == out["plan_id"]).plan
    assert plan is not None
    return sorted(str(g.partition["dt"]) for g in plan.groups)


def clustered_table(path: str) -> LakeTable:
    """Five days of two small files each; the last clustering covered the first four (the newest day still has
    its two small files: RECENT_DAYS picks it)."""
    table = make_table(path)
    for day in DAYS:
        append(table, day, files=2, size=MB)
    first = schedule(path, min_commits=0, filter_mode="SELECTED_PARTITIONS", end_partition={"dt": DAYS[3]})
    assert planned_days(first, table) == DAYS[:4]
    execute(table, first["plan_id"])
    return table


def test_a_backfill_into_an_old_day_plans_exactly_that_day(table_path: str) -> None:
    table = clustered_table(table_path)
    for _ in range(4):  # the backfill run: four commits into an old day fire the sensor
        append(table, DAYS[1], size=MB)
    assert commits_since(table).count == 4
    recent = schedule(table_path, filter_mode="RECENT_DAYS", lookback_partitions=1)
    assert planned_days(recent, table) == [DAYS[4]]  # the issue: the newest day by value, not the backfilled one
    table.rollback_pending([recent["plan_id"]])

    out = schedule(table_path, filter_mode=MODE)
    assert planned_days(out, table) == [DAYS[1]]
    assert (out["partitions_chosen"], out["partitions_with_commits"], out["input_files"]) == (1, 1, 5)
    assert out["noop"] is False and out["existing_plan"] is False
    plan = next(p for p in pending_plans(table) if p.id == out["plan_id"]).plan
    assert plan is not None and plan.strategy["filter_mode"] == MODE


def test_only_commits_since_the_last_clustering_count_and_the_regex_still_applies(table_path: str) -> None:
    table = clustered_table(table_path)
    append(table, DAYS[0], files=2, size=MB)
    append(table, DAYS[2], files=2, size=MB)
    out = schedule(table_path, filter_mode=MODE, min_commits=2)
    assert planned_days(out, table) == [DAYS[0], DAYS[2]]  # not DAYS[4]: no commit since the last clustering
    execute(table, out["plan_id"])
    append(table, DAYS[3], files=2, size=MB)
    append(table, DAYS[1], files=2, size=MB)
    narrowed = schedule(table_path, filter_mode=MODE, min_commits=2, partition_regex="dt=2024-03-0[4-9]")
    assert planned_days(narrowed, table) == [DAYS[3]]
    # nothing to plan among the committed partitions: no plan, and the reason says so
    nothing = schedule(table_path, filter_mode=MODE, min_commits=0, partition_regex="dt=2024-03-05")
    assert nothing["plan_id"] is None and nothing["noop"] is True
    assert nothing["reason"].startswith("nothing to cluster in 0 chosen partition(s)")


def test_without_a_clustering_yet_every_partition_committed_to_counts(table_path: str) -> None:
    table = make_table(table_path)
    for day in DAYS[:3]:
        append(table, day, files=2, size=MB)
    out = schedule(table_path, filter_mode=MODE, min_commits=3)
    assert planned_days(out, table) == DAYS[:3] and out["partitions_with_commits"] == 3


def test_the_mode_needs_a_partitioned_table_and_the_operator_passes_it_on(table_path: str) -> None:
    make_table(table_path, partition_by=())
    with pytest.raises(LakeSpecError, match=f"filter_mode: {MODE} chooses partitions, but the table is not "
                                            "partitioned"):
        schedule(table_path, filter_mode=MODE)
    op = ScheduleClusteringOperator(task_id="plan", table=table_path, filter_mode="commits_since_last_clustering")
    assert op.build_spec({})["filter_mode"] == MODE  # type: ignore[arg-type]
