"""`LakePublishOperator` (issue 34, item 4) and `published_seq` in the lake operators' XCom (item 3): the operator
catches a table up with its Delta log in the task's process and returns the metrics; the metrics any operator
returns through the hook say how far other engines see the table, also on the in-process path that reads its metrics
back from the log entry."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_lake.lake.publish import delta_publisher
from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.maintenance import LakeRollbackPendingOperator
from airflow_lake.operators.publish import LakePublishOperator
from airflow_lake.operators.restore import LakeRestoreOperator
from airflow_lake.provider_info import get_provider_info
from tests.lake.lake_core_helpers import append, make_table


def context() -> Any:
    """What `execute` reads of a task's context: its task instance."""
    return {"ti": SimpleNamespace(dag_id="lake", task_id="publish", run_id="manual__1", map_index=-1, try_number=1)}


def submit(op: LakeOperator, request_id: str) -> dict[str, Any]:
    """What `execute` does, with the request id a task instance would send."""
    return op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                         "request_id": request_id})


def test_the_operator_is_thin_templated_and_listed() -> None:
    op = LakePublishOperator(task_id="publish", table="{{ params.table }}")
    assert op.operation == "publish" and "table" in op.template_fields and "hook" not in op.__dict__
    assert op.build_spec(context()) == {} and op.outlets == []  # it changes no data: no asset event
    modules = [m for item in get_provider_info()["operators"] for m in item["python-modules"]]
    assert "airflow_lake.operators.publish" in modules


def test_the_operator_publishes_a_table_for_the_first_time_and_returns_the_metrics(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "t"))
    for day in ("a", "b", "c"):
        append(table, day, disk=True)
    shutil.rmtree(table.storage.path("_delta_log"))

    metrics = LakePublishOperator(task_id="publish", table=table.url).execute(context())

    assert (metrics["table"], metrics["operation"], metrics["published_seq"]) == (table.url, "publish", 3)
    assert (metrics["delta_versions_written"], metrics["unpublished_commits"]) == (4, 0)
    assert DeltaTable(table.url).version() == 3
    Path(table.storage.path("_delta_log/00000000000000000003.json")).unlink()  # the last publish was lost
    again = LakePublishOperator(task_id="publish", table=table.url).execute(context())
    assert (again["published_seq"], again["delta_versions_written"]) == (3, 1)


def test_a_publish_that_fails_fails_the_task(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "t"))
    append(table, "a", disk=True)
    shutil.rmtree(table.storage.path("_delta_log"))
    Path(table.storage.path("_delta_log")).write_text("not a directory")
    with pytest.raises(OSError, match="_delta_log"):
        LakePublishOperator(task_id="publish", table=table.url).execute(context())
    assert table.commit_log.head() == 1


def test_an_operators_xcom_says_how_far_other_engines_see(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_table(str(tmp_path / "t"))
    good, _ = append(table, "a", disk=True)
    append(table, "b", disk=True)
    restored = submit(LakeRestoreOperator(task_id="undo", table=table.url, to_instant=good.instant), "d/undo/1/-1")
    assert (restored["seq"], restored["published_seq"], restored["unpublished_commits"]) == (3, 3, 0)
    assert restored["already_committed"] is False

    def broken(*_: Any, **__: Any) -> Any:
        raise OSError("the store refused the Delta version")

    monkeypatch.setattr(delta_publisher, "publish", broken)  # the publish after the next commit fails
    behind = submit(LakeRestoreOperator(task_id="undo", table=table.url, to_seq=2), "d/undo/2/-1")
    assert (behind["seq"], behind["published_seq"], behind["unpublished_commits"]) == (4, 3, 1)
    retry = submit(LakeRestoreOperator(task_id="undo", table=table.url, to_seq=2), "d/undo/2/-1")
    assert (retry["already_committed"], retry["seq"], retry["unpublished_commits"]) == (True, 4, 1)
    monkeypatch.undo()
    nothing = submit(LakeRollbackPendingOperator(task_id="rb", table=table.url), "d/rb/1/-1")
    assert (nothing["published_seq"], nothing["unpublished_commits"]) == (3, 1)  # (it committed nothing)
