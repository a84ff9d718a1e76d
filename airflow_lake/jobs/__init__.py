"""The job runner: one entry point for spark-submit and the same operations in-process.

    from airflow_lake.jobs import run
    metrics = run(spark, "write", {"table": "/lake/t", "source": {"path": "/data/x.parquet"}})
"""

from __future__ import annotations

from pathlib import Path

from airflow_lake.jobs.runner import run

ENTRY_POINT = str(Path(__file__).with_name("entry.py"))

__all__ = ["ENTRY_POINT", "run"]
