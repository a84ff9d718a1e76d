"""Writes for the tests of the Spark side: one Spark task, so every partition directory of the write gets files of
the same names (Spark names files `part-<task>-<job uuid>...`)."""

from __future__ import annotations

from typing import Any

from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.table import LakeTable


def one_task_write(spark: Any, table: LakeTable, rows: list[tuple[Any, ...]], schema: str) -> None:
    """Commit `rows` written by ONE Spark task: every partition directory gets files of the same names."""
    txn = table.begin("commit", "write")
    df = spark.createDataFrame(rows, schema).coalesce(1)
    with session_conf(spark, {"spark.sql.files.maxRecordsPerFile": "50"}):  # several files per directory
        files = write_dataframe(df, table.storage, table.spec, txn.instant, bucket_shuffle=False)
    txn.commit(added=files)
