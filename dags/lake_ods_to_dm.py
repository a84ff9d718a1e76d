"""The example short-video pipeline: ODS -> DWD -> DWS -> DM lake tables, bucketed by `work_id` from DWD on.

- **ODS**: a day of play / like events lands as small Parquet files and is written to `ods_events` (the day's
  partition, overwritten: a rerun gives the same table); the works and users dimensions are *upserted* by
  primary key with the day as version (`VersionedUpsertOperator`, mapped: the day plus any `backfill_days`,
  all at once and in any order — a late batch still merges in version order).
- **DWD**: valid plays (with the user's region and level) and likes, bucketed by `work_id` (2B and B
  buckets), and the merged works dimension (B buckets).
- **DWS**: per work and day — plays join works (2B coalesced to B), likes join on (work_id, dt).
- **DM**: per work over the last 7 days, for the dashboards; `lake_maintenance` clusters it afterwards.

From DWD on no query shuffles: those steps set `max_exchanges=0`, so the run fails loudly, before writing,
if a change makes one shuffle (each step's metrics report `query_exchanges` and `write_exchanges`). Each
table is an Airflow Asset: every commit emits an event with its metrics (`lake_maintenance` runs on them).

    airflow dags test lake_ods_to_dm 2024-01-01
    airflow dags test lake_ods_to_dm 2024-01-03 -c '{"backfill_days": ["2024-01-02"]}'

Trigger it from the UI with the form (Params: day, events per day, bucket count, backfill days). The Params'
JSON schema refuses what it can when the run is triggered; the first task, `check_params`, refuses the rest
before any task writes: a day in the future, a backfill day after the run's day (a batch's version is its
day, YYYYMMDD: such a batch would outrank every later real batch, for good), or a conf key that is no Param (Airflow
takes one in silence: a misspelt `dayy` would run with the default day).
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_lake.compat import AirflowFailException  # airflow.sdk.exceptions from Airflow 3.2 on
from airflow_lake.examples.video_pipeline import (
    BUCKETED_JOIN_CONF,
    CREATE,
    DATE_PATTERN,
    DAY,
    DAY_SCHEMA,
    DM_SQL,
    DWD_LIKES_SQL,
    DWD_PLAYS_SQL,
    DWD_WORKS_SQL,
    DWS_SQL,
    LANDING,
    PIPELINE_SCHEDULE,
    SPARK_CONN_ID,
    TABLES,
    WEEK_START,
    run_day,
)
from airflow_lake.examples.video_pipeline import check_params as check_run_params
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator

with DAG(
    dag_id="lake_ods_to_dm",
    schedule=PIPELINE_SCHEDULE,  # "@daily"; $AIRFLOW_LAKE_PIPELINE_SCHEDULE="" runs it only when triggered
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    # $AIRFLOW_LAKE_SPARK_CONN_ID: spark-submit or Spark Connect (mapped tasks take it in partial())
    default_args={"conn_id": SPARK_CONN_ID},
    tags=["airflow-lake", "example"],
    user_defined_macros={"run_day": run_day},
    params={
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
    },
    doc_md=__doc__,
) as dag:

    @task
    def check_params(params: dict[str, Any] | None = None, dag_run: Any = None) -> dict[str, Any]:
        """Before any task writes: the run's day in range and not in the future, no backfill day after it."""
        try:
            return check_run_params(params or {}, dag_run)
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

    creates = {name: LakeCreateTableOperator(task_id=f"create_{name}", table=path, **CREATE[name])
               for name, path in TABLES.items()}
    batches = land()

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

    day_of = {"filters": [["dt", "=", DAY]]}
    build_plays = LakeWriteOperator(
        task_id="build_dwd_plays", table=TABLES["dwd_plays"], query=DWD_PLAYS_SQL,
        tables={"events": {"path": TABLES["ods_events"], **day_of}, "users": TABLES["ods_users"]},
        mode="overwrite", partitions=[{"dt": DAY}],
    )
    build_likes = LakeWriteOperator(
        task_id="build_dwd_likes", table=TABLES["dwd_likes"], query=DWD_LIKES_SQL,
        tables={"events": {"path": TABLES["ods_events"], **day_of}}, mode="overwrite", partitions=[{"dt": DAY}],
    )
    build_works = LakeWriteOperator(
        task_id="build_dwd_works", table=TABLES["dwd_works"], query=DWD_WORKS_SQL,
        tables={"works": TABLES["ods_works"]}, mode="overwrite", max_exchanges=0,
    )
    build_dws = LakeWriteOperator(
        task_id="build_dws_work_daily", table=TABLES["dws_work_daily"], query=DWS_SQL,
        tables={"plays": {"path": TABLES["dwd_plays"], **day_of}, "likes": {"path": TABLES["dwd_likes"], **day_of},
                "works": TABLES["dwd_works"]},
        mode="overwrite", partitions=[{"dt": DAY}], max_exchanges=0, spark_conf=BUCKETED_JOIN_CONF,
    )
    build_dm = LakeWriteOperator(
        task_id="build_dm_work_7d", table=TABLES["dm_work_7d"], query=DM_SQL,
        tables={"dws": {"path": TABLES["dws_work_daily"], "filters": [["dt", ">=", WEEK_START], ["dt", "<=", DAY]]}},
        mode="overwrite", partitions=[{"dt": DAY}], max_exchanges=0,
    )

    check_params() >> [batches, *creates.values()]
    [batches, creates["ods_events"]] >> load_events
    creates["ods_works"] >> upsert_works
    creates["ods_users"] >> upsert_users
    [load_events, upsert_users, creates["dwd_plays"]] >> build_plays
    [load_events, creates["dwd_likes"]] >> build_likes
    [upsert_works, creates["dwd_works"]] >> build_works
    [build_plays, build_likes, build_works, creates["dws_work_daily"]] >> build_dws
    [build_dws, creates["dm_work_7d"]] >> build_dm
