"""A primary-key table gains, renames and drops columns mid-way through out-of-order upserts, and still merges
right (against the pandas oracle), also after compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.upsert.oracle import as_strings, merge

OPERATORS = {"n": "sum", "tag": "last_non_null", "hits": "sum"}


def batch(version: int, columns: list[str], keys: range) -> tuple[int, pd.DataFrame]:
    """Rows of one upsert: every key of `keys` with values that depend on the version and the key."""
    values = {"a": lambda k: f"a{version}_{k}", "n": lambda k: version * 10 + k,
              "tag": lambda k: None if (k + version) % 3 == 0 else f"t{version}",
              "score": lambda k: version * 100 + k, "hits": lambda k: k % 4}
    return version, pd.DataFrame([{"k": k, **{c: values[c](k) for c in columns}} for k in keys])


def upsert(spark: Any, table: LakeTable, item: tuple[int, pd.DataFrame], **kwargs: Any) -> Any:
    version, frame = item
    types = {"k": "BIGINT", "a": "STRING", "n": "BIGINT", "tag": "STRING", "score": "INT", "points": "INT",
             "hits": "BIGINT"}
    ddl = ", ".join(f"{c} {types[c]}" for c in frame.columns)
    return versioned_upsert(table, spark.createDataFrame(frame.astype(object), ddl), version=version, **kwargs)


def check(spark: Any, table: LakeTable, applied: list[tuple[int, pd.DataFrame]]) -> None:
    expected = merge(applied, key="k", operators=OPERATORS)
    got = as_strings(table.read(spark).toPandas(), key="k", columns=list(expected.columns[1:]))
    pd.testing.assert_frame_equal(got, expected)


def test_a_column_added_mid_way_through_out_of_order_upserts_merges_right(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {
        "schema": "k BIGINT, a STRING, n BIGINT, tag STRING", "primary_key": ["k"],
        "bucket": {"columns": ["k"], "count": 2}, "merge_operators": {"n": "sum", "tag": "last_non_null"}})
    applied = [batch(5, ["a", "n", "tag"], range(0, 12)), batch(2, ["a", "n", "tag"], range(6, 18))]
    for item in applied:
        upsert(spark, table, item)
    with pytest.raises(LakeSchemaError, match=r"\['score'\].*set schema_evolution to \"add_columns\""):
        upsert(spark, table, batch(7, ["a", "score"], range(3, 9)))
    with pytest.raises(LakeSpecError, match="not a new column"):
        upsert(spark, table, batch(7, ["a", "score"], range(3, 9)), schema_evolution="add_columns",
               merge_operators={"a": "max"})
    assert table.commit_log.head() == 2
    # version 7 brings `score` (last) and `hits` (sum) into the table in its own commit
    seven = batch(7, ["a", "score", "hits"], range(3, 9))
    done = upsert(spark, table, seven, schema_evolution="add_columns", merge_operators={"hits": "sum"})
    assert done.entry.metadata["added_columns"] == ["score", "hits"]
    assert table.spec.merge_operators == {"n": "sum", "tag": "last_non_null", "hits": "sum"}
    applied.append(seven)
    check(spark, table, applied)
    assert table.read(spark, as_of=2).columns == ["k", "a", "n", "tag"]  # time travel: the spec then
    # lower versions arriving later, without the new columns and with them
    for item in (batch(3, ["a", "n"], range(0, 20)), batch(6, ["score", "hits", "tag"], range(5, 15))):
        upsert(spark, table, item)
        applied.append(item)
        check(spark, table, applied)
    assert compact(table, spark).entry is not None
    check(spark, table, applied)
    # after the compaction: a rename (stamps follow the column), a late lowest version, a higher one
    table.alter_table([{"rename": "score", "to": "points"}])
    renamed = [(v, f.rename(columns={"score": "points"})) for v, f in applied]
    for version, columns, keys in ((1, ["a", "score", "hits"], range(0, 25)), (9, ["n", "tag"], range(10, 14))):
        item = batch(version, columns, keys)
        item = (version, item[1].rename(columns={"score": "points"}))
        upsert(spark, table, item)
        renamed.append(item)
    check(spark, table, renamed)
    plan = table.read(spark)._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" not in plan and "Bucketed: true" in plan  # still merged per bucket where it is read
    assert compact(table, spark).entry is not None
    check(spark, table, renamed)
    # a dropped value column is gone for good; added again, every key reads NULL until an upsert sets it
    table.alter_table([{"drop": "points"}, {"add": "points", "type": "int"}])
    got = [r.points for r in table.read(spark).collect()]
    assert got == [None] * 25


def test_the_upsert_job_takes_schema_evolution(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    LakeTable.create(path, {"schema": "k BIGINT, a STRING", "primary_key": ["k"], "bucket": {"columns": ["k"],
                                                                                               "count": 2}})
    source = tmp_path / "src"
    spark.createDataFrame([(1, "x", 3)], "k BIGINT, a STRING, extra INT").write.parquet(str(source))
    spec = {"table": path, "source": {"path": str(source)}, "version": 1}
    with pytest.raises(LakeSchemaError, match="schema_evolution"):
        run(spark, "versioned_upsert", spec)
    with pytest.raises(LakeSpecError, match="merge_operators"):
        run(spark, "versioned_upsert", {**spec, "merge_operators": {"extra": "sum"}})
    out = run(spark, "versioned_upsert", {**spec, "schema_evolution": "add_columns",
                                          "merge_operators": {"extra": "max"}, "request_id": "r"})
    assert out["already_committed"] is False
    assert run(spark, "versioned_upsert", {**spec, "schema_evolution": "add_columns",
                                           "merge_operators": {"extra": "max"}, "request_id": "r"})["already_committed"]
    table = LakeTable.open(path)
    assert table.spec.merge_operators == {"extra": "max"}
    assert [tuple(r) for r in table.read(spark).collect()] == [(1, "x", 3)]
