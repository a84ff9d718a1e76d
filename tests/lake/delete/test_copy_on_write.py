"""delete (copy-on-write) with real Spark and real files, against a pandas oracle: plain, partitioned, bucketed and
clustered tables; only files that may match are read and only files with a match are rewritten, in their order,
in their bucket; no match commits nothing; a retry is a no-op; an append racing the delete conflicts; hostile
predicates are refused before anything is written; after `clean`, no data file holds a deleted row."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeCommitConflict, LakeSpecError, LakeTable, faults
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from tests.lake.buckets.bucket_helpers import file_rows_in_their_bucket, session_conf
from tests.support import parquet_files_on_disk

SCHEMA = "k BIGINT, v BIGINT, dt STRING"


def rows_of(spark: Any, table: LakeTable) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in table.read(spark).collect()), key=repr)


def oracle(frame: pd.DataFrame, deleted: pd.Series) -> list[tuple[Any, ...]]:
    """The rows of `frame` the delete must keep: those where the mask is not True (NULL keeps the row)."""
    kept = frame[~deleted.fillna(False).astype(bool)]
    return sorted((tuple(None if pd.isna(x) else (int(x) if isinstance(x, float) else x) for x in r)
                   for r in kept.itertuples(index=False)), key=repr)


def load(spark: Any, table: LakeTable, batches: list[list[tuple[Any, ...]]]) -> pd.DataFrame:
    """Write each batch as one commit with one task (one file per partition/bucket); return all rows."""
    for batch in batches:
        table.write(spark.createDataFrame(batch, SCHEMA).coalesce(1))
    return pd.DataFrame([r for b in batches for r in b], columns=["k", "v", "dt"])


def live(table: LakeTable) -> dict[str, Any]:
    return {f.path: f for f in table.snapshot().files}


def column(table: LakeTable, path: str, name: str) -> list[Any]:
    values: list[Any] = pq.read_table(table.storage.path(path), columns=[name]).column(name).to_pylist()
    return values


@pytest.fixture
def plain(spark: Any, table_path: str) -> Iterator[tuple[LakeTable, pd.DataFrame]]:
    table = LakeTable.create(table_path, {"schema": SCHEMA})
    # four files with disjoint k ranges (stats skipping can tell them apart); v falls within each file
    frame = load(spark, table, [[(k, (k * 37) % 1000, "d1") for k in range(i * 50, i * 50 + 50)] for i in range(4)])
    yield table, frame


def test_a_point_delete_reads_only_files_whose_stats_may_match_and_rewrites_them_in_order(
        spark: Any, plain: tuple[LakeTable, pd.DataFrame]) -> None:
    table, frame = plain
    before = live(table)
    out = run(spark, "delete", {"table": table.url, "filters": [["k", "in", [7, 120]]]})
    assert (out["action"], out["operation"]) == ("replace", "delete")
    assert out["files_scanned"] == 2 and out["files_rewritten"] == 2 and out["files_dropped"] == 0
    assert out["rows_deleted"] == 2 and out["rows_kept"] == 98 and out["files_added"] == 2
    assert rows_of(spark, table) == oracle(frame, frame.k.isin([7, 120]))
    after = live(table)
    untouched = [p for p, f in before.items() if not (f.stats["k"].min <= 7 <= f.stats["k"].max
                                                      or f.stats["k"].min <= 120 <= f.stats["k"].max)]
    assert len(untouched) == 2 and all(p in after for p in untouched)  # never read, never rewritten
    for old in (p for p in before if p not in after):  # each rewritten file: the same rows minus one, same order
        old_ks = column(table, old, "k")
        new = [p for p in after if p not in before and column(table, p, "k")[0] == old_ks[0]]
        assert len(new) == 1
        assert column(table, new[0], "k") == [k for k in old_ks if k not in (7, 120)]
        assert after[new[0]].stats["k"].min == old_ks[0] and after[new[0]].rows == len(old_ks) - 1  # fresh stats


def test_a_delete_of_a_whole_file_drops_it_and_one_matching_nothing_commits_nothing(
        spark: Any, plain: tuple[LakeTable, pd.DataFrame]) -> None:
    table, frame = plain
    head = table.commit_log.head()
    none = run(spark, "delete", {"table": table.url, "filters": [["k", ">", 10_000]]})  # skipped by stats
    assert none["noop"] is True and none["files_scanned"] == 0 and table.commit_log.head() == head
    read = run(spark, "delete", {"table": table.url, "where": "k = 3 AND v < 0"})  # read, counted, no match
    assert read["noop"] is True and read["files_scanned"] == 4 and read["rows_deleted"] == 0
    assert table.commit_log.head() == head
    out = run(spark, "delete", {"table": table.url, "filters": [["k", "between", [50, 99]]]})
    assert (out["files_dropped"], out["files_rewritten"], out["files_added"], out["rows_deleted"]) == (1, 0, 0, 50)
    assert rows_of(spark, table) == oracle(frame, frame.k.between(50, 99))
    assert len(table.snapshot().files) == 3


def test_partitioned_deletes_touch_only_matching_partitions_and_keep_null_rows(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    batches = [[(k, None if k % 5 == 0 else k % 40, dt) for k in range(i * 30, i * 30 + 30) for dt in ("d1", "d2",
                                                                                                       "d3")]
               for i in range(2)]
    frame = load(spark, table, batches)
    before = live(table)
    out = run(spark, "delete", {"table": table.url, "where": "dt = 'd2' AND v > 20"})
    expected_mask = (frame.dt == "d2") & (frame.v > 20)
    assert out["rows_deleted"] == int(expected_mask.sum()) > 0
    assert rows_of(spark, table) == oracle(frame, expected_mask)  # rows with v NULL stay (predicate NULL)
    after = live(table)
    assert {p for p in before if p not in after} == {p for p, f in before.items() if f.partition == {"dt": "d2"}}
    assert all(f.partition == {"dt": "d2"} for p, f in after.items() if p not in before)

    frame = frame[~expected_mask.fillna(False).astype(bool)]
    d3 = [p for p, f in after.items() if f.partition == {"dt": "d3"}]
    gone = run(spark, "delete", {"table": table.url, "where": "dt = 'd3'"})  # partitions only: no file is read
    assert (gone["files_scanned"], gone["files_dropped"], gone["files_rewritten"]) == (len(d3), len(d3), 0)
    assert rows_of(spark, table) == oracle(frame, frame.dt == "d3")


def test_a_bucketed_table_keeps_each_files_bucket_and_sort_and_its_bucketed_read_stays_exact(
        spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"],
                                          "bucket": {"columns": ["k"], "count": 4, "sort_columns": ["v"]}})
    frame = load(spark, table, [[(k, (k * 7919 + b) % 100, d) for d in ("d1", "d2") for k in range(b * 50, b * 50 + 50)]
                                for b in range(2)])
    with session_conf(spark):
        shuffles_before = shuffles(plan_text(table.read(spark).groupBy("k").count()))
    before = live(table)
    out = run(spark, "delete", {"table": table.url, "filters": [["k", "in", [3, 60, 61]]]})
    after = live(table)
    removed = {p: f for p, f in before.items() if p not in after}
    added = {p: f for p, f in after.items() if p not in before}
    assert out["files_rewritten"] == len(removed) == len(added) > 0
    assert {(f.partition_key(), f.bucket, f.bucketing) for f in added.values()} <= \
        {(f.partition_key(), f.bucket, f.bucketing) for f in removed.values()}
    file_rows_in_their_bucket(spark, table)
    for path, new in added.items():  # same bucket, same order (sorted by v), minus the deleted rows
        old = next(p for p, f in removed.items() if (f.partition, f.bucket) == (new.partition, new.bucket)
                   and set(column(table, path, "k")) <= set(column(table, p, "k")))
        keep = [i for i, k in enumerate(column(table, old, "k")) if k not in (3, 60, 61)]
        assert column(table, path, "k") == [column(table, old, "k")[i] for i in keep]
        assert column(table, path, "v") == sorted(column(table, path, "v"))
    expected = oracle(frame, frame.k.isin([3, 60, 61]))
    with session_conf(spark):
        bucketed = table.read(spark)
        assert sorted((tuple(r) for r in bucketed.collect()), key=repr) == expected
        assert "Bucketed: true" in plan_text(bucketed)
        assert shuffles(plan_text(bucketed.groupBy("k").count())) == shuffles_before == 0
        assert "SelectedBucketsCount: 1 out of 4" in plan_text(bucketed.where("k = 7"))


def test_a_clustered_table_keeps_the_order_of_each_rewritten_file(spark: Any, table_path: str) -> None:
    from pyspark.sql import functions as F

    table = LakeTable.create(table_path, {"schema": "id BIGINT, x BIGINT, dt STRING", "partition_by": ["dt"]})
    for i in range(4):
        table.write(spark.range(i * 300, (i + 1) * 300, 1, 1).select(
            "id", (F.rand(i) * 1000).cast("bigint").alias("x"),
            F.when(F.col("id") % 2 == 0, "d1").otherwise("d2").alias("dt")))
    plan = run(None, "schedule_clustering", {"table": table.url, "small_file_limit_bytes": 10**12,
                                             "max_bytes_per_group": 10**12, "layout": "ZORDER",
                                             "sort_columns": ["x", "id"]})
    run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"]})
    frame: pd.DataFrame = pd.DataFrame(table.read(spark).toPandas())
    before = live(table)
    out = run(spark, "delete", {"table": table.url, "where": "x BETWEEN 100 AND 400 AND id % 3 = 0"})
    mask = frame.x.between(100, 400) & (frame.id % 3 == 0)
    assert out["rows_deleted"] == int(mask.sum()) > 0
    assert sorted(tuple(r) for r in table.read(spark).collect()) == \
        sorted(map(tuple, frame[~mask].itertuples(index=False)))
    after = live(table)
    for path, new in ((p, f) for p, f in after.items() if p not in before):
        old = next(p for p, f in before.items() if p not in after and f.partition == new.partition)
        old_rows = pq.read_table(table.storage.path(old), columns=["id", "x"]).to_pylist()
        kept = [r for r in old_rows if not (100 <= r["x"] <= 400 and r["id"] % 3 == 0)]
        assert pq.read_table(table.storage.path(path), columns=["id", "x"]).to_pylist() == kept  # curve order kept


def test_a_retry_is_a_no_op(spark: Any, plain: tuple[LakeTable, pd.DataFrame]) -> None:
    table, frame = plain
    spec = {"table": table.url, "where": "k < 10", "request_id": "dag/forget/run-1/-1"}
    first = run(spark, "delete", spec)
    again = run(spark, "delete", spec)
    assert again["already_committed"] is True and again["seq"] == first["seq"] == table.commit_log.head()
    assert rows_of(spark, table) == oracle(frame, frame.k < 10)
    with pytest.raises(LakeSpecError, match="request_id"):  # the same id with another predicate is no retry
        run(spark, "delete", {**spec, "where": "k < 20"})


@pytest.fixture
def partitioned(spark: Any, table_path: str) -> tuple[LakeTable, pd.DataFrame]:
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    frame = load(spark, table, [[(k, k, dt) for k in range(20) for dt in ("d1", "d2")]])
    return table, frame


def append_during_commit(monkeypatch: pytest.MonkeyPatch, job: Any) -> list[Any]:
    """Run `job` (a whole concurrent commit) once, at the delete's `before_commit` step: after it read and wrote."""
    ran: list[Any] = []
    real = faults.reach

    def reach(name: str) -> None:
        if name == "before_commit" and not ran:
            ran.append("running")  # (the job's own commit reaches this step too)
            ran[0] = job()
        real(name)

    monkeypatch.setattr(faults, "reach", reach)
    return ran


