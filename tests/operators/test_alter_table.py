"""LakeAlterTableOperator: its spec, what it refuses when the DAG is parsed, and a run in-process (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.operators.alter_table import LakeAlterTableOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator


def test_the_operator_builds_its_spec_and_refuses_an_empty_list() -> None:
    changes = [{"add": "c2", "type": "bigint"}, {"rename": "a", "to": "b"}]
    op = LakeAlterTableOperator(task_id="a", table="/lake/t", changes=changes)
    assert op.build_spec({}) == {"changes": changes}  # type: ignore[arg-type]
    assert "changes" in op.template_fields
    templated = LakeAlterTableOperator(task_id="b", table="/lake/t", changes="{{ params.changes }}")
    templated.changes = '[{"drop": "x"}]'  # what a Param renders to without native rendering
    assert templated.build_spec({}) == {"changes": [{"drop": "x"}]}  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one change"):
        LakeAlterTableOperator(task_id="c", table="/lake/t", changes=[])


def test_write_and_upsert_operators_pass_schema_evolution() -> None:
    write = LakeWriteOperator(task_id="w", table="/lake/t", query="SELECT 1 AS x", schema_evolution="add_columns")
    assert write.build_spec({})["schema_evolution"] == "add_columns"  # type: ignore[arg-type]
    assert "schema_evolution" not in LakeWriteOperator(task_id="v", table="/lake/t", query="SELECT 1").build_spec(
        {})  # type: ignore[arg-type]
    upsert = VersionedUpsertOperator(task_id="u", table="/lake/t", query="SELECT 1 AS k", version=1,
                                     schema_evolution="add_columns", merge_operators={"n": "sum"})
    spec = upsert.build_spec({})  # type: ignore[arg-type]
    assert (spec["schema_evolution"], spec["merge_operators"]) == ("add_columns", {"n": "sum"})


def test_the_operator_runs_in_process(tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id INT, dt STRING", "partition_by": ["dt"]})
    op = LakeAlterTableOperator(task_id="a", table=table.url,
                                changes=[{"add": "c", "type": "string"}, {"widen": "id", "type": "bigint"}])

    def submit(request_id: str) -> dict[str, Any]:
        """What `execute` does, with the request id a task instance would send."""
        return op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                             "request_id": request_id})

    first = submit("d/a/1/-1")
    assert (first["seq"], first["action"], first["columns"]) == (1, "alter", ["id bigint", "dt string", "c string"])
    assert submit("d/a/1/-1")["already_committed"] is True  # an Airflow retry
    assert LakeTable.open(table.url).commit_log.head() == 1
