"""Lake operators: arguments, specs and templated fields (they run for real in tests/dags)."""

from __future__ import annotations

import pytest

from airflow_lake.operators.table import LakeCleanOperator, LakeCreateTableOperator, LakeRollbackOperator
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
    assert LakeRollbackOperator(task_id="r", table="/t").build_spec({}) == {}  # type: ignore[arg-type]
    assert LakeRollbackOperator(task_id="r", table="/t", instants=["20240101000000000"]).build_spec(
        {}) == {"instants": ["20240101000000000"]}  # type: ignore[arg-type]
    assert LakeCleanOperator(task_id="k", table="/t", retain_hours=24).build_spec({}) == {"retain_hours": 24.0}  # type: ignore[arg-type]
    assert create.operation == "create_table" and LakeCleanOperator.operation == "clean"


def test_operators_build_no_hook_at_construction() -> None:
    op = LakeWriteOperator(task_id="w", table="/lake/t", source_path="/x")
    assert "hook" not in op.__dict__  # built lazily in execute, never at DAG parse time