def test_an_append_of_matching_rows_between_the_read_and_the_commit_conflicts(
        spark: Any, partitioned: tuple[LakeTable, pd.DataFrame], monkeypatch: pytest.MonkeyPatch) -> None:
    table, frame = partitioned
    spec = {"table": table.url, "filters": [["dt", "=", "d1"], ["k", "<", 5]]}
    late = spark.createDataFrame([(3, 999, "d1")], SCHEMA)
    ran = append_during_commit(monkeypatch, lambda: table.write(late))
    with pytest.raises(LakeCommitConflict, match="could have seen"):
        run(spark, "delete", spec)
    monkeypatch.undo()
    assert ran and ran[0] != "running"
    assert rows_of(spark, table) == sorted([*oracle(frame, frame.k < -1), (3, 999, "d1")], key=repr)  # nothing lost
    run(spark, "delete", spec)  # the retry reads the appended row too: it does not survive
    frame = pd.concat([frame, pd.DataFrame([(3, 999, "d1")], columns=["k", "v", "dt"])])
    assert rows_of(spark, table) == oracle(frame, (frame.dt == "d1") & (frame.k < 5))


def test_an_append_to_another_partition_does_not_conflict(
        spark: Any, partitioned: tuple[LakeTable, pd.DataFrame], monkeypatch: pytest.MonkeyPatch) -> None:
    table, frame = partitioned
    other = spark.createDataFrame([(3, 999, "d9")], SCHEMA)
    ran = append_during_commit(monkeypatch, lambda: table.write(other))
    run(spark, "delete", {"table": table.url, "filters": [["dt", "=", "d1"], ["k", "<", 5]]})  # (a `where` naming
    monkeypatch.undo()  # data columns reads every file: then an append anywhere conflicts)
    frame = pd.concat([frame, pd.DataFrame([(3, 999, "d9")], columns=["k", "v", "dt"])])
    assert ran and ran[0] != "running" and rows_of(spark, table) == oracle(frame, (frame.dt == "d1") & (frame.k < 5))


