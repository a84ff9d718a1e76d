"""The pieces both example pipelines (`lake_ods_to_dm`, `lake_ods_to_dm_incremental`) share: their Params, the
run's first check, the landing stand-in, the table creates and the ODS steps (the day's events loaded, the
dimension batches upserted, late ones included). Airflow-facing (Params, tasks, operators); only DAG files call
it, inside their `with DAG(...)` block. Light at parse time, as the operators are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import Param, task

from airflow_lake.compat import AirflowFailException  # airflow.sdk.exceptions from Airflow 3.2 on
from airflow_lake.examples.video_pipeline import (
    CREATE,
    DATE_PATTERN,
    DAY,
    DAY_SCHEMA,
    LANDING,
    SPARK_CONN_ID,
    TABLES,
    run_day,
)
from airflow_lake.examples.video_pipeline import check_params as check_run_params
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator


def pipeline_params() -> dict[str, Param]:
    """The Params of the example pipelines (`video_pipeline.PARAM_NAMES`): the day, its size, the bucket count and
    the days whose dimension batches arrive late."""
    return {
        "day": Param(None, description="Day to process (YYYY-MM-DD, 1900-2999, not in the future); empty: the "
                                       "run's logical date.", **DAY_SCHEMA),
        "events_per_day": Param(20_000, type="integer", minimum=100, maximum=5_000_000,
                                description="Events the sample generator lands for the day."),
        "buckets": Param(8, type="integer", enum=[2, 4, 8, 16, 32, 64],
                         description="Bucket count B (a power of two) of the tables bucketed by work_id; the "
                                     "plays table gets 2B. Used when the tables are created."),
        "backfill_days": Param([], type="array",
                               items={"type": "string", "format": "date", "pattern": DATE_PATTERN}, maxItems=31,
                               uniqueItems=True,
                               description="Earlier days (up to the run's day) whose dimension batches arrive "
                                           "late: upserted with their own (lower) versions, in parallel with "
                                           "today's."),
    }


@dataclass(frozen=True)
class OdsSteps:
    """The tasks `ods_steps` added: the DWD steps hang below them."""

    check: Any  # the run's first task (every other waits for it)
    creates: dict[str, LakeCreateTableOperator]  # per table name
    load_events: LakeWriteOperator  # the day's events into ods_events
    upsert_works: Any  # the mapped upserts of the dimension batches
    upsert_users: Any


@task
def check_params(names: Sequence[str], params: dict[str, Any] | None = None, dag_run: Any = None
                 ) -> dict[str, Any]:
    """Before any task writes: the run's day in range and not in the future, no backfill day after it, no conf
    key that is not one of the DAG's Params (`names`)."""
    try:
        return check_run_params(params or {}, dag_run, names=tuple(names))
    except ValueError as err:  # a bad Param: retrying cannot help
        raise AirflowFailException(str(err)) from None


@task
def land(params: dict[str, Any] | None = None, dag_run: Any = None) -> list[dict[str, Any]]:
    """Stand-in for upstream systems: land the day's events and the dimension batches (the day's and the
    backfill days'); returns one upsert per dimension batch for the mapped upsert tasks."""
    from airflow_lake.datagen import video

    assert params is not None
    day = run_day(params, dag_run)
    sizes = video.Sizes(events=int(params["events_per_day"]))
    batches = []
    for when in [day, *sorted(set(params.get("backfill_days") or []) - {day})]:
        landed = video.land_day(LANDING, when, sizes, parts=video.PARTS if when == day else ("works", "users"))
        batches.append({"version": video.version_of(when), "works": landed["works"], "users": landed["users"]})
    return batches


@task
def upserts(batches: list[dict[str, Any]], dimension: str) -> list[dict[str, Any]]:
    """The keyword arguments of one dimension's upserts."""
    return [{"source_path": b[dimension], "version": b["version"]} for b in batches]


def ods_steps(param_names: Sequence[str]) -> OdsSteps:
    """Add the shared first half of a pipeline DAG (call it inside `with DAG(...)`): the Params check, the
    creates, the landing, the day's events overwritten into ods_events, the dimension batches upserted."""
    check = check_params(list(param_names))
    creates = {name: LakeCreateTableOperator(task_id=f"create_{name}", table=path, **CREATE[name])
               for name, path in TABLES.items()}
    batches: Any = land()  # an XComArg: the mapped upserts expand over what the task returns
    load_events = LakeWriteOperator(
        task_id="load_ods_events", table=TABLES["ods_events"], source_path=LANDING + f"/events/dt={DAY}",
        mode="overwrite", partitions=[{"dt": DAY}],
    )
    upsert_works = VersionedUpsertOperator.partial(
        task_id="upsert_ods_works", table=TABLES["ods_works"], conn_id=SPARK_CONN_ID,
    ).expand_kwargs(upserts(batches, "works"))
    upsert_users = VersionedUpsertOperator.partial(
        task_id="upsert_ods_users", table=TABLES["ods_users"], conn_id=SPARK_CONN_ID,
    ).expand_kwargs(upserts(batches, "users"))
    check >> [batches, *creates.values()]
    [batches, creates["ods_events"]] >> load_events
    creates["ods_works"] >> upsert_works
    creates["ods_users"] >> upsert_users
    return OdsSteps(check, creates, load_events, upsert_works, upsert_users)
