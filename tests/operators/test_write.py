"""LakeWriteOperator: the spec it builds from its parameters, and what it refuses when the DAG is parsed."""

from __future__ import annotations

import pytest

from airflow_lake.operators.write import LakeWriteOperator


def test_write_operator_checks_max_exchanges() -> None:
    op = LakeWriteOperator(task_id="w", table="/lake/a", query="SELECT 1 AS x", max_exchanges=0)
    assert op.build_spec({})["max_exchanges"] == 0  # type: ignore[arg-type]
    assert "max_exchanges" not in LakeWriteOperator(task_id="v", table="/lake/a", query="SELECT 1").build_spec(
        {})  # type: ignore[arg-type]
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(ValueError, match="max_exchanges"):
            LakeWriteOperator(task_id="z", table="/lake/a", query="SELECT 1", max_exchanges=bad)  # type: ignore[arg-type]
