"""The example short-video pipeline, incremental: the ODS steps of `lake_ods_to_dm` (the day's events loaded,
the dimension batches upserted, late ones included), then every downstream table rebuilt only where its inputs
changed.

- **DWD**: `dwd_plays` and `dwd_likes` consume the changes of `ods_events` (plays also those of `ods_users`)
  and overwrite exactly the days those changes touch — for a changed user, the days that user played —
  recomputed from the whole upstream tables of those days; `dwd_works` is rebuilt when `ods_works` changed.
- **DWS**: `dws_work_daily` consumes the DWD tables' changes: the days whose plays or likes changed, and the
  days a changed work was played, are rebuilt.
- **DM**: `dm_work_7d` rebuilds the days whose 7-day window holds a changed DWS day.

Each step reads its upstreams' changes since the snapshot *its own table* last consumed (the `incremental`
views), and its commit records how far it consumed, in the same log entry as its rows: a retry, a rerun or a
duplicated run processes no change twice and skips none. Every table equals a full rebuild from its upstreams'
current snapshots (the dimensions as merged now, for every day); so a late dimension batch (`backfill_days`)
rebuilds just the DWS and DM days it affects. The upstream tables are read in only the partitions the changes
touched. An upstream with no change: the step runs no query.

Param `rebuild`: "incremental" (default) or "full" — every table rebuilt for all its days by the same queries
(the consumed positions recorded too, so later incremental runs continue from there).

    airflow dags test lake_ods_to_dm_incremental 2024-01-01
    airflow dags test lake_ods_to_dm_incremental 2024-01-03 -c '{"backfill_days": ["2024-01-02"]}'
    airflow dags test lake_ods_to_dm_incremental 2024-01-03 -c '{"rebuild": "full"}'

Every commit emits its table's Asset event, as `lake_ods_to_dm`'s do: `lake_maintenance` runs on them.
`lake_ods_to_dm` stays the "rebuild the run's day" pipeline over the same tables.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_lake.examples.ods_steps import ods_steps, pipeline_params
from airflow_lake.examples.video_incremental import INCREMENTAL_PARAM_NAMES, REBUILD_MODES, STEPS
from airflow_lake.examples.video_pipeline import SPARK_CONN_ID, TABLES, run_day
from airflow_lake.operators.write import LakeWriteOperator

with DAG(
    dag_id="lake_ods_to_dm_incremental",
    schedule=None,  # triggered (the UI form, REST, `airflow dags test`): it shares its tables with lake_ods_to_dm
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    # $AIRFLOW_LAKE_SPARK_CONN_ID: spark-submit or Spark Connect (mapped tasks take it in partial())
    default_args={"conn_id": SPARK_CONN_ID},
    tags=["airflow-lake", "example"],
    user_defined_macros={"run_day": run_day},
    params={
        **pipeline_params(),
        "rebuild": Param("incremental", type="string", enum=list(REBUILD_MODES),
                         description="incremental: rebuild only the days whose inputs changed since each table "
                                     "last consumed them; full: every table for all its days (positions "
                                     "recorded, so later incremental runs continue from there)."),
    },
    doc_md=__doc__,
) as dag:
    ods = ods_steps(INCREMENTAL_PARAM_NAMES)
    creates = ods.creates

    # each step's query, views and views of changes: airflow_lake/examples/video_incremental.py (STEPS)
    build = {name: LakeWriteOperator(**step.operator_args(TABLES)) for name, step in STEPS.items()}

    [ods.load_events, ods.upsert_users, creates["dwd_plays"]] >> build["dwd_plays"]
    [ods.load_events, creates["dwd_likes"]] >> build["dwd_likes"]
    [ods.upsert_works, creates["dwd_works"]] >> build["dwd_works"]
    [build["dwd_plays"], build["dwd_likes"], build["dwd_works"], creates["dws_work_daily"]] >> build["dws_work_daily"]
    [build["dws_work_daily"], creates["dm_work_7d"]] >> build["dm_work_7d"]
