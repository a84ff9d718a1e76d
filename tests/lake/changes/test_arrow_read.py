"""The Arrow executor of a change window (`changes.arrow_read`, what the CLI and the Lake page read, no Spark): the
rows of real commits made by the real operations — an append, a copy-on-write delete that carries rows over, a
partition overwrite with the same rows, a clustering, duplicate rows; primary-key upserts with a late lower version,
a merged row that stays equal, an update, a versioned delete and a compaction — against rows written out by hand."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.changes.arrow_read import change_counts, changes_arrow, read_plan
from airflow_lake.lake.changes.window import change_window
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert

PLAIN = "id BIGINT, v STRING, dt STRING"
KEYED = "k BIGINT NOT NULL, v STRING"


def changes(table: LakeTable, start: int, end: int, columns: list[str] | None = None, *,
            against_spark: bool = False) -> list[tuple[Any, ...]]:
    """(values..., change type, commit seq) of changes(start, end], in the executor's order within a commit; with
    `against_spark` checked to be the rows, commit times (in microseconds) included, the Spark read
    `LakeTable.changes` returns (for the widest windows only: each costs a few Spark jobs)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    got = changes_arrow(table, change_window(table, start, end), columns)
    names = [*(columns or table.spec.column_names), "_change_type", "_commit_seq"]
    micros = got.column("_commit_time").cast(pa.int64()).to_pylist()
    arrow = [(*(row[n] for n in names), us) for row, us in zip(got.to_pylist(), micros, strict=True)]
    if not against_spark:
        return [r[:-1] for r in arrow]
    spark = SparkSession.getActiveSession()
    assert spark is not None
    read = table.changes(spark, start, end).select(*names, F.unix_micros("_commit_time"))
    assert sorted(arrow, key=repr) == sorted((tuple(r) for r in read.collect()), key=repr), (start, end)
    return [r[:-1] for r in arrow]


