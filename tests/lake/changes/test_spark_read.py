"""Reading changes with Spark (`lake.changes.spark_read`): carried-over rows are no change, layout-only commits read
no file, filters prune and filter, columns as the end snapshot has them, and the primary-key semantics (late lower
versions, versioned deletes, updates as pre- and post-images, the last commit that touched a key)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow_lake.jobs.runner import run
from airflow_lake.lake.changes.window import change_window
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert

PLAIN = "id BIGINT, v STRING, dt STRING"


def plain(spark: Any, path: Path) -> LakeTable:
    return LakeTable.create(str(path), {"schema": PLAIN, "partition_by": ["dt"]})


def frame(spark: Any, rows: list[tuple[Any, ...]], schema: str = PLAIN) -> Any:
    return spark.createDataFrame(rows, schema).coalesce(1)  # one file per partition


def changes(spark: Any, table: LakeTable, start: Any, end: Any = None, **kwargs: Any) -> list[tuple[Any, ...]]:
    """Rows of the change read without the commit time, sorted."""
    df = table.changes(spark, start, end, **kwargs).drop("_commit_time")
    return sorted(tuple(r) for r in df.collect())


def test_a_delete_of_one_row_of_fifty_is_one_delete_and_an_identical_overwrite_is_none(
        spark: Any, tmp_path: Path) -> None:
    table = plain(spark, tmp_path / "t")
    table.write(frame(spark, [(i, f"v{i}", "a") for i in range(50)]))
    assert len(table.snapshot().files) == 1
    entry = table.delete(spark, filters=[("id", "=", 17)])
    assert entry is not None and entry.metrics["rows_removed"] == 50  # the rewrite carried 49 rows over
    assert changes(spark, table, entry.seq - 1, entry.seq) == [(17, "v17", "a", "delete", entry.seq)]

    same = [(i, f"v{i}", "a") for i in range(50) if i != 17]
    over = table.write(frame(spark, same), mode="overwrite", partitions=[{"dt": "a"}])
    assert over.removed and over.added  # files replaced ...
    assert changes(spark, table, over.seq - 1, over.seq) == []  # ... rows not
    twice = table.write(frame(spark, [(1, "v1", "a"), (1, "v1", "a"), (2, "new", "a")]), mode="overwrite",
                        partitions=[{"dt": "a"}])
    found = changes(spark, table, twice.seq - 1, twice.seq)
    # 48 of the 49 rows go (id 1 stays once), a second copy of id 1 and a new id 2 come
    assert len(found) == 50 and found.count((1, "v1", "a", "insert", twice.seq)) == 1
    assert (1, "v1", "a", "delete", twice.seq) not in found
    assert (2, "new", "a", "insert", twice.seq) in found and (2, "v2", "a", "delete", twice.seq) in found
    when = table.changes(spark, twice.seq - 1, twice.seq).selectExpr("unix_micros(_commit_time)").first()[0]
    assert when == round(twice.completed_at * 1_000_000)  # the commit's completed_at


def test_a_clustering_window_gives_nothing_and_reads_no_file(spark: Any, tmp_path: Path) -> None:
    table = plain(spark, tmp_path / "t")
    for i in range(3):
        table.write(frame(spark, [(i * 10 + j, f"v{j}", "a") for j in range(5)]))
    plan = run(None, "schedule_clustering", {"table": table.url, "small_file_limit_bytes": 10**12,
                                             "max_bytes_per_group": 10**12, "min_commits": 0, "layout": "LINEAR",
                                             "sort_columns": ["v"]})
    run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"]})
    clustered = table.commit_log.read(table.commit_log.head())
    assert clustered.operation == "execute_clustering"
    assert clustered.removed and clustered.added
    for data_file in clustered.added:  # the clustering's own files are gone: a read of them would fail
        os.remove(table.storage.path(data_file.path))
    assert changes(spark, table, clustered.seq - 1, clustered.seq) == []
    window = change_window(table, 2, clustered.seq)  # the third append, then the clustering
    assert [c.seq for c in window.commits] == [3] and window.skipped == (clustered.seq,)
    found = changes(spark, table, 2, clustered.seq)  # reads the append's file only (removed, but kept)
    assert found == [(20 + j, f"v{j}", "a", "insert", 3) for j in range(5)]


def test_filters_prune_files_and_filter_rows(spark: Any, tmp_path: Path) -> None:
    table = plain(spark, tmp_path / "t")
    first = table.write(frame(spark, [(1, "x", "a"), (2, "y", "b"), (3, "z", "b")]))
    gone = [f for f in first.added if f.partition["dt"] == "b"]
    for data_file in gone:  # a filter on dt = 'a' must not open them
        os.remove(table.storage.path(data_file.path))
    assert changes(spark, table, 0, filters=[("dt", "=", "a")]) == [(1, "x", "a", "insert", 1)]
    assert changes(spark, table, 0, filters=[("dt", "=", "a"), ("id", ">", 1)]) == []  # a row-level filter too


def test_rows_read_in_the_end_snapshots_columns(spark: Any, tmp_path: Path) -> None:
    table = plain(spark, tmp_path / "t")
    table.write(frame(spark, [(1, "x", "a")]))
    table.alter_table([{"rename": "v", "to": "val"}, {"add": "w", "type": "bigint"}])
    table.write(frame(spark, [(2, "y", "a", 7)], "id BIGINT, val STRING, dt STRING, w BIGINT"))
    df = table.changes(spark, 0)
    assert df.columns == ["id", "val", "dt", "w", "_change_type", "_commit_seq", "_commit_time"]
    assert dict(df.dtypes)["_commit_seq"] == "bigint" and dict(df.dtypes)["_commit_time"] == "timestamp"
    assert sorted(tuple(r) for r in df.drop("_commit_time").collect()) == [
        (1, "x", "a", None, "insert", 1), (2, "y", "a", 7, "insert", 3)]
    assert changes(spark, table, 1, 2) == []  # the alter: no data


KEYED = "k BIGINT NOT NULL, a STRING, n BIGINT"


def keyed(path: Path) -> LakeTable:
    return LakeTable.create(str(path), {"schema": KEYED, "primary_key": ["k"],
                                        "bucket": {"columns": ["k"], "count": 2}})


def upsert(spark: Any, table: LakeTable, rows: list[tuple[Any, ...]], version: int, schema: str = KEYED) -> int:
    return versioned_upsert(table, spark.createDataFrame(rows, schema), version=version).entry.seq


def test_primary_key_changes_are_net_per_key(spark: Any, tmp_path: Path) -> None:
    table = keyed(tmp_path / "t")
    one = upsert(spark, table, [(1, "a1", 10), (2, "b1", 20), (3, "c1", 30)], version=5)
    assert changes(spark, table, 0, one) == [(1, "a1", 10, "insert", 1), (2, "b1", 20, "insert", 1),
                                             (3, "c1", 30, "insert", 1)]
    late = upsert(spark, table, [(1, "late", 0)], version=3)  # lower than what key 1 holds: the merge ignores it
    assert changes(spark, table, one, late) == []
    update = upsert(spark, table, [(2, "b2", 20)], version=7)
    assert changes(spark, table, late, update) == [(2, "b1", 20, "update_preimage", update),
                                                   (2, "b2", 20, "update_postimage", update)]
    same = upsert(spark, table, [(3, "c1", 30)], version=8)  # the same row again: no change
    assert changes(spark, table, update, same) == []
    deleted = table.delete_keys(spark, spark.createDataFrame([(1,), (9,)], "k bigint"), version=6).seq
    assert changes(spark, table, same, deleted) == [(1, "a1", 10, "delete", deleted)]  # key 9 never was there
    partial = upsert(spark, table, [(2, "b3")], version=9, schema="k BIGINT NOT NULL, a STRING")
    compacted = compact(table, spark).entry
    assert compacted is not None and change_window(table, partial, compacted.seq).empty
    assert changes(spark, table, partial, compacted.seq) == []  # compaction changes no merged row
    back = upsert(spark, table, [(1, "back", 1)], version=10)  # above the delete: key 1 is back
    # over the whole window: one net change per key, at the last data commit that touched it
    assert changes(spark, table, one, back) == [
        (1, "a1", 10, "update_preimage", back), (1, "back", 1, "update_postimage", back),
        (2, "b1", 20, "update_preimage", partial), (2, "b3", 20, "update_postimage", partial)]
    # filters apply to the merged rows at both ends: key 1 enters `n <= 5` (an insert), key 2 was never in it
    assert changes(spark, table, one, back, filters=[("n", "<=", 5)]) == [(1, "back", 1, "insert", back)]
    assert changes(spark, table, one, back, filters=[("k", "=", 2)]) == [
        (2, "b1", 20, "update_preimage", partial), (2, "b3", 20, "update_postimage", partial)]
    assert changes(spark, table, -1, back) == [(1, "back", 1, "insert", back), (2, "b3", 20, "insert", back),
                                               (3, "c1", 30, "insert", back)]
