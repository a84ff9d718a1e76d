"""A write's source may lack nullable columns — files and queries from before a column was added — and they read
NULL (Delta's behaviour); a missing NOT NULL column stays an error (issue 33, item 10: re-delivering a day from
before `channel` was added failed with "the source lacks column(s) ['channel']")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSchemaError, LakeTable

OLD = [(1, 10, "d1"), (2, 20, "d1")]


@pytest.fixture
def table(spark: Any, table_path: str, tmp_path: Path) -> LakeTable:
    """A table written in its old shape, then given a column `channel`."""
    table = LakeTable.create(table_path, {"schema": "id BIGINT NOT NULL, amount BIGINT, dt STRING",
                                          "partition_by": ["dt"]})
    run(spark, "write", {"table": table_path, "source": {"path": old_parquet(tmp_path / "day1", OLD)}})
    table.alter_table([{"add": "channel", "type": "string", "after": "amount"}])
    return LakeTable.open(table_path)


def old_parquet(directory: Path, rows: list[tuple[Any, ...]]) -> str:
    directory.mkdir(parents=True)
    pq.write_table(pa.table({"id": [r[0] for r in rows], "amount": [r[1] for r in rows], "dt": [r[2] for r in rows]}),
                   directory / "part.parquet")
    return str(directory)


def rows(spark: Any, table: LakeTable) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(table.url).read(spark).collect())


def test_old_shape_files_and_queries_load_with_null_in_the_new_column(spark: Any, table: LakeTable,
                                                                      tmp_path: Path) -> None:
    run(spark, "write", {"table": table.url, "source": {"path": old_parquet(tmp_path / "p", [(3, 30, "d2")])}})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "part.csv").write_text("id,amount,dt\n4,40,d2\n")
    run(spark, "write", {"table": table.url, "source": {"path": str(tmp_path / "c"), "format": "csv"}})
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "part.json").write_text(json.dumps({"id": 5, "amount": 50, "dt": "d2"}) + "\n")
    run(spark, "write", {"table": table.url, "source": {"path": str(tmp_path / "j"), "format": "json"}})
    run(spark, "write", {"table": table.url, "source": {"query": "SELECT id + 5 AS id, amount, dt FROM t WHERE id = 1",
                                                        "tables": {"t": table.url}}})
    table.write(spark.createDataFrame([(7, 70, "d3")], "id BIGINT, amount BIGINT, dt STRING"))
    new = spark.createDataFrame([(8, 80, "web", "d3")], "id BIGINT, amount BIGINT, channel STRING, dt STRING")
    table.write(new)
    assert rows(spark, table) == [(1, 10, None, "d1"), (2, 20, None, "d1"), (3, 30, None, "d2"), (4, 40, None, "d2"),
                                  (5, 50, None, "d2"), (6, 10, None, "d1"), (7, 70, None, "d3"),
                                  (8, 80, "web", "d3")]


def test_a_missing_not_null_column_is_still_refused(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    head = table.commit_log.head()
    with pytest.raises(LakeSchemaError, match=r"lacks column\(s\) \['id'\]"):
        run(spark, "write", {"table": table.url, "source": {"query": "SELECT 1 AS amount, 'd9' AS dt", "tables": {}}})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "part.csv").write_text("amount,dt\n40,d2\n")
    with pytest.raises(LakeSchemaError, match=r"the CSV header lacks column\(s\) \['id'\]"):
        run(spark, "write", {"table": table.url, "source": {"path": str(tmp_path / "c"), "format": "csv"}})
    assert LakeTable.open(table.url).commit_log.head() == head