def by_commit(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows sorted within each commit (file order is Spark's): commit seq, change type, values."""
    return sorted(rows, key=lambda r: (r[-1], r[-2], repr(r)))


def test_a_plain_tables_changes_are_the_rows_each_commit_added_or_removed(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": PLAIN, "partition_by": ["dt"]})

    def write(rows: list[tuple[int, str, str]], **kwargs: Any) -> int:
        return table.write(spark.createDataFrame(rows, PLAIN).coalesce(1), **kwargs).seq

    assert write([(1, "a", "d1"), (2, "b", "d1"), (3, "c", "d2")]) == 1
    deleted = table.delete(spark, filters=[("id", "=", 2)])  # rewrites d1's file: (1, a) is carried over
    assert deleted is not None and deleted.seq == 2 and deleted.removed and deleted.added
    assert write([(3, "c", "d2")], mode="overwrite", partitions=[{"dt": "d2"}]) == 3  # the same rows again
    run(spark, "schedule_clustering", {"table": table.url, "min_commits": 1, "sort_columns": ["id"]})
    assert run(spark, "execute_clustering", {"table": table.url})["seq"] == 4
    assert write([(1, "a", "d1")]) == 5  # a second (1, a, d1): multisets, not sets
    assert table.delete(spark, filters=[("id", "=", 1)]).seq == 6  # type: ignore[union-attr]

    assert by_commit(changes(table, 0, 1)) == [(1, "a", "d1", "insert", 1), (2, "b", "d1", "insert", 1),
                                               (3, "c", "d2", "insert", 1)]
    assert changes(table, 1, 2) == [(2, "b", "d1", "delete", 2)]
    assert changes(table, 2, 3) == []  # an overwrite that wrote what was there
    clustering = change_window(table, 3, 4)
    assert clustering.skipped == (4,) and not clustering.commits
    assert changes(table, 3, 4) == [] and read_plan(table, clustering).bytes == 0  # nothing read at all
    assert changes(table, 4, 5) == [(1, "a", "d1", "insert", 5)]
    assert changes(table, 5, 6) == [(1, "a", "d1", "delete", 6), (1, "a", "d1", "delete", 6)]
    assert by_commit(changes(table, 0, 6, against_spark=True)) == [
        (1, "a", "d1", "insert", 1), (2, "b", "d1", "insert", 1), (3, "c", "d2", "insert", 1),
        (2, "b", "d1", "delete", 2), (1, "a", "d1", "insert", 5),
        (1, "a", "d1", "delete", 6), (1, "a", "d1", "delete", 6)]
    assert sorted(r[:4] for r in changes(table, -1, 5)) == [
        (1, "a", "d1", "insert"), (1, "a", "d1", "insert"), (3, "c", "d2", "insert")]  # the whole table, inserts

    window = change_window(table, 0, 6)
    assert change_counts(table, window) == {
        1: {"inserted": 3, "deleted": 0, "updated": 0}, 2: {"inserted": 0, "deleted": 1, "updated": 0},
        3: {"inserted": 0, "deleted": 0, "updated": 0}, 5: {"inserted": 1, "deleted": 0, "updated": 0},
        6: {"inserted": 0, "deleted": 2, "updated": 0}}
    got = changes_arrow(table, change_window(table, 1, 2), ["v"])
    assert got.schema == pa.schema([("v", pa.string()), ("_change_type", pa.string()), ("_commit_seq", pa.int64()),
                                    ("_commit_time", pa.timestamp("us", tz="UTC"))])
    (row,) = got.to_pylist()
    assert (row["v"], row["_change_type"], row["_commit_seq"]) == ("b", "delete", 2)
    assert row["_commit_time"].utcoffset() == dt.timedelta(0)
    assert row["_commit_time"].timestamp() == pytest.approx(table.commit_log.read(2).completed_at, abs=1e-6)


def test_columns_are_picked_after_the_difference(spark: Any, tmp_path: Path) -> None:
    """A rewrite that changes one column of a row is a delete and an insert, also when only other columns are
    asked for (picking columns first would cancel them out)."""
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, v STRING"})
    table.write(spark.createDataFrame([(1, "a")], "id BIGINT, v STRING"))
    table.write(spark.createDataFrame([(1, "b")], "id BIGINT, v STRING"), mode="overwrite")
    assert changes(table, 1, 2, ["id"], against_spark=True) == [(1, "delete", 2), (1, "insert", 2)]


def test_a_primary_key_tables_changes_are_net_per_key(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "pk"), {"schema": KEYED, "primary_key": ["k"],
                                                     "bucket": {"columns": ["k"], "count": 2}})

    def upsert(version: int, rows: list[tuple[int, str]]) -> int:
        return versioned_upsert(table, spark.createDataFrame(rows, KEYED), version=version).entry.seq

    assert upsert(5, [(1, "a"), (2, "b")]) == 1
    assert upsert(3, [(1, "old")]) == 2  # late and lower: the merged row stays (1, a)
    assert upsert(6, [(2, "b"), (3, "c")]) == 3  # key 2 merges to the row it had: no change
    assert upsert(7, [(1, "z")]) == 4
    deleted = table.delete_keys(spark, spark.createDataFrame([(2,)], "k BIGINT"), version=8)
    assert deleted is not None and deleted.seq == 5
    assert compact(table, spark).entry.seq == 6  # type: ignore[union-attr]

    assert changes(table, 0, 1) == [(1, "a", "insert", 1), (2, "b", "insert", 1)]
    assert changes(table, 1, 2) == []
    assert changes(table, 2, 3) == [(3, "c", "insert", 3)]
    assert changes(table, 3, 4) == [(1, "a", "update_preimage", 4), (1, "z", "update_postimage", 4)]
    assert changes(table, 4, 5) == [(2, "b", "delete", 5)]
    assert changes(table, 5, 6) == []  # compaction: data-free
    # net: key 2 came and went; each change is credited to the newest commit that wrote its key
    assert changes(table, 0, 6) == [(1, "z", "insert", 4), (3, "c", "insert", 3)]
    assert changes(table, 1, 5, against_spark=True) == [(1, "a", "update_preimage", 4), (1, "z", "update_postimage", 4),
                                    (2, "b", "delete", 5), (3, "c", "insert", 3)]
    assert [r[:3] for r in changes(table, -1, 6)] == [(1, "z", "insert"), (3, "c", "insert")]
    assert change_counts(table, change_window(table, 2, 5)) == {
        3: {"inserted": 1, "deleted": 0, "updated": 0}, 4: {"inserted": 0, "deleted": 0, "updated": 1},
        5: {"inserted": 0, "deleted": 1, "updated": 0}}
    assert change_counts(table, change_window(table, 1, 2)) == {2: {"inserted": 0, "deleted": 0, "updated": 0}}


def test_a_window_without_data_commits_reads_nothing(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, v STRING"})
    table.write(spark.createDataFrame([(1, "a")], "id BIGINT, v STRING"))
    table.alter_table([{"add": "w", "type": "bigint"}])
    table.alter_table([{"set_properties": {"user.x": "1"}}])
    window = change_window(table, 1, 3)
    assert window.empty and window.skipped == (2, 3) and read_plan(table, window).bytes == 0
    assert changes_arrow(table, window).num_rows == 0 and change_counts(table, window) == {}
    # a row written before a column was added reads NULL there
    assert changes(table, 0, 3) == [(1, "a", None, "insert", 1)]


def test_a_nan_carried_over_is_no_change(tmp_path: Path) -> None:
    """NaN != NaN in Python, yet a row holding NaN that a rewrite kept is no change (as Spark's set operations
    compare it). Files written with pyarrow: no Spark."""
    import pyarrow.parquet as pq

    from airflow_lake.lake.format.data_files import DataFile

    table = LakeTable.create(str(tmp_path / "t"), {"schema": "x DOUBLE, n BIGINT"})

    def commit(values: list[float], removed: list[str]) -> DataFile:
        txn = table.begin("replace" if removed else "commit", "delete" if removed else "write")
        rel = f"part-{txn.instant}-0.parquet"
        pq.write_table(pa.table({"x": pa.array(values, pa.float64()), "n": pa.array([1] * len(values))}),
                       table.storage.path(rel))
        added = DataFile(rel, {}, len(values), Path(table.storage.path(rel)).stat().st_size, instant=txn.instant)
        txn.commit(added=[added], removed=removed)
        return added

    first = commit([float("nan"), 1.0, float("nan")], [])
    commit([float("nan"), float("nan")], [first.path])
    got = changes_arrow(table, change_window(table, 1, 2)).to_pylist()
    assert [(r["x"], r["_change_type"]) for r in got] == [(1.0, "delete")]
    assert change_counts(table, change_window(table, 0, 2)) == {1: {"inserted": 3, "deleted": 0, "updated": 0},
                                                                2: {"inserted": 0, "deleted": 1, "updated": 0}}
