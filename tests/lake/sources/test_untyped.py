"""A Parquet source column of Arrow type `null` (all NULL, as pandas and pyarrow write one) is a NULL of no type:
schema evolution refuses it as it refuses a query's `NULL AS extra`, and written into an existing column it is NULL
of that column's type (issue 33, item 8: it added an `int` column the data never said)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.sources.untyped import null_type_columns


def parquet(directory: Path, name: str = "part.parquet", **columns: pa.Array) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), directory / name)
    return str(directory)


def test_schema_evolution_refuses_a_null_typed_parquet_column_like_a_query_null(spark: Any, table_path: str,
                                                                               tmp_path: Path) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT"})
    source = parquet(tmp_path / "s", id=pa.array([1, 2]), extra=pa.nulls(2))
    for given in ({"path": source}, {"query": "SELECT 1L AS id, NULL AS extra", "tables": {}}):
        with pytest.raises(LakeSpecError, match="new column 'extra' is NULL in the source and has no type"):
            run(spark, "write", {"table": table_path, "source": given, "schema_evolution": "add_columns"})
    assert LakeTable.open(table_path).spec.column_names == ["id"] and table.commit_log.head() == 0


def test_a_null_typed_column_fills_an_existing_column_of_any_type(spark: Any, table_path: str,
                                                                  tmp_path: Path) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, note STRING"})
    run(spark, "write", {"table": table_path, "source": {"path": parquet(tmp_path / "s", id=pa.array([1]),
                                                                         note=pa.nulls(1))}})
    assert [tuple(r) for r in LakeTable.open(table_path).read(spark).collect()] == [(1, None)]


def test_only_columns_null_typed_in_every_file_count(tmp_path: Path) -> None:
    parquet(tmp_path / "s", "a.parquet", id=pa.array([1]), x=pa.nulls(1), y=pa.nulls(1))
    assert null_type_columns(str(tmp_path / "s")) == {"x", "y"}
    parquet(tmp_path / "s", "b.parquet", id=pa.array([2]), x=pa.array([5], pa.int32()), y=pa.nulls(1))
    assert null_type_columns(str(tmp_path / "s")) == {"y"}
    assert null_type_columns(str(tmp_path / "s"), max_files=1) == set()  # not every file known
    assert null_type_columns("s3://bucket/x") == set()
