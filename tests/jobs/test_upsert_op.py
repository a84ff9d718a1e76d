"""The versioned_upsert and compact operations in-process: CSV, JSON and query sources, a version-only column,
spec errors before Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.registry import validate
from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError


def make(path: Path) -> str:
    LakeTable.create(str(path), {"schema": "k BIGINT NOT NULL, name STRING, n BIGINT", "primary_key": ["k"],
                                 "bucket": {"columns": ["k"], "count": 2}, "merge_operators": {"n": "sum"}})
    return str(path)


def rows(spark: Any, table: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(table).read(spark).collect())


def test_csv_json_and_query_sources(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t")
    csv = tmp_path / "b1.csv"
    csv.write_text("k,name,n\n1,ann,1\n2,bob,2\n1,ann2,10\n")
    out = run(spark, "versioned_upsert", {"table": table, "source": {"path": str(csv), "format": "csv"},
                                          "version": "20240301"})
    assert out["versions"] == [20240301] and out["rows"] == 3 and out["already_committed"] is False
    partial = tmp_path / "b2.json"  # a partial update: no `name`
    partial.write_text('{"k": 2, "n": 5}\n{"k": 3, "n": 7}\n')
    run(spark, "versioned_upsert", {"table": table, "source": {"path": str(partial), "format": "json"},
                                    "version": 20240302})
    assert rows(spark, table) == [(1, "ann2", 11), (2, "bob", 7), (3, None, 7)]
    other = make(tmp_path / "other")
    query = {"query": "SELECT k, upper(name) AS name, n, 20240303 AS batch FROM t WHERE k < 3",
             "tables": {"t": table}}
    out = run(spark, "versioned_upsert", {"table": other, "source": query, "version_column": "batch"})
    assert out["versions"] == [20240303]  # a version-only column: not a table column, not stored
    assert rows(spark, other) == [(1, "ANN2", 11), (2, "BOB", 7)]
    again = run(spark, "versioned_upsert", {"table": other, "source": query, "version_column": "batch"})
    assert again["already_committed"] is True and rows(spark, other) == [(1, "ANN2", 11), (2, "BOB", 7)]
    compacted = run(spark, "compact_upserts", {"table": table})
    assert compacted["files_after"] <= 2 and rows(spark, table) == [(1, "ann2", 11), (2, "bob", 7), (3, None, 7)]
    assert run(spark, "compact_upserts", {"table": table})["noop"] is True


def test_bad_specs_fail_before_spark(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(LakeSpecError, match="needs a `source`"):
        validate("versioned_upsert", {"table": "/t", "version": 1})
    with pytest.raises(LakeSpecError, match="not both"):
        validate("versioned_upsert", {"table": "/t", "source": {"path": "/x"}, "version": 1, "version_column": "v"})
    with pytest.raises(LakeSpecError, match="not a whole number"):
        validate("versioned_upsert", {"table": "/t", "source": {"path": "/x"}, "version": "1.5"})
    with pytest.raises(LakeSpecError, match="not a list of partitions"):
        validate("compact_upserts", {"table": "/t", "partitions": "all"})
    table = make(tmp_path / "t")
    csv = tmp_path / "bad.csv"
    csv.write_text("k,name,extra\n1,a,b\n")
    with pytest.raises(LakeSchemaError, match=r"\['extra'\]"):
        run(spark, "versioned_upsert", {"table": table, "source": {"path": str(csv), "format": "csv"}, "version": 1})
    plain = tmp_path / "plain"
    LakeTable.create(str(plain), {"schema": "k BIGINT"})
    with pytest.raises(LakeSpecError, match="has no primary key"):
        run(spark, "compact_upserts", {"table": str(plain)})
