"""Lake tables as Airflow Assets: one stable URI per table, and the asset event a commit emits.

    from airflow_lake.assets import table_asset
    with DAG("reports", schedule=table_asset("/lake/dm_work_7d")):   # runs after each commit to the table
        ...

Every lake operator that commits data lists its table among its outlets (unless the table path is templated
or `outlets` is given), so each successful task emits an event whose `extra` holds the commit's metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Asset

from airflow_lake.lake.format.identity import canonical_url
from airflow_lake.lake.format.storage import is_local

GROUP = "lake"


def table_uri(table: str) -> str:
    """The table's asset URI: its canonical URL (`lake.format.identity`), with `file://` before a local table's
    real path. Every spelling of one table (a symlinked path, `s3a://` for `s3://`, a trailing '/') gives the
    same URI, so a DAG that declares the table one way and a task (or the Lake page) that names it another way
    meet at one asset."""
    url = canonical_url(table)
    return f"file://{url}" if is_local(url) else url


def table_asset(table: str) -> Asset:
    """The Asset of a lake table (named by its URI, in the group "lake")."""
    uri = table_uri(table)
    return Asset(name=uri, uri=uri, group=GROUP)


def event_extra(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """An asset event's extra: the commit's metrics, without nested per-partition detail (kept small)."""
    return {k: v for k, v in metrics.items() if v is None or isinstance(v, str | int | float | bool)}
