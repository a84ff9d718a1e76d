"""Operators renamed in issue 21 (docs/api.md, "Names"): the old classes still import from their old modules,
warn when a DAG builds them, and run the new operation."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning

from airflow_lake.lake import LakeTable
from airflow_lake.operators import table as old_module
from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.compact import CompactOperator
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.maintenance import (
    LakeCleanOperator,
    LakeRemoveOrphanFilesOperator,
    LakeRollbackPendingOperator,
)
from airflow_lake.operators.table import LakeRollbackOperator, LakeVacuumOperator


@pytest.mark.parametrize(("old", "new", "operation", "kwargs"), [
    (LakeVacuumOperator, LakeRemoveOrphanFilesOperator, "remove_orphan_files", {"older_than_hours": 2}),
    (LakeRollbackOperator, LakeRollbackPendingOperator, "rollback_pending", {"instants": ["20240101000000000"]}),
    (CompactOperator, CompactUpsertsOperator, "compact_upserts", {"partitions": [{"dt": "d"}]}),
])
def test_an_old_operator_class_warns_and_builds_the_new_operations_spec(
        old: type[LakeOperator], new: type[LakeOperator], operation: str, kwargs: dict[str, Any]) -> None:
    with pytest.warns(AirflowProviderDeprecationWarning,
                      match=f"{old.__name__} is deprecated: use {new.__name__} from {new.__module__}") as caught:
        op = old(task_id="t", table="/lake/t", **kwargs)
    assert caught[0].filename == __file__  # the warning names the line that built the operator
    assert isinstance(op, new) and op.operation == new.operation == operation
    assert op.build_spec({}) == new(task_id="t", table="/lake/t", **kwargs).build_spec({})  # type: ignore[arg-type]


def test_the_old_module_still_hands_out_the_unrenamed_operators_without_a_warning(
        recwarn: pytest.WarningsRecorder) -> None:
    assert old_module.LakeCleanOperator is LakeCleanOperator
    assert old_module.LakeCreateTableOperator is LakeCreateTableOperator
    LakeCleanOperator(task_id="c", table="/lake/t")
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_the_old_vacuum_operator_still_removes_orphans_and_records_the_new_name(tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    debris = Path(table.storage.path("dt=a/part-20200101000000000-x.parquet"))
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"debris")
    os.utime(debris, (time.time() - 7200, time.time() - 7200))
    with pytest.warns(AirflowProviderDeprecationWarning):
        op = LakeVacuumOperator(task_id="v", table=table.url, older_than_hours=1, force=True)

    # what `execute` does, with the request id a task instance sends
    done = op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                         "request_id": "d/v/1/-1"})

    assert (done["operation"], done["files_deleted"], done["already_committed"]) == ("remove_orphan_files", 1, False)
    assert not debris.exists()
    entry = LakeTable.open(table.url).commit_log.read(done["seq"])
    assert (entry.action, entry.operation, entry.request_id) == ("clean", "remove_orphan_files", "d/v/1/-1")


@pytest.mark.parametrize("old_name", ["vacuum", "rollback"])
def test_a_retry_of_a_task_an_older_release_committed_under_the_old_name_returns_that_commit(
        tmp_path: Path, old_name: str) -> None:
    """The log keeps old names for good: an Airflow retry after the upgrade must find its first try's entry,
    not refuse the request id as taken by another operation, nor run twice."""
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    request_id = "dag/upkeep/run-1/-1"
    op: LakeOperator
    if old_name == "vacuum":  # as a release before issue 21 recorded it
        first = table.append_entry("clean", "vacuum", request_id=request_id,
                                   metadata={"orphans": ["dt=a/x.parquet"], "staging": []},
                                   metrics_of=lambda: {"orphans_found": 1, "files_deleted": 1})
        op = LakeRemoveOrphanFilesOperator(task_id="upkeep", table=table.url, older_than_hours=0)
    else:
        dead = table.begin("commit", "write")
        dead._heartbeat.stop()
        first = table.append_entry("rollback", "rollback", rolled_back=[dead.instant], request_id=request_id,
                                   metadata={"reason": "writer dead"},
                                   metrics_of=lambda: {"rolled_back": [dead.instant]})
        op = LakeRollbackPendingOperator(task_id="upkeep", table=table.url, instants=[dead.instant])
    assert first is not None

    again = op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                          "request_id": request_id})

    assert (again["seq"], again["instant"], again["already_committed"]) == (first.seq, first.instant, True)
    assert table.commit_log.head() == first.seq  # nothing committed twice