HOSTILE = [
    ("k IN (SELECT id FROM parquet.`{other}`)", "subquery"),
    ("k = (SELECT max(k) FROM VALUES (1) AS t(k))", "subquery"),
    ("EXISTS (SELECT 1)", "subquery"),
    ("reflect('java.lang.Thread', 'sleep', 1L) IS NULL", "reflect"),
    ("java_method('java.lang.String', 'valueOf', k) = '1'", "java_method"),
    ("lake_test_udf(k)", "not a built-in"),
    ("k + 1", "not a boolean"),
    ("nope = 1", "column the table does not have"),
    ("_metadata.file_path LIKE '%'", "column the table does not have"),
    ("rand() < 0.5", "not deterministic"),
    ("dt < current_date()", "clock"),
    ("k = 1; DROP TABLE x", "not one SQL expression"),
    ("true) OR (k = 1", "not one SQL expression"),
]


@pytest.mark.parametrize(("where", "problem"), HOSTILE, ids=[h[1] + str(i) for i, h in enumerate(HOSTILE)])
def test_hostile_predicates_are_refused_before_anything_is_written(
        spark: Any, partitioned: tuple[LakeTable, pd.DataFrame], tmp_path: Path, where: str, problem: str) -> None:
    table, _ = partitioned
    other = tmp_path / "other.parquet"
    spark.range(3).write.parquet(str(other))
    spark.udf.register("lake_test_udf", lambda k: k > 3, "boolean")
    head, files = table.commit_log.head(), parquet_files_on_disk(table.url)
    with pytest.raises(LakeSpecError, match=problem) as err:
        run(spark, "delete", {"table": table.url, "where": where.format(other=other)})
    assert err.value.field == "where" and "Fix:" in str(err.value) and "nothing was deleted" in str(err.value).lower()
    assert table.commit_log.head() == head and parquet_files_on_disk(table.url) == files


