"""Values nested without end are refused with a clear error before anything walks them recursively (issue 33,
item 8: deeply nested `filters` raised a RecursionError)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.strict import check_depth
from airflow_lake.lake.table import LakeTable


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_check_depth() -> None:
    check_depth({"a": [[1, {"b": 2}]]}, "spec", limit=4)
    with pytest.raises(LakeSpecError, match=r"^spec: the value is nested more than 3 levels deep"):
        check_depth({"a": [[1, {"b": 2}]]}, "spec", limit=3)
    with pytest.raises(LakeSpecError, match="nested more than 32 levels"):
        check_depth(nested(100_000), "spec")  # no recursion: a Python stack would not hold it


def test_deeply_nested_filters_are_refused_clearly(table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT, ts TIMESTAMP"})
    for filters in ([["id", "in", nested(5000)]], [nested(5000)]):
        with pytest.raises(LakeSpecError, match=r"^filters\[0\]: the value is nested more than 2 levels deep"):
            table.scan(filters=filters)
    with pytest.raises(LakeSpecError, match=r"^spec: the value is nested more than 32 levels deep"):
        run(None, "delete", {"table": table_path, "filters": [["id", "in", nested(5000)]]})
    assert table.commit_log.head() == 0
