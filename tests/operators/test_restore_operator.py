"""`LakeRestoreOperator` (and the `force` of the clean and orphan operators): validation, templated targets, the
table's asset, and a run through the hook in this process (restore needs no Spark)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import Asset

from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.maintenance import LakeCleanOperator, LakeRemoveOrphanFilesOperator
from airflow_lake.operators.restore import LakeRestoreOperator
from airflow_lake.provider_info import get_provider_info
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table, on_disk, put_file


def submit(op: LakeOperator, request_id: str) -> dict[str, Any]:
    """What `execute` does, with the request id a task instance would send."""
    return op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                         "request_id": request_id})


def test_the_operator_validates_its_target_and_emits_the_tables_asset() -> None:
    op = LakeRestoreOperator(task_id="undo", table="/lake/a", to_seq=3)
    assert op.operation == "restore" and op.build_spec({}) == {"to_seq": 3}  # type: ignore[arg-type]
    assert {"table", "to_seq", "to_instant", "to_timestamp"} <= set(op.template_fields)
    assert op.outlets == [Asset(name="file:///lake/a", uri="file:///lake/a", group="lake")]
    templated = LakeRestoreOperator(task_id="undo", table="/lake/a", to_timestamp="{{ data_interval_start }}")
    templated.to_timestamp = " 2024-01-02T00:00:00+00:00 "  # as rendered
    assert templated.build_spec({}) == {"to_timestamp": "2024-01-02T00:00:00+00:00"}  # type: ignore[arg-type]
    for bad in ({}, {"to_seq": 1, "to_instant": "20240101000000000"}, {"to_seq": ""}):
        with pytest.raises(ValueError, match="give exactly one of to_seq, to_instant, to_timestamp"):
            LakeRestoreOperator(task_id="undo", table="/lake/a", **bad)
    modules = [m for item in get_provider_info()["operators"] for m in item["python-modules"]]
    assert "airflow_lake.operators.restore" in modules


def test_the_operator_restores_and_a_retry_returns_the_first_result(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "t"))
    good, _ = append(table, "a", disk=True)
    append(table, "b", disk=True)
    op = LakeRestoreOperator(task_id="undo", table=table.url, to_instant=good.instant)
    done = submit(op, "d/undo/1/-1")
    assert (done["action"], done["files_removed"], done["restored_to_seq"], done["already_committed"]) == \
        ("restore", 1, 1, False)
    assert live_paths(table) == live_paths(table, 1)
    again = submit(op, "d/undo/1/-1")
    assert again["already_committed"] is True and again["seq"] == done["seq"]
    noop = submit(LakeRestoreOperator(task_id="undo", table=table.url, to_seq=str(done["seq"])), "d/undo/2/-1")
    assert noop["noop"] is True and LakeTable.open(table.url).commit_log.head() == done["seq"]
    with pytest.raises(LakeSpecError, match="to_seq: snapshot 99 does not exist"):
        submit(LakeRestoreOperator(task_id="undo", table=table.url, to_seq="99"), "d/undo/3/-1")


def test_clean_and_orphan_operators_pass_force(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "t"))
    _, (f1,) = append(table, "a", disk=True)
    txn = table.begin("replace", "compact")
    g1 = data_file(txn, "a")
    put_file(table, g1)
    txn.commit(added=[g1], removed=[f1.path])
    time.sleep(0.01)
    assert LakeCleanOperator(task_id="c", table="/t", retain_hours=0).build_spec({}) == {"retain_hours": 0.0}  # type: ignore[arg-type]
    with pytest.raises(LakeSpecError, match="retain_hours: 0 h is shorter than the table's retention"):
        submit(LakeCleanOperator(task_id="c", table=table.url, retain_hours=0), "d/c/1/-1")
    assert on_disk(table, f1)
    forced = LakeCleanOperator(task_id="c", table=table.url, retain_hours="0", force=True)
    assert forced.build_spec({}) == {"force": True, "retain_hours": 0.0}  # type: ignore[arg-type]
    done = submit(forced, "d/c/2/-1")
    assert done["files_deleted"] == 1 and not on_disk(table, f1)
    assert table.commit_log.read(done["seq"]).metadata["forced"] is True
    orphans = LakeRemoveOrphanFilesOperator(task_id="o", table=table.url, older_than_hours=1, force=True)
    assert orphans.build_spec({}) == {"dry_run": False, "force": True, "older_than_hours": 1.0}  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="force must be true or false"):
        LakeCleanOperator(task_id="c", table="/t", force="maybe")  # type: ignore[arg-type]
