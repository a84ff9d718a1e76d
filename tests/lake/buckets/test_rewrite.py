"""bucket_rewrite and per-partition bucketing: files, rows, plans, bad input, conflicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.buckets import rewrite as rewrite_module
from airflow_lake.lake.buckets.rewrite import bucket_rewrite
from airflow_lake.lake.errors import LakeCommitConflict, LakeSpecError
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from airflow_lake.lake.table import LakeTable
from tests.lake.buckets.bucket_helpers import file_rows_in_their_bucket, make, rows_df, session_conf
from tests.support import parquet_files_on_disk

DAYS = ("d1", "d2", "d3")


def all_rows(spark: Any, table: LakeTable, **kwargs: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in table.read(spark, **kwargs).collect())


def files_per_partition(table: LakeTable) -> dict[str, list[int | None]]:
    out: dict[str, list[int | None]] = {}
    for f in table.snapshot().files:
        out.setdefault(str(f.partition.get("dt")), []).append(f.bucket)
    return {k: sorted(v, key=lambda b: -1 if b is None else b) for k, v in sorted(out.items())}


def plain_table(spark: Any, path: Path) -> LakeTable:
    """A plain table of three days, written in two appends (so several files per partition)."""
    table = make(path)
    table.write(rows_df(spark, 120, days=DAYS))
    table.write(rows_df(spark, 120, days=DAYS, offset=1).selectExpr("k + 1000 AS k", "v", "dt"))
    return table


def test_bucketing_a_plain_table_from_a_partition_on(spark: Any, tmp_path: Path) -> None:
    table = plain_table(spark, tmp_path / "t")
    expected = all_rows(spark, table)
    plain_d1 = {f.path for f in table.snapshot().files if f.partition["dt"] == "d1"}
    replaced = sum(1 for f in table.snapshot().files if f.partition["dt"] != "d1")
    entry = bucket_rewrite(table, spark, partitions={"from": {"dt": "d2"}},
                           bucket={"columns": ["k"], "count": 8, "sort_columns": ["v"]})
    assert entry is not None and entry.action == "replace" and entry.operation == "bucket_rewrite"
    assert all_rows(spark, table) == expected  # every row, once
    spec = table.spec
    assert spec.bucket is not None and dict(spec.bucket.from_partition or {}) == {"dt": "d2"}
    per = files_per_partition(table)
    assert per["d2"] == per["d3"] == list(range(8))  # one file per non-empty bucket
    assert {f.path for f in table.snapshot().files if f.partition["dt"] == "d1"} == plain_d1  # untouched
    file_rows_in_their_bucket(spark, table)
    for f in table.snapshot().files:
        if f.bucket is not None:
            values = pq.read_table(table.storage.path(f.path)).column("v").to_pylist()
            assert values == sorted(values)  # sorted by the sort column
    assert entry.metrics["bucket_counts"] == {"dt=d2": 8, "dt=d3": 8}
    assert entry.metrics["bucket_counts_before"] == {"dt=d2": None, "dt=d3": None}
    assert entry.metrics["files_removed"] == entry.metrics["files_before"] == replaced
    assert entry.metrics["files_added"] == entry.metrics["files_after"] == 16
    assert entry.metrics["bytes_after"] == sum(f.bytes for f in table.snapshot().files if f.bucket is not None)

    # new writes: later partitions bucketed, earlier ones stay plain
    table.write(rows_df(spark, 50, days=("d0", "d4"), offset=2))
    per = files_per_partition(table)
    assert per["d4"] == list(range(8)) and set(per["d0"]) == {None}
    with session_conf(spark):
        bucketed = table.read(spark, filters=[("dt", ">=", "d2")])
        assert "Bucketed: true" in plan_text(bucketed) and "SelectedBucketsCount: 1 out of 8" in plan_text(
            bucketed.where("k = 7"))
        assert shuffles(plan_text(bucketed.groupBy("k").count())) == 0
        everything = table.read(spark)  # plain and bucketed partitions: every row
        assert everything.count() == len(expected) + 100
        assert sorted(tuple(r) for r in everything.where("dt BETWEEN 'd1' AND 'd3'").collect()) == expected


def test_per_partition_bucket_counts_and_mixed_reads(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", bucket={"columns": ["k"], "count": 8, "sort_columns": ["k"],
                                         "from_partition": {"dt": "d2"},
                                         "partition_counts": [{"partition": {"dt": "d3"}, "count": 16}]})
    table.write(rows_df(spark, 300, days=DAYS))
    per = files_per_partition(table)
    assert set(per["d1"]) == {None} and per["d2"] == list(range(8)) and per["d3"] == list(range(16))
    file_rows_in_their_bucket(spark, table)
    expected = sorted((k, k * 10, d) for d in DAYS for k in range(300))
    with session_conf(spark):
        assert all_rows(spark, table) == expected  # plain + 8 + 16 buckets: exactly the rows
        d3 = table.read(spark, filters=[("dt", "=", "d3")])
        assert "SelectedBucketsCount: 1 out of 16" in plan_text(d3.where("k = 1"))
        mixed = table.read(spark, filters=[("dt", ">=", "d2")])
        assert sorted(tuple(r) for r in mixed.where("k = 1").collect()) == [(1, 10, "d2"), (1, 10, "d3")]
        assert "SelectedBucketsCount: 1 out of 8" in plan_text(mixed.where("k = 1"))  # pruning in each part


def test_rewrite_to_another_count_and_back_keeps_rows_and_time_travel(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", bucket={"columns": ["k"], "count": 4})
    table.write(rows_df(spark, 200, days=DAYS))
    before = table.snapshot().seq
    expected = all_rows(spark, table)
    entry = bucket_rewrite(table, spark, partitions=[{"dt": "d2"}],
                           bucket={"columns": ["k"], "count": 4, "partition_counts": [
                               {"partition": {"dt": "d2"}, "count": 16}]})
    assert entry is not None
    assert entry.metrics["bucket_counts_before"] == {"dt=d2": 4} and entry.metrics["bucket_counts"] == {"dt=d2": 16}
    assert files_per_partition(table)["d2"] == list(range(16)) and files_per_partition(table)["d1"] == list(range(4))
    assert all_rows(spark, table) == expected
    assert all_rows(spark, table, as_of=before) == expected
    assert len(parquet_files_on_disk(table.url.removeprefix("file://"))) > len(table.snapshot().files)
    file_rows_in_their_bucket(spark, table)


def test_unpartitioned_rewrite_and_retry_through_the_runner(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", partitioned=False)
    table.write(rows_df(spark, 100, days=("x",)))
    table.write(rows_df(spark, 100, days=("y",)))
    spec = {"table": table.url, "bucket": {"columns": ["k"], "count": 8}, "request_id": "dag/rw/run1/-1"}
    first = run(spark, "bucket_rewrite", spec)
    assert first["already_committed"] is False and first["files_added"] == 8 and first["rows_added"] == 200
    assert first["bucket_counts"] == {"": 8} and first["write_exchanges"] == 1
    again = run(spark, "bucket_rewrite", spec)  # an Airflow retry
    assert again["already_committed"] is True and again["seq"] == first["seq"]
    assert LakeTable.open(table.url).snapshot().seq == first["seq"]
    with session_conf(spark):
        assert "SelectedBucketsCount: 1 out of 8" in plan_text(table.read(spark).where("k = 3"))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"bucket": {"columns": ["k"], "count": 0}}, "bucket.count: 0 is not a valid bucket count"),
    ({"bucket": {"columns": ["k"], "count": -8}}, "bucket.count: -8 is not a valid bucket count"),
    ({"bucket": {"columns": ["k"], "count": 8, "partition_counts": [{"partition": {"dt": "d2"}, "count": 12}]}},
     "bucket counts 8 and 12 are not multiples of each other"),
    ({"bucket": {"columns": ["nope"], "count": 8}}, "bucket.columns[0]: unknown column 'nope'"),
    ({"bucket": {"columns": ["k"], "count": 8}, "partitions": [{"dt": "d9"}]},
     "partition {'dt': 'd9'} does not exist"),
    ({"bucket": {"columns": ["k"], "count": 8}, "partitions": [{"day": "d1"}]}, "'day' is not a partition column"),
    ({"bucket": {"columns": ["k"], "count": 8}, "partitions": [{"dt": "../x"}]}, "could address a path outside"),
    ({"partitions": "all"}, "the table has no bucket spec and none was given"),
    ({"bucket": {"columns": ["k"], "count": 8}, "partitions": {"since": {"dt": "d1"}}}, "unknown key 'since'"),
])
def test_bad_input_is_refused_before_anything_is_committed(spark: Any, tmp_path: Path, kwargs: dict[str, Any],
                                                          message: str) -> None:
    table = plain_table(spark, tmp_path / "t")
    seq, files = table.snapshot().seq, parquet_files_on_disk(str(tmp_path / "t"))
    with pytest.raises(LakeSpecError) as err:
        bucket_rewrite(table, spark, **kwargs)
    assert message in str(err.value) and "Fix:" in str(err.value)
    assert table.snapshot().seq == seq and parquet_files_on_disk(str(tmp_path / "t")) == files
    assert table.timeline()[-1].state == "completed"


def test_counts_must_be_multiples_of_the_partitions_that_keep_theirs(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t", bucket={"columns": ["k"], "count": 8})
    table.write(rows_df(spark, 50, days=DAYS))
    with pytest.raises(LakeSpecError, match="bucket counts 8 and 12 are not multiples"):
        bucket_rewrite(table, spark, partitions=[{"dt": "d3"}], bucket={"columns": ["k"], "count": 12})
    assert {f.bucket for f in table.snapshot().files} == set(range(8))


def test_primary_key_table_must_be_bucketed_by_its_key(tmp_path: Path) -> None:
    with pytest.raises(LakeSpecError, match="a primary-key table is bucketed by its key, but 'v' is not a key"):
        LakeTable.create(str(tmp_path / "t"), {"schema": "k BIGINT, v BIGINT", "primary_key": ["k"],
                                               "bucket": {"columns": ["v"], "count": 8}})
    assert not LakeTable.exists(str(tmp_path / "t"))
    with pytest.raises(LakeSpecError, match=r"bucket\.partition_counts\[0\]\.count"):
        make(tmp_path / "u", bucket={"columns": ["k"], "count": 8,
                                     "partition_counts": [{"partition": {"dt": "a"}, "count": 0}]})


def test_a_concurrent_append_to_a_rewritten_partition_makes_the_rewrite_retry(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = plain_table(spark, tmp_path / "t")
    real = rewrite_module.write_dataframe

    def append_meanwhile(*args: Any, **kwargs: Any) -> Any:
        late = rows_df(spark, 5, days=("d2",), offset=7).selectExpr("k + 5000 AS k", "v", "dt")
        LakeTable.open(table.url).write(late)
        return real(*args, **kwargs)

    monkeypatch.setattr(rewrite_module, "write_dataframe", append_meanwhile)
    with pytest.raises(LakeCommitConflict, match=r"added \d+ file\(s\) to partitions this job overwrites"):
        bucket_rewrite(table, spark, partitions=[{"dt": "d2"}], bucket={"columns": ["k"], "count": 8})
    monkeypatch.undo()
    assert table.spec.bucket is None  # nothing of the rewrite landed; the append did
    assert sum(1 for r in table.read(spark).collect() if r["k"] >= 5000) == 5
    entry = bucket_rewrite(table, spark, partitions=[{"dt": "d2"}], bucket={"columns": ["k"], "count": 8})
    assert entry is not None and entry.metrics["rows_added"] == 245  # the retry rewrites the appended rows too


def test_a_writer_that_started_before_a_spec_change_retries(spark: Any, tmp_path: Path) -> None:
    from airflow_lake.lake.spark.file_writer import write_dataframe

    table = plain_table(spark, tmp_path / "t")
    txn = table.begin("commit", "write")
    files = write_dataframe(rows_df(spark, 5, days=("d3",)), table.storage, table.spec, txn.instant)
    bucket_rewrite(table, spark, partitions={"from": {"dt": "d2"}}, bucket={"columns": ["k"], "count": 8})
    with pytest.raises(LakeCommitConflict, match="changed the table spec meanwhile"):
        txn.commit(added=files)
    txn.abort()


def test_a_query_over_the_bucketed_partitions_of_a_table_bucketed_from_a_partition_on_does_not_shuffle(
        spark: Any, tmp_path: Path) -> None:
    table = plain_table(spark, tmp_path / "t")
    bucket_rewrite(table, spark, partitions={"from": {"dt": "d2"}}, bucket={"columns": ["k"], "count": 8})
    out = make(tmp_path / "out", partitioned=False, schema="k BIGINT, total BIGINT")
    query = "SELECT k, sum(v) AS total FROM t GROUP BY k"
    bucketed = run(spark, "write", {"table": out.url, "source": {"query": query, "tables": {
        "t": {"path": table.url, "filters": [["dt", ">=", "d2"]]}}}})
    assert bucketed["query_exchanges"] == 0 and bucketed["write_exchanges"] == 0
    assert bucketed["rows_added"] == 240
    everything = run(spark, "write", {"table": out.url, "mode": "overwrite", "source": {
        "query": query, "tables": {"t": table.url}}})  # plain d1 too: a union, which Spark shuffles
    assert everything["query_exchanges"] > 0 and everything["rows_added"] == 240
    with pytest.raises(LakeSpecError, match="unknown key"):
        run(spark, "write", {"table": out.url, "source": {"query": query, "tables": {
            "t": {"path": table.url, "filter": []}}}})


# -- selections that match no partition: no spec change that the files contradict -------------------
def test_a_reversed_range_is_refused_naming_both_bounds_and_commits_nothing(spark: Any, tmp_path: Path) -> None:
    table = plain_table(spark, tmp_path / "t")
    seq, files = table.snapshot().seq, parquet_files_on_disk(table.url)
    with pytest.raises(LakeSpecError) as err:
        run(spark, "bucket_rewrite", {"table": table.url, "partitions": {"from": {"dt": "d3"}, "to": {"dt": "d1"}},
                                      "bucket": {"columns": ["k"], "count": 8}})
    message = str(err.value)
    assert err.value.field == "partitions" and "reversed" in message
    assert "{'dt': 'd3'}" in message and "{'dt': 'd1'}" in message and "Fix: Swap them" in message
    assert table.snapshot().seq == seq and table.spec.bucket is None  # the spec did not change
    assert parquet_files_on_disk(table.url) == files and table.timeline()[-1].state == "completed"


def test_a_range_is_ordered_by_typed_values(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "k BIGINT, v BIGINT, p INT", "partition_by": ["p"]})
    table.write(spark.createDataFrame([(k, k, p) for p in (9, 10) for k in range(20)], "k BIGINT, v BIGINT, p INT"))
    with pytest.raises(LakeSpecError, match="reversed"):  # 10 > 9, although '10' < '9' as text
        bucket_rewrite(table, spark, partitions={"from": {"p": 10}, "to": {"p": 9}},
                       bucket={"columns": ["k"], "count": 4})
    entry = bucket_rewrite(table, spark, partitions={"from": {"p": 9}, "to": {"p": 10}},
                           bucket={"columns": ["k"], "count": 4})
    assert entry is not None and entry.metrics["partitions_rewritten"] == 2 and entry.metrics["rows_added"] == 40


@pytest.mark.parametrize(("bucket", "partitions", "found"), [
    (None, {"from": {"dt": "d5"}, "to": {"dt": "d9"}}, "dt=d1 is plain"),  # a range past the data
    (None, {"to": {"dt": "d0"}}, "dt=d1 is plain"),  # a range before the data
    ({"columns": ["k"], "count": 4}, {"from": {"dt": "d9"}}, "dt=d1 is in 4 buckets"),  # a new count past the data
    ({"columns": ["k"], "count": 4}, {"from": {"dt": "d5"}, "to": {"dt": "d9"}}, "dt=d1 is in 4 buckets"),
], ids=["plain-range-past", "plain-range-before", "bucketed-from-past", "bucketed-range-past"])
def test_a_selection_of_no_partition_commits_no_spec_the_files_contradict(
        spark: Any, tmp_path: Path, bucket: dict[str, Any] | None, partitions: Any, found: str) -> None:
    table = make(tmp_path / "t", bucket=bucket)
    table.write(rows_df(spark, 40, days=DAYS))
    spec, seq, files = table.spec, table.snapshot().seq, parquet_files_on_disk(table.url)
    with pytest.raises(LakeSpecError) as err:
        run(spark, "bucket_rewrite", {"table": table.url, "partitions": partitions,
                                      "bucket": {"columns": ["k"], "count": 8, "sort_columns": ["v"]}})
    message = str(err.value)
    assert err.value.field == "partitions" and "matches no partition" in message and found in message
    assert "Fix: Choose the partitions to rewrite" in message
    assert table.spec == spec and table.snapshot().seq == seq and parquet_files_on_disk(table.url) == files
    table.write(rows_df(spark, 5, days=("d1",), offset=3))  # later writes keep the partition's layout
    assert {f.bucketing for f in table.snapshot().files if f.partition["dt"] == "d1"} == \
        ({None} if bucket is None else {"murmur3:4:k"})


def test_bucketing_from_a_partition_that_has_no_data_yet(spark: Any, tmp_path: Path) -> None:
    table = plain_table(spark, tmp_path / "t")
    expected = all_rows(spark, table)
    files = {f.path for f in table.snapshot().files}
    out = run(spark, "bucket_rewrite", {"table": table.url, "partitions": {"from": {"dt": "d4"}},
                                        "bucket": {"columns": ["k"], "count": 8}})
    assert out["nothing_to_do"] is False and out["spec_changed"] is True and out["action"] == "replace"
    assert (out["partitions_rewritten"], out["files_added"], out["files_removed"]) == (0, 0, 0)
    spec = table.spec
    assert spec.bucket is not None and dict(spec.bucket.from_partition or {}) == {"dt": "d4"}
    assert {f.path for f in table.snapshot().files} == files and all_rows(spark, table) == expected
    table.write(rows_df(spark, 30, days=("d3", "d4", "d5"), offset=5))
    per = files_per_partition(table)
    assert set(per["d3"]) == {None} and per["d4"] == per["d5"] == list(range(8))  # buckets from d4 on
    file_rows_in_their_bucket(spark, table)
    assert len(all_rows(spark, table)) == len(expected) + 90
    # the same again: the spec is unchanged and nothing is chosen, so nothing is committed
    again = run(spark, "bucket_rewrite", {"table": table.url, "partitions": {"from": {"dt": "d9"}}})
    assert again["nothing_to_do"] is True and "seq" not in again


def test_an_empty_table_takes_a_bucket_spec_from_any_selection(spark: Any, tmp_path: Path) -> None:
    table = make(tmp_path / "t")
    entry = bucket_rewrite(table, spark, partitions={"from": {"dt": "d1"}, "to": {"dt": "d2"}},
                           bucket={"columns": ["k"], "count": 8})  # no file: nothing can contradict it
    assert entry is not None and entry.metrics["spec_changed"] is True and table.spec.bucket is not None
    table.write(rows_df(spark, 20, days=("d1",)))
    assert files_per_partition(table)["d1"] == list(range(8))
