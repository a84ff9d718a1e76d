"""`LakeTable.to_arrow()` of a primary-key table (issue 33, item 11): the rows merged per key with pyarrow, without
Spark, equal to the Spark merged read — upserts out of version order, partial updates, every built-in merge
operator, a versioned delete, a late backfill below it, a compaction, and time travel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert

SCHEMA = "k BIGINT NOT NULL, dt STRING, a STRING, tag STRING, n BIGINT, hi DOUBLE, lo INT"
OPERATORS = {"tag": "last_non_null", "n": "sum", "hi": "max", "lo": "min"}


def spark_rows(spark: Any, table: LakeTable, as_of: int | None = None) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in table.read(spark, as_of=as_of).collect()), key=repr)


def arrow_rows(table: LakeTable, as_of: int | None = None) -> list[tuple[Any, ...]]:
    got = table.to_arrow(as_of=as_of)
    assert got.schema == pa.schema([("k", pa.int64()), ("dt", pa.string()), ("a", pa.string()),
                                    ("tag", pa.string()), ("n", pa.int64()), ("hi", pa.float64()),
                                    ("lo", pa.int32())])
    return sorted(zip(*got.to_pydict().values(), strict=True), key=repr)


def test_to_arrow_of_a_primary_key_table_is_the_merged_read(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "pk"), {
        "schema": SCHEMA, "primary_key": ["k"], "partition_by": ["dt"], "bucket": {"columns": ["k"], "count": 2},
        "merge_operators": OPERATORS, "null_values": {"tag": ["null"]}})

    def upsert(version: int, rows: list[tuple[Any, ...]], columns: str = SCHEMA) -> None:
        versioned_upsert(table, spark.createDataFrame(rows, columns), version=version)

    upsert(5, [(1, "d1", "five", "t5", 5, 5.0, 5), (2, "d1", "five", None, 5, 0.5, 50),
               (3, "d2", "five", "x", 1, 1.0, 1)])
    upsert(3, [(1, "d1", "three", "t3", 3, 9.0, 3), (4, "d2", "three", "null", 3, 3.0, 3)])  # late: loses last-wins
    upsert(7, [(2, "d1", "seven"), (4, "d2", "seven")], "k BIGINT NOT NULL, dt STRING, a STRING")  # partial
    upsert(8, [(1, "d1", "eight", "null", None, None, 8)])  # a null value of last_non_null does not qualify
    assert LakeTable.open(table.url).to_arrow().num_rows == 4
    table.delete_keys(spark, spark.createDataFrame([(3, "d2"), (2, "d1")], "k BIGINT, dt STRING"), version=6)
    upsert(4, [(3, "d2", "backfill", "b", 4, 4.0, 4)])  # below the delete: stays deleted
    upsert(9, [(2, "d1", "nine", None, 9, None, None)])  # above it: the key is back with only what is newer
    before_compaction = table.snapshot().seq
    expected = spark_rows(spark, table)
    assert arrow_rows(table) == expected
    assert {r[0] for r in expected} == {1, 2, 4}
    assert next(r for r in expected if r[0] == 1)[2:] == ("eight", "t5", 8, 9.0, 3)
    compact(table, spark)
    assert arrow_rows(table) == spark_rows(spark, table) == expected
    upsert(2, [(1, "d1", "two", "t2", 2, 99.0, -1), (3, "d2", "again", "c", 1, 1.0, 1)])  # late, after compaction
    assert arrow_rows(table) == spark_rows(spark, table)
    assert arrow_rows(table, before_compaction) == expected  # time travel
    assert table.to_arrow(columns=["k", "n"]).column_names == ["k", "n"]
