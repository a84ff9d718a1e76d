"""The one check the sensor and its trigger share: count a table's commits (timeline only, no Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake.lake.clustering.timeline import commits_since
from airflow_lake.lake.table import LakeTable


def count_commits(table: str, since: str, actions: Sequence[str] | None) -> dict[str, Any]:
    """`commits_since` of the table at `table`, as a JSON-friendly dict (count, instants, since_instant...)."""
    lake = LakeTable.open(table)
    return {"table": lake.url, **commits_since(lake, since, actions).to_dict()}
