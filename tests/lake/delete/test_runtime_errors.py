"""A `where` that fails on a row while Spark evaluates it (division by zero under ANSI SQL, `assert_true`,
`raise_error`, a cast of text that is no number) is a clear `LakeSpecError` on `where`, nothing committed —
in every step that evaluates it: the partition choice, the count of matches, and the one-pass rewrite (issue 33,
item 8: a Java stack)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.instants import pending
from airflow_lake.lake.table import LakeTable

FAILING = ["1 / (id - 1) > 0", "assert_true(id > 1) IS NULL", "raise_error('boom') IS NULL", "CAST(v AS INT) > 0"]


def rows(spark: Any, table: LakeTable) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in table.read(spark).collect())


@pytest.mark.parametrize("files", [1, 2])  # one file: rewritten in one pass; two in one place: counted first
def test_a_where_failing_on_a_row_is_a_clear_error_and_nothing_is_committed(spark: Any, table_path: str,
                                                                           files: int) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT, v STRING, dt STRING", "partition_by": ["dt"]})
    for i in range(files):
        table.write(spark.createDataFrame([(1 + 2 * i, "a", "x"), (2 + 2 * i, "b", "x")],
                                          "id BIGINT, v STRING, dt STRING"))
    before, head = rows(spark, table), table.commit_log.head()
    wheres = [*FAILING, "1 / (length(dt) - 1) > 0"]  # (the last on the partition column alone)
    for where in wheres:
        with pytest.raises(LakeSpecError, match=r"^where: evaluating .* failed on a row of the table: \[") as caught:
            table.delete(spark, where=where)
        assert "Nothing was deleted. Fix: " in str(caught.value) and "try_divide" in str(caught.value)
    assert table.commit_log.head() == head and not list(pending(table.storage)) and rows(spark, table) == before
    assert table.delete(spark, where="try_divide(1, id - 1) > 0") is not None  # the fix works
    assert rows(spark, table) == [r for r in before if r[0] == 1]
