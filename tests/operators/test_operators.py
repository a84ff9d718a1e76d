"""Lake operators: arguments, specs and templated fields (they run for real in tests/dags)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.maintenance import (
    LakeCleanOperator,
    LakeRemoveOrphanFilesOperator,
    LakeRollbackPendingOperator,
)
from airflow_lake.operators.write import LakeWriteOperator


def test_write_operator_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one of source_path and query"):
        LakeWriteOperator(task_id="w", table="/lake/t")
    with pytest.raises(ValueError, match="exactly one of source_path and query"):
        LakeWriteOperator(task_id="w", table="/lake/t", source_path="/x", query="SELECT 1")


def test_write_operator_builds_the_write_spec() -> None:
    op = LakeWriteOperator(task_id="w", table="/lake/dwd", query="SELECT * FROM ods WHERE dt = '{{ ds }}'",
                           tables={"ods": "/lake/ods"}, mode="overwrite", partitions=[{"dt": "{{ ds }}"}])
    assert op.build_spec({}) == {  # type: ignore[arg-type]
        "source": {"query": "SELECT * FROM ods WHERE dt = '{{ ds }}'", "tables": {"ods": "/lake/ods"}},
        "mode": "overwrite", "partitions": [{"dt": "{{ ds }}"}]}
    for name in ("table", "query", "tables", "partitions", "mode", "source_path", "spark_conf"):
        assert name in op.template_fields
    files = LakeWriteOperator(task_id="f", table="/lake/t", source_path="/in/{{ ds }}.csv", source_format="csv")
    assert files.build_spec({}) == {"source": {"path": "/in/{{ ds }}.csv", "format": "csv", "options": {}},  # type: ignore[arg-type]
                                    "mode": "append"}


def test_table_operators_build_their_specs() -> None:
    create = LakeCreateTableOperator(task_id="c", table="/lake/t", schema="id BIGINT, dt STRING",
                                     partition_by=["dt"], bucket={"columns": ["id"], "count": 8})
    assert create.build_spec({}) == {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],  # type: ignore[arg-type]
                                     "bucket": {"columns": ["id"], "count": 8}, "if_exists": "ignore"}
    assert LakeRollbackPendingOperator(task_id="r", table="/t").build_spec({}) == {}  # type: ignore[arg-type]
    assert LakeRollbackPendingOperator(task_id="r", table="/t", instants=["20240101000000000"]).build_spec(
        {}) == {"instants": ["20240101000000000"]}  # type: ignore[arg-type]
    assert LakeCleanOperator(task_id="k", table="/t", retain_hours=24).build_spec({}) == {"retain_hours": 24.0}  # type: ignore[arg-type]
    assert create.operation == "create_table" and LakeCleanOperator.operation == "clean"


def test_operators_build_no_hook_at_construction() -> None:
    op = LakeWriteOperator(task_id="w", table="/lake/t", source_path="/x")
    assert "hook" not in op.__dict__  # built lazily in execute, never at DAG parse time


def test_remove_orphan_files_operator_validates_and_builds_its_spec() -> None:
    assert LakeRemoveOrphanFilesOperator(task_id="v", table="/t").build_spec({}) == {"dry_run": False}  # type: ignore[arg-type]
    op = LakeRemoveOrphanFilesOperator(task_id="v", table="/t", older_than_hours=0, list_only=True)
    assert op.build_spec({}) == {"dry_run": True, "older_than_hours": 0.0}  # type: ignore[arg-type]
    assert op.operation == "remove_orphan_files"
    assert {"table", "older_than_hours", "list_only"} <= set(op.template_fields)
    templated = LakeRemoveOrphanFilesOperator(task_id="v", table="/t", older_than_hours="{{ params.hours }}",
                                              list_only="{{ params.dry_run }}")
    templated.older_than_hours, templated.list_only = "24", "True"  # as rendered
    assert templated.build_spec({}) == {"dry_run": True, "older_than_hours": 24.0}  # type: ignore[arg-type]
    templated.list_only = "perhaps"
    with pytest.raises(ValueError, match="list_only must be true or false, got 'perhaps'"):
        templated.build_spec({})  # type: ignore[arg-type]
    for bad in (-1, "soon", True, float("nan"), float("inf"), "inf"):
        with pytest.raises(ValueError, match=f"older_than_hours must be a finite number of hours >= 0, got {bad!r}"):
            LakeRemoveOrphanFilesOperator(task_id="v", table="/t", older_than_hours=bad)
    with pytest.raises(ValueError, match=r"older_than_hours must be a finite number of hours >= 0, got 999999999999"
                                         r"\.\.\. \(401 characters\)"):
        LakeRemoveOrphanFilesOperator(task_id="v", table="/t", older_than_hours=int("9" * 401))  # was an OverflowError
    with pytest.raises(ValueError, match="list_only must be true or false, got 'yes'"):
        LakeRemoveOrphanFilesOperator(task_id="v", table="/t", list_only="yes")


def test_remove_orphan_files_operator_runs_in_process(tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    debris = Path(table.storage.path("dt=a/part-20200101000000000-x.parquet"))
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"debris")
    os.utime(debris, (time.time() - 7200, time.time() - 7200))

    def submit(op: LakeRemoveOrphanFilesOperator, request_id: str) -> dict[str, Any]:
        """What `execute` does, with the request id a task instance would send."""
        return op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                             "request_id": request_id})

    listed = submit(LakeRemoveOrphanFilesOperator(task_id="v", table=table.url, older_than_hours=1, list_only=True),
                    "d/v/1/-1")
    assert (listed["orphans_found"], listed["files_deleted"], listed["dry_run"]) == (1, 0, True)
    assert listed["paths"] == ["dt=a/part-20200101000000000-x.parquet"] and listed["noop"] is True
    assert debris.exists()
    done = submit(LakeRemoveOrphanFilesOperator(task_id="v", table=table.url, older_than_hours=1, force=True),
                  "d/v/2/-1")
    assert (done["files_deleted"], done["bytes_freed"], done["seq"], done["action"]) == (1, 6, 1, "clean")
    assert done["already_committed"] is False and not debris.exists()
