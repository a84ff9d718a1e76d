"""`alter_table`: change a table's schema or properties in one commit that writes no data file.

The changes (`spec.evolution.Change`, applied in order) make a new spec; the commit (action `alter`) records it
in its metadata `spec`, with the changes as given. The spec-change rule of the commit protocol
(`commit.conflicts`) then makes every writer that started before it and commits after it fail with a
retryable conflict: none can commit files conformed to the old schema as if they matched the new one. Two
alters racing: the second one conflicts the same way and, run again, applies its changes to the first one's
spec.

Besides what the spec protects (`spec.evolution`), columns are protected by the table's history:

- a column that live files are bucketed by (a file records its bucketing by column name);
- a column a pending clustering plan sorts by (the plan would no longer run): execute or roll it back first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import file_bucketing
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.table_state import TableState
from airflow_lake.lake.spec.evolution import Change, Protected, apply_changes, parse_changes
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
OPERATION = "alter_table"
ACTION = "alter"


@dataclass(frozen=True)
class Altered:
    """An alter's commit, and whether an earlier run had made it (a retry)."""

    entry: LogEntry
    already_committed: bool


def alter_table(table: TableMetadata, changes: Sequence[Change] | Sequence[Mapping[str, Any]], *,
                request_id: str | None = None, request_fingerprint: str | None = None) -> Altered:
    """Apply `changes` (parsed `Change`s or their JSON form) to the table's spec in one commit; a committed
    `request_id` returns its commit. Every change is checked before anything is written (`LakeSpecError`)."""
    given = list(changes)
    checked = [c for c in given if isinstance(c, Change)]
    if len(checked) != len(given) or not checked:
        checked = parse_changes(given)
    base = table.state()
    spec = stored_spec(base.spec)
    prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
    if prior is not None:
        return Altered(prior, True)
    new = apply_changes(spec, checked, protected=protected_columns(table, base, spec))
    recorded = [c.to_dict() for c in checked]
    txn = begin(table, ACTION, OPERATION, request_id=request_id, base=base, request_fingerprint=request_fingerprint,
                metadata={"changes": recorded})
    try:
        # the columns after the change go into the commit's metrics: what XCom shows, whichever path ran it
        metrics = {"changes": len(checked), "columns_before": len(spec.columns), "columns_after": len(new.columns),
                   "columns": [f"{c.name} {c.type}" for c in new.columns]}
        entry = txn.commit(metadata={"spec": new.to_dict()}, metrics=metrics)
    except BaseException:
        txn.abort()
        raise
    log.info("altered %s: %s", table.url, "; ".join(c.describe() for c in checked))
    return Altered(entry, False)


def protected_columns(table: TableMetadata, base: TableState, spec: TableSpec) -> dict[str, Protected]:
    """Columns the table's files and plans need as they are, with the reason (see the module docstring)."""
    out: dict[str, Protected] = {}
    keys = {f.bucketing for f in base.files.values() if f.bucket is not None}
    bucket_columns: set[str] = set()
    for key in keys:
        if key is None:
            bucket_columns.update(spec.bucket.columns if spec.bucket is not None else ())
            continue
        sample = next(f for f in base.files.values() if f.bucketing == key)
        bucketing = file_bucketing(sample, spec)
        bucket_columns.update(bucketing.columns if bucketing is not None else ())
    for name in bucket_columns:
        if spec.has_column(name):
            out[spec.column(name).name] = Protected("live files are bucketed by it (rows were placed by the hash of "
                                                    "its values, and files record their bucketing by its name)")
    for item in instants.pending(table.storage):
        if item.operation != instants.PLAN_OPERATION or item.inflight:
            continue
        plan = item.metadata.get("plan")
        layout = plan.get("layout") if isinstance(plan, Mapping) else None
        columns = layout.get("sort_columns") if isinstance(layout, Mapping) else None
        for name in columns if isinstance(columns, list) else ():
            if isinstance(name, str) and spec.has_column(name) and item.id not in base.instants \
                    and item.id not in base.rolled_back:
                # a wider type sorts the same: only a drop or a rename would leave the plan unable to run
                out.setdefault(spec.column(name).name, Protected(
                    f"pending clustering plan {item.id} sorts by it; run it (execute_clustering) or drop it "
                    f"(airflow-lake rollback-pending {table.url} {item.id}) first", frozenset({"drop", "rename"})))
    return out


def result_metrics(altered: Altered) -> dict[str, Any]:
    """An alter's metrics for XCom: the commit's (with the columns after it)."""
    return requests.entry_result(altered.entry, already_committed=altered.already_committed)


__all__ = ["ACTION", "OPERATION", "Altered", "alter_table", "protected_columns", "result_metrics"]
