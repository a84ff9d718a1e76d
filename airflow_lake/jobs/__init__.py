"""The job runner: one entry point for spark-submit and the same operations in-process.

    from airflow_lake.jobs import run
    metrics = run(spark, "write", {"table": "/lake/t", "source": {"path": "/data/x.parquet"}})
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_lake.jobs.runner import run

ENTRY_POINT = str(Path(__file__).with_name("entry.py"))


def __getattr__(name: str) -> Any:
    # `run` loads the lake core and every operation: only when asked for, so that importing a light module of
    # this package (`protocol`, which the hook needs at DAG parse time) does not load them
    if name == "run":
        from airflow_lake.jobs.runner import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ENTRY_POINT", "run"]
