"""Pieces shared by operations: the table field, request ids, and metrics of a log entry."""

from __future__ import annotations

from typing import Any

from airflow_lake.jobs.fields import SpecReader
from airflow_lake.lake.log import LogEntry
from airflow_lake.lake.storage import normalize_url


def table_path(reader: SpecReader) -> str:
    """The required `table` field, checked as a path before any SparkSession starts (NUL bytes, blanks)."""
    path = reader.required("table")
    normalize_url(path)
    return path


def entry_metrics(table: str, operation: str, entry: LogEntry | None, **extra: Any) -> dict[str, Any]:
    """Metrics of an operation: its log entry's, plus where it landed."""
    out: dict[str, Any] = {"table": table, "operation": operation}
    if entry is not None:
        out.update(entry.metrics)
        out.update({"instant": entry.instant, "seq": entry.seq, "action": entry.action,
                    "request_id": entry.request_id})
    out.update(extra)
    return out
