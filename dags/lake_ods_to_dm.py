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

import pendulum
from airflow.sdk import DAG

from airflow_lake.examples.ods_steps import ods_steps, pipeline_params
from airflow_lake.examples.video_pipeline import (
    BUCKETED_JOIN_CONF,
    DAY,
    DM_SQL,
    DWD_LIKES_SQL,
    DWD_PLAYS_SQL,
    DWD_WORKS_SQL,
    DWS_SQL,
    PARAM_NAMES,
    PIPELINE_SCHEDULE,
    SPARK_CONN_ID,
    TABLES,
    WEEK_START,
    run_day,
)
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
    params=pipeline_params(),
    doc_md=__doc__,
) as dag:
    # the Params check, the creates, the landing, ods_events and the dimension upserts (shared with the
    # incremental variant, dags/lake_ods_to_dm_incremental.py)
    ods = ods_steps(PARAM_NAMES)
    creates, load_events, upsert_works, upsert_users = ods.creates, ods.load_events, ods.upsert_works, ods.upsert_users

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

    [load_events, upsert_users, creates["dwd_plays"]] >> build_plays
    [load_events, creates["dwd_likes"]] >> build_likes
    [upsert_works, creates["dwd_works"]] >> build_works
    [build_plays, build_likes, build_works, creates["dws_work_daily"]] >> build_dws
    [build_dws, creates["dm_work_7d"]] >> build_dm
