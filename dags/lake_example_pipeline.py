"""Example pipeline: raw orders -> ODS -> DWD -> DWS -> DM lake tables, one partition per day, then a
Hudi-style clustering of the ODS table once it has had two commits since its last clustering.

Every step is idempotent for its day (it overwrites the day's partition), so re-running a day or
retrying a task gives the same tables. Run it with:

    airflow dags test lake_example_pipeline 2024-01-01
"""

from __future__ import annotations

import os
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.table import LakeCreateTableOperator
from airflow_lake.operators.write import LakeWriteOperator

LAKE_ROOT = os.environ.get("AIRFLOW_LAKE_ROOT", "/tmp/airflow-lake/lake")
LANDING = os.environ.get("AIRFLOW_LAKE_LANDING", "/tmp/airflow-lake/landing")
DAY = "{{ ds }}"
BUCKETS = 8  # one power of two for the whole chain, so each step can join and aggregate without a shuffle

with DAG(
    dag_id="lake_example_pipeline",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-lake", "example"],
    params={"orders_per_day": Param(2000, type="integer", minimum=1, maximum=1_000_000,
                                    description="How many raw orders the demo generator lands per day.")},
    doc_md=__doc__,
) as dag:

    @task
    def land_raw_orders(ds: str | None = None, params: dict[str, Any] | None = None) -> str:
        """Stand-in for an upstream system: land one day of raw orders as Parquet (deterministic per day)."""
        import random

        import pyarrow as pa
        import pyarrow.parquet as pq

        assert ds is not None and params is not None
        rng = random.Random(ds)
        count = int(params["orders_per_day"])
        day_start = pendulum.parse(ds).int_timestamp  # type: ignore[union-attr]
        base_id = int(ds.replace("-", "")) * 10_000_000
        table = pa.table({
            "order_id": [base_id + i for i in range(count)],
            "customer_id": [rng.randrange(1, 500) for _ in range(count)],
            "amount": [round(rng.uniform(-5, 200), 2) for _ in range(count)],
            "status": [rng.choice(["paid", "paid", "paid", "refunded", "cancelled"]) for _ in range(count)],
            "order_ts": pa.array([(day_start + rng.randrange(86_400)) * 1_000_000 for _ in range(count)],
                                 pa.timestamp("us", tz="UTC")),
            "dt": [ds] * count,
        })
        directory = os.path.join(LANDING, "orders", f"dt={ds}")
        os.makedirs(directory, exist_ok=True)
        batches = 4  # raw data arrives in batches: the ODS table gets small files that clustering merges
        for i in range(batches):
            pq.write_table(table.slice(i * count // batches, (i + 1) * count // batches - i * count // batches),
                           os.path.join(directory, f"orders-{i}.parquet"))
        return directory

    create_ods = LakeCreateTableOperator(
        task_id="create_ods_orders", table=f"{LAKE_ROOT}/ods_orders",
        schema="order_id BIGINT NOT NULL, customer_id BIGINT, amount DOUBLE, status STRING, "
               "order_ts TIMESTAMP, dt STRING",
        partition_by=["dt"],
    )
    create_dwd = LakeCreateTableOperator(
        task_id="create_dwd_orders", table=f"{LAKE_ROOT}/dwd_orders",
        schema="order_id BIGINT NOT NULL, customer_id BIGINT NOT NULL, amount DOUBLE, order_ts TIMESTAMP, dt STRING",
        partition_by=["dt"], bucket={"columns": ["customer_id"], "count": BUCKETS, "sort_columns": ["customer_id"]},
    )
    create_dws = LakeCreateTableOperator(
        task_id="create_dws_customer_daily", table=f"{LAKE_ROOT}/dws_customer_daily",
        schema="customer_id BIGINT NOT NULL, orders BIGINT, revenue DOUBLE, dt STRING",
        partition_by=["dt"], bucket={"columns": ["customer_id"], "count": BUCKETS, "sort_columns": ["customer_id"]},
    )
    create_dm = LakeCreateTableOperator(
        task_id="create_dm_daily_summary", table=f"{LAKE_ROOT}/dm_daily_summary",
        schema="customers BIGINT, orders BIGINT, revenue DOUBLE, top_customer BIGINT, dt STRING",
        partition_by=["dt"],
    )

    raw = land_raw_orders()

    # SQL is plain text with Airflow templates: no Python string building, no values pasted in.
    load_ods = LakeWriteOperator(
        task_id="load_ods_orders", table=f"{LAKE_ROOT}/ods_orders",
        source_path=LANDING + "/orders/dt={{ ds }}", mode="overwrite", partitions=[{"dt": DAY}],
    )
    build_dwd = LakeWriteOperator(
        task_id="build_dwd_orders", table=f"{LAKE_ROOT}/dwd_orders",
        query="SELECT order_id, customer_id, amount, order_ts, dt FROM ods "
              "WHERE dt = '{{ ds }}' AND status = 'paid' AND amount > 0 AND customer_id IS NOT NULL",
        tables={"ods": f"{LAKE_ROOT}/ods_orders"}, mode="overwrite", partitions=[{"dt": DAY}],
    )
    build_dws = LakeWriteOperator(
        task_id="build_dws_customer_daily", table=f"{LAKE_ROOT}/dws_customer_daily",
        # dwd and dws are both bucketed by customer_id into 8: read as a bucketed table (the filters choose
        # the day's partition when it is registered), the group-by needs no shuffle, and the write needs
        # none either (its rows are already in dws's buckets): metrics query_exchanges = write_exchanges = 0.
        query="SELECT customer_id, COUNT(*) AS orders, ROUND(SUM(amount), 2) AS revenue, dt FROM dwd "
              "GROUP BY customer_id, dt",
        tables={"dwd": {"path": f"{LAKE_ROOT}/dwd_orders", "filters": [["dt", "=", DAY]]}},
        mode="overwrite", partitions=[{"dt": DAY}],
    )
    build_dm = LakeWriteOperator(
        task_id="build_dm_daily_summary", table=f"{LAKE_ROOT}/dm_daily_summary",
        query="SELECT COUNT(*) AS customers, SUM(orders) AS orders, ROUND(SUM(revenue), 2) AS revenue, "
              "MAX_BY(customer_id, revenue) AS top_customer, dt FROM dws WHERE dt = '{{ ds }}' GROUP BY dt",
        tables={"dws": f"{LAKE_ROOT}/dws_customer_daily"}, mode="overwrite", partitions=[{"dt": DAY}],
    )

    # Clustering (Hudi-style): plan once the ODS table has had 2 commits since its last clustering (else the
    # plan step succeeds with plan_id None and skips the execute step), merging each day's small files into
    # one file ordered along a Z-curve over the columns queries filter on, so they skip files.
    plan_ods = ScheduleClusteringOperator(
        task_id="plan_ods_clustering", table=f"{LAKE_ROOT}/ods_orders", min_commits=2,
        layout="ZORDER", sort_columns=["customer_id", "amount"],
    )
    cluster_ods = ExecuteClusteringOperator(
        task_id="cluster_ods", table=f"{LAKE_ROOT}/ods_orders", plan_id=plan_ods.output["plan_id"],
    )

    [raw, create_ods] >> load_ods
    [load_ods, create_dwd] >> build_dwd
    [build_dwd, create_dws] >> build_dws
    [build_dws, create_dm] >> build_dm
    build_dm >> plan_ods >> cluster_ods
