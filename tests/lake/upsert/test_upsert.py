"""Versioned upserts on real Spark and real files, checked against an independent pandas merge."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from airflow_lake.datagen import bdci
from airflow_lake.jobs import run
from airflow_lake.lake.buckets.rewrite import bucket_rewrite
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.physical import row_stamped
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.upsert.oracle import as_strings, bdci_expected, merge

ROWS, KEYS, BUCKETS = 1200, 1500, 4


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return bdci.generate(tmp_path_factory.mktemp("bdci"), ROWS, keys=KEYS)


def bdci_table(path: Path) -> LakeTable:
    return LakeTable.create(str(path), bdci.table_spec(BUCKETS))


def read(spark: Any, table: LakeTable, **kwargs: Any) -> pd.DataFrame:
    return table.read(spark, **kwargs).toPandas()


def check(spark: Any, table: LakeTable, expected: pd.DataFrame) -> None:
    got = as_strings(read(spark, table), columns=list(expected.columns[1:]))
    assert len(got) == len(expected)
    pd.testing.assert_frame_equal(got, expected)


def upsert_file(spark: Any, table: LakeTable, batches: list[Path], version: int, **kwargs: Any) -> Any:
    return versioned_upsert(table, spark.read.parquet(str(batches[version])), version=version, **kwargs)


def test_parallel_out_of_order_upserts_merge_in_version_order(spark: Any, batches: list[Path], tmp_path: Path) -> None:
    table = bdci_table(tmp_path / "t")
    order = list(range(bdci.FILES))
    random.Random(7).shuffle(order)  # e.g. 10, 3, 0, 7, ...
    with ThreadPoolExecutor(4) as pool:  # four Spark jobs at once on one table, committing in any order
        done = list(pool.map(lambda v: upsert_file(spark, table, batches, v), order))
    assert all(not d.already_committed for d in done)
    assert sorted(v for d in done for v in d.entry.metadata["versions"]) == list(range(bdci.FILES))
    for d in done:  # tasks sized by adaptive execution (`sized_tasks`) still hold whole buckets: one file each
        buckets = [f.bucket for f in d.entry.added]
        assert sorted(buckets) == list(range(BUCKETS)), buckets
    expected = bdci_expected(batches)
    check(spark, table, expected)
    plan = table.read(spark)._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" not in plan and "Bucketed: true" in plan  # merged per bucket where it is read
    # the delta files hold the key without a dictionary (file_writer.plain_options), the values with one
    delta = pq.read_metadata(table.storage.path(next(iter(table.state().files)))).row_group(0)
    encodings = {delta.column(i).path_in_schema: delta.column(i).encodings for i in range(delta.num_columns)}
    assert "PLAIN_DICTIONARY" not in encodings["uuid"] and "PLAIN_DICTIONARY" in encodings["city"]
    done_compact = compact(table, spark)
    assert done_compact.entry is not None and done_compact.entry.metrics["files_after"] <= BUCKETS
    check(spark, table, expected)


def test_late_lower_versions_after_a_compaction_still_merge_right(spark: Any, batches: list[Path],
                                                                  tmp_path: Path) -> None:
    table = bdci_table(tmp_path / "t")
    early = [0, 1, 2, 3, 6, 7]
    for version in early:
        upsert_file(spark, table, batches, version)
    compact(table, spark)
    check(spark, table, bdci_expected(batches, early))
    for version in (4, 5, 8, 9, 10):  # 4 and 5 are lower than the compacted 6 and 7
        upsert_file(spark, table, batches, version)
    expected = bdci_expected(batches)
    check(spark, table, expected)  # base + late deltas
    compact(table, spark)
    check(spark, table, expected)  # and folded again
    assert len(table.snapshot().files) <= BUCKETS


def test_a_retry_changes_nothing_and_other_data_for_a_version_is_refused(spark: Any, batches: list[Path],
                                                                         tmp_path: Path) -> None:
    table = bdci_table(tmp_path / "t")
    upsert_file(spark, table, batches, 0)
    first = upsert_file(spark, table, batches, 1, request_id="dag/task/run/-1")
    again = upsert_file(spark, table, batches, 1, request_id="dag/task/run/-1")
    assert again.already_committed and again.entry.seq == first.entry.seq
    same = upsert_file(spark, table, batches, 1)  # no request id: the same version and data is a no-op too
    assert same.already_committed and same.entry.seq == first.entry.seq
    expected = bdci_expected(batches, [0, 1])
    check(spark, table, expected)  # `requests` summed once
    head = table.commit_log.head()
    with pytest.raises(LakeSpecError, match=r"version 1 was already upserted by instant \d+ with other data"):
        versioned_upsert(table, spark.read.parquet(str(batches[2])), version=1)
    assert all(e.action == "rollback" for e in table.commit_log.entries(head))  # only its own rollback
    check(spark, table, expected)
    replaced = versioned_upsert(table, spark.read.parquet(str(batches[2])), version=1, replace_version=True)
    assert replaced.entry.metrics["replaced_files"] == len(first.entry.added)
    check(spark, table, merge([(0, pd.read_parquet(batches[0])), (1, pd.read_parquet(batches[2]))],
                              operators=bdci.MERGE_OPERATORS, null_values=bdci.NULL_VALUES))
    compact(table, spark)
    with pytest.raises(LakeSpecError, match="was compacted into the base; it cannot be replaced"):
        versioned_upsert(table, spark.read.parquet(str(batches[3])), version=1, replace_version=True)


def small_table(path: Path, **extra: Any) -> LakeTable:
    spec = {"schema": "k BIGINT NOT NULL, a STRING, n BIGINT, hi BIGINT, lo BIGINT, tag STRING, v INT",
            "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2},
            "merge_operators": {"n": "sum", "hi": "max", "lo": "min", "tag": "last_non_null"},
            "null_values": {"tag": ["null", "N/A"]}, **extra}
    return LakeTable.create(str(path), spec)


SMALL = "k BIGINT, a STRING, n BIGINT, hi BIGINT, lo BIGINT, tag STRING, v INT"


def test_partial_updates_duplicates_and_version_columns(spark: Any, tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", version_column="v")
    rows1 = [(1, "a1", 1, 5, 5, "x", 1), (2, "b1", 2, 1, 1, None, 1), (1, "a1b", 10, 7, 3, "null", 1)]
    rows3 = [(1, "a3", 100, 2, 9, "N/A", 3), (3, "c3", 3, 3, 3, "z", 2)]  # versions 3 and 2 in one source
    versioned_upsert(table, spark.createDataFrame(rows3, SMALL))  # the table's version column
    versioned_upsert(table, spark.createDataFrame(rows1, SMALL))  # lower versions, later
    partial = spark.createDataFrame([(2, 1000, "y"), (1, 1, None)], "k BIGINT, n BIGINT, tag STRING")
    versioned_upsert(table, partial, version=5)  # a, hi, lo, v keep their merged values
    columns = ["a", "n", "hi", "lo", "tag", "v"]
    frames = [(1, pd.DataFrame(rows1, columns=["k", *columns]).drop(columns="v").assign(v=1)),
              (3, pd.DataFrame([rows3[0]], columns=["k", *columns])),
              (2, pd.DataFrame([rows3[1]], columns=["k", *columns])),
              (5, pd.DataFrame([(2, 1000, "y"), (1, 1, None)], columns=["k", "n", "tag"]))]
    expected = merge(frames, key="k", operators={"n": "sum", "hi": "max", "lo": "min", "tag": "last_non_null"},
                     null_values={"tag": ["null", "N/A"]})
    got = as_strings(read(spark, table), key="k", columns=list(expected.columns[1:]))
    pd.testing.assert_frame_equal(got, expected)
    assert got.set_index("k").loc["1", "tag"] == "x"  # "null", "N/A" and NULL never beat a real value
    assert got.set_index("k").loc["1", "n"] == str(1 + 10 + 100 + 1)


def test_full_rows_pick_their_last_values_by_one_order_and_partial_rows_per_column(spark: Any,
                                                                                   tmp_path: Path) -> None:
    table = small_table(tmp_path / "t")
    rows2 = [(1, "a2", 1, 1, 1, "x", 20), (1, None, 1, 1, 1, "y", None), (2, "b2", 1, 1, 1, "z", 21)]
    rows1 = [(1, "a1", 1, 1, 1, "w", 10), (3, "c1", 1, 1, 1, "null", 11)]
    versioned_upsert(table, spark.createDataFrame(rows2, SMALL), version=2)
    versioned_upsert(table, spark.createDataFrame(rows1, SMALL), version=1)  # a lower version, later
    spec = table.snapshot().spec
    # every file sets a and v on every row at one version: both are merged by one max_by over (version, seq)
    assert row_stamped(spec, table.snapshot().files) == ["a", "v"]
    plan = table.read(spark)._jdf.queryExecution().executedPlan().toString()
    assert plan.count("max_by(") == 2 * 2  # a + v together, tag alone; in the partial and the final aggregate
    # every row has its version (stats): nothing to derive, so the scan skips the stamps of a and v
    assert "__lake_v__a" not in plan and "__lake_v__v" not in plan and "__lake_v__tag" in plan
    columns = ["a", "n", "hi", "lo", "tag", "v"]
    frames = [(2, pd.DataFrame(rows2, columns=["k", *columns])), (1, pd.DataFrame(rows1, columns=["k", *columns]))]
    operators = {"n": "sum", "hi": "max", "lo": "min", "tag": "last_non_null"}

    def expected() -> pd.DataFrame:
        return merge(frames, key="k", operators=operators, null_values={"tag": ["null", "N/A"]})

    got = as_strings(read(spark, table), key="k", columns=list(expected().columns[1:]))
    pd.testing.assert_frame_equal(got, expected())
    assert got.set_index("k").loc["1", ["a", "v"]].tolist() == ["None", "None"]  # the newest row's NULLs win
    versioned_upsert(table, spark.createDataFrame([(1, "a3")], "k BIGINT, a STRING"), version=3)  # v not set
    frames.append((3, pd.DataFrame([(1, "a3")], columns=["k", "a"])))
    assert row_stamped(spec, table.snapshot().files) == []  # the stamps differ per column: one order each
    pd.testing.assert_frame_equal(as_strings(read(spark, table), key="k", columns=list(expected().columns[1:])),
                                  expected())


def test_bad_input_fails_before_anything_is_committed(spark: Any, tmp_path: Path) -> None:
    table = small_table(tmp_path / "t")
    versioned_upsert(table, spark.createDataFrame([(1, "a", 1, 1, 1, "x", 1)], SMALL), version=1)
    before = read(spark, table)
    files = {f.path for f in table.snapshot().files}
    cases: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
        (spark.createDataFrame([(2, "b", 9)], "k BIGINT, a STRING, extra INT"), {"version": 2}, LakeSchemaError,
         r"has column\(s\) \['extra'\] that the table does not"),
        (spark.createDataFrame([("b",)], "a STRING"), {"version": 2}, LakeSchemaError,
         r"lacks key column\(s\) \['k'\]"),
        (spark.createDataFrame([(None, "b")], "k BIGINT, a STRING"), {"version": 2}, LakeSchemaError,
         "column 'k' is NOT NULL"),
        (spark.createDataFrame([(2, "b")], "k BIGINT, a STRING"), {}, LakeSpecError, "the upsert has no version"),
        (spark.createDataFrame([(2, "b", None)], "k BIGINT, a STRING, v INT"), {"version_column": "v"},
         LakeSchemaError, "have no version"),
        (spark.createDataFrame([(2, "b", "x")], "k BIGINT, a STRING, v STRING"), {"version_column": "v"},
         LakeSchemaError, "versions are whole numbers"),
        (spark.createDataFrame([(2, [1])], "k BIGINT, n ARRAY<INT>"), {"version": 2}, LakeSchemaError,
         "column 'n' is array<int> in the source but bigint in the table"),
        (spark.createDataFrame([(2, "b")], "k BIGINT, a STRING"), {"version": "two"}, LakeSpecError,
         "'two' is not a whole number"),
    ]
    for df, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            versioned_upsert(table, df, **kwargs)
    assert {f.path for f in table.snapshot().files} == files
    pd.testing.assert_frame_equal(read(spark, table), before)
    with pytest.raises(LakeSpecError, match="unknown merge operator 'concat'"):
        small_table(tmp_path / "u", merge_operators={"a": "concat"})
    with pytest.raises(LakeSpecError, match="which takes no null values"):
        small_table(tmp_path / "w", null_values={"a": ["null"]})
    with pytest.raises(LakeSpecError, match="needs buckets on its key"):
        LakeTable.create(str(tmp_path / "x"), {"schema": "k BIGINT, a STRING", "primary_key": ["k"]})
    with pytest.raises(LakeSpecError, match="Use versioned_upsert"):
        table.write(spark.createDataFrame([(3, "c", 1, 1, 1, "x", 1)], SMALL))
    assert table.to_arrow().num_rows == table.read(spark).count()  # merged per key, no longer refused (issue 33)
    with pytest.raises(LakeSpecError, match="Compact it instead"):
        bucket_rewrite(table, spark, partitions="all", bucket={"columns": ["k"], "count": 4})
    with pytest.raises(LakeSpecError, match="clustering would not merge"):
        run(None, "schedule_clustering", {"table": table.url, "min_commits": 1})


def test_time_travel_key_filters_prune_buckets_and_value_filters_apply_after_the_merge(
        spark: Any, tmp_path: Path) -> None:
    table = small_table(tmp_path / "t")
    first = versioned_upsert(table, spark.createDataFrame([(k, "old", k, k, k, "x", 1) for k in range(20)], SMALL),
                             version=1)
    versioned_upsert(table, spark.createDataFrame([(k, "new", k, k, k, "y", 1) for k in range(10)], SMALL),
                     version=2)
    assert set(read(spark, table, as_of=first.entry.seq)["a"]) == {"old"}
    assert (read(spark, table)["a"] == "new").sum() == 10
    point = table.read(spark, filters=[("k", "=", 3)])
    assert "SelectedBucketsCount: 1 out of 2" in point._jdf.queryExecution().executedPlan().toString()
    assert point.toPandas()[["k", "a", "n"]].values.tolist() == [[3, "new", 6]]
    stale = read(spark, table, filters=[("a", "=", "old")])  # key 3's old value must not show
    assert sorted(stale["k"]) == list(range(10, 20))


def test_partitioned_tables_merge_a_key_per_partition(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {
        "schema": "k BIGINT NOT NULL, n BIGINT, a STRING, dt STRING", "primary_key": ["k"], "partition_by": ["dt"],
        "bucket": {"columns": ["k"], "count": 2}, "merge_operators": {"n": "sum"}})
    schema = "k BIGINT, n BIGINT, a STRING, dt STRING"
    versioned_upsert(table, spark.createDataFrame([(1, 1, "x", "d1"), (1, 2, "y", "d2")], schema), version=2)
    versioned_upsert(table, spark.createDataFrame([(1, 10, "old", "d1"), (2, 5, "z", "d2")], schema), version=1)
    assert sorted(tuple(r) for r in table.read(spark).collect()) == [(1, 2, "y", "d2"), (1, 11, "x", "d1"),
                                                                     (2, 5, "z", "d2")]
    assert [tuple(r) for r in table.read(spark, filters=[("dt", "=", "d1")]).collect()] == [(1, 11, "x", "d1")]
    with pytest.raises(LakeSchemaError, match=r"lacks key column\(s\) \['dt'\]"):
        versioned_upsert(table, spark.createDataFrame([(3, 1)], "k BIGINT, n BIGINT"), version=3)
    compact(table, spark)
    assert sorted(tuple(r) for r in table.read(spark).collect()) == [(1, 2, "y", "d2"), (1, 11, "x", "d1"),
                                                                     (2, 5, "z", "d2")]


def test_a_merged_table_registers_for_sql(spark: Any, tmp_path: Path) -> None:
    table = small_table(tmp_path / "t")
    versioned_upsert(table, spark.createDataFrame([(1, "a", 1, 1, 1, "x", 1), (1, "b", 2, 1, 1, "y", 1)], SMALL),
                     version=1)
    table.register(spark, "merged_small")
    assert spark.sql("SELECT k, a, n FROM merged_small").collect() == [(1, "b", 3)]


def test_upserts_can_write_their_buckets_without_a_shuffle(spark: Any, batches: list[Path], tmp_path: Path) -> None:
    spread, local = bdci_table(tmp_path / "spread"), bdci_table(tmp_path / "local")
    for version in (0, 1):
        shuffled = upsert_file(spark, spread, batches, version)
        kept = upsert_file(spark, local, batches, version, shuffle=False)  # each task writes its own buckets
        assert shuffled.entry.metrics["write_exchanges"] == 1 and kept.entry.metrics["write_exchanges"] == 0
        assert {f.bucket for f in kept.entry.added} == set(range(BUCKETS))  # still one bucket per file
    expected = bdci_expected(batches, [0, 1])
    check(spark, spread, expected)
    check(spark, local, expected)