def test_a_primary_key_table_and_an_empty_filter_list_are_refused(spark: Any, tmp_path: Path) -> None:
    pk = LakeTable.create(str(tmp_path / "pk"), {"schema": "id BIGINT NOT NULL, n BIGINT", "primary_key": ["id"],
                                                 "bucket": {"columns": ["id"], "count": 2}})
    with pytest.raises(LakeSpecError, match=r"keys.*version"):
        run(spark, "delete", {"table": pk.url, "where": "id = 1"})
    with pytest.raises(LakeSpecError, match="empty"):
        run(spark, "delete", {"table": pk.url, "filters": []})


def test_after_clean_no_data_file_holds_a_deleted_row(spark: Any, partitioned: tuple[LakeTable, pd.DataFrame]) -> None:
    table, frame = partitioned
    run(spark, "delete", {"table": table.url, "filters": [["k", "in", [4, 11]]], "request_id": "forget"})
    on_disk = {p for p in parquet_files_on_disk(table.url)}
    assert any(4 in column(table, p, "k") for p in on_disk)  # still there: time travel may read it
    force: dict[str, Any] = {"force": True} if "force" in inspect.signature(table.clean).parameters else {}
    assert table.clean(retain_hours=0, **force) is not None  # (force: past a minimum retention, if clean has one)
    for path in parquet_files_on_disk(table.url):  # every Parquet data file left under the table's root
        assert not {4, 11} & set(column(table, path, "k")), path
    assert rows_of(spark, table) == oracle(frame, frame.k.isin([4, 11]))
