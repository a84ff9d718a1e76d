"""Helpers of the change tests: many windows' changes collected in one Spark job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake.lake.table import LakeTable

CHANGE_COLUMNS = ("_change_type", "_commit_seq", "_commit_time")
Window = tuple[Any, Any, Any]  # (start, end, filters)


def collect_windows(spark: Any, table: LakeTable, windows: Sequence[Window]
                    ) -> list[tuple[list[str], list[dict[str, Any]]]]:
    """Per window (start, end, filters), its columns (the end snapshot's) and its changes as dicts, all collected
    in one Spark job: a union tagged by window, one job's overhead rather than one per window."""
    from pyspark.sql import functions as F

    frames = [table.changes(spark, a, b, filters=f).withColumn("window", F.lit(i))
              for i, (a, b, f) in enumerate(windows)]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    out: list[tuple[list[str], list[dict[str, Any]]]] = [
        ([c for c in frame.columns if c not in (*CHANGE_COLUMNS, "window")], []) for frame in frames]
    for row in union.collect():
        columns, rows = out[row["window"]]
        rows.append({c: row[c] for c in (*columns, *CHANGE_COLUMNS)})
    return out


def as_tuples(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Changes as sorted tuples of their values, without the commit time."""
    return sorted(tuple(v for k, v in r.items() if k != "_commit_time") for r in rows)
