"""Upkeep of the example pipeline's tables, run on data, not on a clock: every commit to the DM table (an
asset event from `lake_ods_to_dm`) queues a run.

- `CommitCountSensor` (deferrable: it waits in the triggerer, not in a worker slot) until the DM table has had
  `min_commits` commits since its last clustering;
- `ScheduleClusteringOperator` -> `ExecuteClusteringOperator`: the DM partitions' small files rewritten in
  Z-order (or Hilbert order) over the columns the dashboards filter on, so their queries skip files;
- `CompactUpsertsOperator` on the primary-key dimensions (their upserts folded into base files);
- `LakeCleanOperator` on every table: files replaced more than `retain_hours` ago are deleted. It cannot go below
  the tables' `clean.retain.hours` (168 h, the default): snapshots within it stay restorable (`LakeRestoreOperator`).

    airflow dags test lake_maintenance 2024-01-02 -c '{"layout": "HILBERT"}'
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_lake.assets import table_asset
from airflow_lake.compat import AirflowFailException
from airflow_lake.examples.video_pipeline import (
    DM_SORT_COLUMNS,
    MAINTENANCE_PARAM_NAMES,
    SPARK_CONN_ID,
    TABLES,
    refuse_unknown_params,
)
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.maintenance import LakeCleanOperator
from airflow_lake.sensors.commit_count import CommitCountSensor

DM = TABLES["dm_work_7d"]
# The example tables keep the default clean.retain.hours; clean refuses a shorter retention without `force`, so the
# form does too (a table created with a lower property could go lower).
TABLE_RETAIN_HOURS = 168

with DAG(
    dag_id="lake_maintenance",
    schedule=table_asset(DM),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    # $AIRFLOW_LAKE_SPARK_CONN_ID: spark-submit or Spark Connect (mapped tasks take it in partial())
    default_args={"conn_id": SPARK_CONN_ID},
    tags=["airflow-lake", "example"],
    params={
        "min_commits": Param(2, type="integer", minimum=1, maximum=1000,
                             description="Commits to the DM table since its last clustering before clustering."),
        "layout": Param("ZORDER", type="string", enum=["ZORDER", "HILBERT"],
                        description="Order of the clustered DM files."),
        "target_file_bytes": Param(8 * 1024, type="integer", minimum=1024, maximum=1024**4,
                                   description="Size of a clustered file (small for the sample data, so a "
                                               "partition becomes several files that queries can skip)."),
        # whole hours: JSON Schema's "number" takes NaN (it fails no minimum), an integer cannot be NaN
        "retain_hours": Param(TABLE_RETAIN_HOURS, type="integer", minimum=TABLE_RETAIN_HOURS, maximum=10 * 365 * 24,
                              description="Keep replaced files this many hours (time travel, restore), then delete "
                                          f"them; at least the tables' clean.retain.hours ({TABLE_RETAIN_HOURS})."),
    },
    doc_md=__doc__,
) as dag:

    @task
    def check_params(params: dict[str, Any] | None = None, dag_run: Any = None) -> None:
        """Before any task runs: no conf key that is not one of this DAG's Params (a misspelt one would be
        ignored in silence and the default used)."""
        try:
            refuse_unknown_params(params, dag_run, MAINTENANCE_PARAM_NAMES)
        except ValueError as err:  # a bad Param: retrying cannot help
            raise AirflowFailException(str(err)) from None

    check = check_params()
    wait = CommitCountSensor(
        task_id="wait_for_dm_commits", table=DM, min_commits="{{ params.min_commits }}", deferrable=True,
        poke_interval=5, timeout=timedelta(hours=12), soft_fail=True,  # no new commits today: skip, not fail
    )
    plan = ScheduleClusteringOperator(
        task_id="plan_dm_clustering", table=DM, min_commits="{{ params.min_commits }}",
        layout="{{ params.layout }}", sort_columns=DM_SORT_COLUMNS,
        small_file_limit_bytes="{{ params.target_file_bytes }}",
        target_file_max_bytes="{{ params.target_file_bytes }}",
    )
    cluster = ExecuteClusteringOperator(task_id="cluster_dm", table=DM, plan_id=plan.output["plan_id"])
    compact = [CompactUpsertsOperator(task_id=f"compact_{name}", table=TABLES[name])
               for name in ("ods_works", "ods_users")]
    clean = LakeCleanOperator.partial(
        task_id="clean", retain_hours="{{ params.retain_hours }}", trigger_rule="none_failed", conn_id=SPARK_CONN_ID,
    ).expand(table=list(TABLES.values()))

    check >> wait >> plan >> cluster >> clean
    check >> compact
    compact >> clean
