"""LakeCreateTableOperator with if_exists="ignore" on a table the provider's own operations moved on (issue 23): a
daily DAG's create task keeps giving the spec the table was created with, after a one-off bucket_rewrite, an
alter_table and a write with schema evolution. Run as the operator runs it (its hook, in-process: create_table
needs no Spark); the other operations through the job runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable, LakeTableExists
from airflow_lake.operators.create_table import LakeCreateTableOperator
from tests.support import write_source

ORIGINAL = {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"],
            "bucket": {"columns": ["id"], "count": 8}}


def create_task(path: str, request_id: str, **spec: Any) -> dict[str, Any]:
    """What the daily DAG's create task does: the operator's spec, submitted through its hook."""
    op = LakeCreateTableOperator(task_id="create", table=path, **{**ORIGINAL, **spec})
    return op.hook.submit(op.operation, {"table": op.table, **op.build_spec({}),  # type: ignore[arg-type]
                                         "request_id": request_id})


def test_the_daily_create_task_accepts_the_spec_the_table_left_through_provider_operations(
        spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    first = create_task(path, "daily/create/2024-03-01/-1")
    assert first["created"] is True and "spec_differences" not in first
    run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / "a.parquet", list(range(40)),
                                                                        ["d1", "d2"] * 20)}})
    # the one-off migration: 16 buckets from now on
    run(spark, "bucket_rewrite", {"table": path, "bucket": {"columns": ["id"], "count": 16}})
    assert LakeTable.open(path).spec.bucket.count == 16  # type: ignore[union-attr]

    second = create_task(path, "daily/create/2024-03-02/-1")  # failed before: "a different spec exists"
    assert second["created"] is False and second["seq"] == 0
    assert [c["operation"] for c in second["spec_changed_by"]] == ["bucket_rewrite"]
    assert second["spec_differences"] == ["bucket.count: 8 -> 16"]

    run(None, "alter_table", {"table": path, "changes": [{"rename": "v", "to": "value"},
                                                         {"set_properties": {"clean.retain.hours": 24}}]})
    extra = tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": pa.array([100], pa.int64()), "dt": ["d3"], "value": [1.0],
                             "note": ["late"]}), extra)
    run(spark, "write", {"table": path, "source": {"path": str(extra)}, "schema_evolution": "add_columns"})
    table = LakeTable.open(path)
    assert table.spec.column_names == ["id", "dt", "value", "note"]

    third = create_task(path, "daily/create/2024-03-03/-1")
    assert [c["operation"] for c in third["spec_changed_by"]] == ["bucket_rewrite", "alter_table", "write"]
    assert third["spec_differences"] == ["columns: renamed `v` -> `value`", "columns: added `note` string",
                                         "bucket.count: 8 -> 16", "properties.clean.retain.hours: unset -> 24"]
    # the spec as it is now is accepted too, with nothing to report
    now = {"columns": [{"name": c.name, "type": c.type} for c in table.spec.columns],
           "bucket": {"columns": ["id"], "count": 16}, "properties": {"clean.retain.hours": "24"}}
    current = create_task(path, "daily/create/2024-03-04/-1", schema=None, **now)
    assert current["spec_changed_by"] == [] and current["spec_differences"] == []
    assert LakeTable.open(path).commit_log.head() == table.commit_log.head()  # no create wrote anything
    assert sorted(r["id"] for r in table.read(spark).collect()) == [*range(40), 100]


def test_a_spec_the_table_never_had_fails_naming_every_difference(tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    create_task(path, "daily/create/2024-03-01/-1")
    run(None, "alter_table", {"table": path, "changes": [{"add": "note", "type": "STRING"}]})
    head = LakeTable.open(path).commit_log.head()
    with pytest.raises(LakeTableExists) as caught:  # a typo in the DAG: 32 buckets, no partitioning
        create_task(path, "daily/create/2024-03-02/-1", partition_by=None, bucket={"columns": ["id"], "count": 32},
                    schema="id BIGINT, dt STRING, v DOUBLE NOT NULL")
    message = str(caught.value)
    assert "a lake table with a different spec exists" in message
    for difference in ("columns: added `note` string", "columns: `v` NOT NULL -> nullable",
                       "partition_by: [] -> [dt]", "bucket.count: 32 -> 8"):
        assert difference in message
    assert "never the table's spec (set by create_table at entry 0, alter_table at entry 1)" in message
    # against the spec it was created with, only the typo shows
    assert ("Nearest is its spec as of entry 0 (create_table), from which: columns: `v` NOT NULL -> nullable; "
            "partition_by: [] -> [dt]; bucket.count: 32 -> 8.") in message
    assert "Fix: Give the table's current spec (`airflow-lake show" in message
    assert LakeTable.open(path).commit_log.head() == head  # nothing written


def test_a_spec_change_outside_the_provider_operations_is_not_taken_for_one(tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    create_task(path, "daily/create/2024-03-01/-1")
    table = LakeTable.open(path)
    edited = {**table.spec.to_dict(), "bucket": {"columns": ["id"], "count": 4, "sort_columns": []}}
    txn = table.begin("commit", "hand_edit")  # not an operation of the provider: nobody knows what it did
    txn.commit(metadata={"spec": edited})
    with pytest.raises(LakeTableExists, match=r"bucket\.count: 8 -> 4\. The given spec was the table's spec as of "
                                              r"entry 0, but entry 1 \(operation 'hand_edit'"):
        create_task(path, "daily/create/2024-03-02/-1")


def test_if_exists_error_still_refuses_an_existing_table(tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    create_task(path, "daily/create/2024-03-01/-1")
    with pytest.raises(LakeTableExists, match="already exists"):
        create_task(path, "daily/create/2024-03-02/-1", if_exists="error")
    retry = create_task(path, "daily/create/2024-03-01/-1", if_exists="error")  # a retry of the creating request
    assert retry["created"] is True and retry["seq"] == 0
