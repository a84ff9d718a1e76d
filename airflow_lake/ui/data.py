"""What the Lake page shows, from table metadata only: a summary per table, and one table's timeline, clustering
state and layout (now, and before its last clustering)."""

from __future__ import annotations

from typing import Any

from airflow_lake.lake.table import LakeTable
from airflow_lake.reports import files_data, plans_data, show_data, timeline_data
from airflow_lake.ui.roots import TableRef

TIMELINE_PAGE = 100
MAX_TIMELINE_PAGE = 1000  # a page renders every entry it shows: more belongs to `airflow-lake timeline`


def table_summary(ref: TableRef, table: LakeTable | None = None,
                  plans: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row of the table list."""
    table = table or LakeTable.open(ref.path)
    shown = show_data(table, None)
    plans = plans if plans is not None else plans_data(table)
    spec = shown["spec"]
    return {
        "ref": ref.ref, "name": ref.relative, "path": ref.path, "seq": shown["seq"],
        "completed_at": shown["completed_at"], **shown["totals"],
        "bucket": spec.get("bucket"), "primary_key": spec.get("primary_key"),
        "partition_by": spec.get("partition_by") or [],
        "pending": shown["pending_count"], "pending_plans": len(plans["plans"]),
        "commits_since_last_clustering": plans["commits_since_last_clustering"],
    }


def table_detail(ref: TableRef, limit: int = TIMELINE_PAGE) -> dict[str, Any]:
    """A table's page: its summary, the newest `limit` instants (newest first), clustering plans, and the
    snapshot sequence numbers its layout pictures show."""
    table = LakeTable.open(ref.path)
    instants = timeline_data(table, limit)["instants"]
    instants.reverse()
    plans = plans_data(table)  # (reads the log back to the last clustering, once)
    clustered = plans["last_clustering"]
    return {
        "summary": table_summary(ref, table, plans), "instants": instants, "limit": limit,
        "total_instants": table.commit_log.head() + 1, "plans": plans,
        "clustered_at": None if clustered is None else table.state().instants.get(clustered),
    }


def layout(ref: TableRef, as_of: str | None) -> dict[str, Any]:
    """The live files of a snapshot per partition and bucket (`reports.files_data`)."""
    return files_data(LakeTable.open(ref.path), as_of)
