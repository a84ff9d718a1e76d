"""Compaction writes a partition's delete tombstones into files of their own (issue 34: another engine reads the
base files holding data as the table, and never a tombstone): every base file is all data (`__lake_v` null count
0) or all tombstones (null count = rows), by its stats and by its rows; the merged reads, a late backfill below a
delete and the compactions that fold the tombstones back give the same rows as before; a compaction right after
one has nothing to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert import compact as compact_module
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.physical import UNKNOWN_NEWEST
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.upsert.oracle import merge_with_deletes
from tests.lake.upsert.test_legacy_tables import Legacy
from tests.lake.upsert.test_versioned_deletes import (
    COLUMNS,
    FOLDED,
    check,
    delete_keys,
    frame,
    make_table,
    spark_df,
)

PARTED = "k BIGINT NOT NULL, a STRING, n BIGINT, dt STRING"


def base_files(table: LakeTable) -> list[tuple[Any, list[dict[str, Any]]]]:
    """The live files of `table` with their rows, read with pyarrow."""
    return [(f, pq.read_table(table.storage.path(f.path)).to_pylist()) for f in table.snapshot().files]


def kinds(table: LakeTable) -> dict[str, list[Any]]:
    """The live files as data files and tombstone files, each checked whole: by its rows and by its stats."""
    out: dict[str, list[Any]] = {"data": [], "tombstones": []}
    for data_file, rows in base_files(table):
        versions = [r["__lake_v"] for r in rows]
        stats = data_file.stats["__lake_v"]
        if all(v is None for v in versions):
            assert stats.null_count == data_file.rows == len(rows), data_file.path
            assert all(r["__lake_d"] is not None and r["a"] is None and r["n"] is None for r in rows)
            out["tombstones"].append(data_file)
        else:
            assert None not in versions, f"{data_file.path} mixes tombstones and data: {rows}"
            assert stats.null_count == 0, data_file.path
            out["data"].append(data_file)
    return out


def keys_of(table: LakeTable, files: list[Any]) -> set[tuple[Any, ...]]:
    return {(r["k"], f.partition["dt"]) for f in files for r in pq.read_table(table.storage.path(f.path)).to_pylist()}


def parted(path: Path) -> LakeTable:
    return LakeTable.create(str(path), {"schema": PARTED, "primary_key": ["k"], "partition_by": ["dt"],
                                        "bucket": {"columns": ["k"], "count": 2}, "merge_operators": {"n": "sum"}})


def upsert(spark: Any, table: LakeTable, version: int, rows: list[tuple[Any, ...]]) -> None:
    versioned_upsert(table, spark.createDataFrame(rows, "k BIGINT, a STRING, n BIGINT, dt STRING"), version=version)


def merged_rows(spark: Any, table: LakeTable) -> list[tuple[Any, ...]]:
    spark_rows = sorted(tuple(r) for r in table.read(spark).collect())
    arrow_rows = sorted(tuple(r.values()) for r in table.to_arrow().to_pylist())
    assert spark_rows == arrow_rows  # the Spark merge and the pyarrow one (`to_arrow`) agree
    return spark_rows


def write_dirs(files: Any) -> set[str]:
    return {f.path.split("/")[1] for f in files}


def test_tombstones_are_written_into_files_of_their_own(spark: Any, tmp_path: Path) -> None:
    table = parted(tmp_path / "t")
    upsert(spark, table, 1, [(k, f"a{k}", k, f"d{k % 2}") for k in range(12)])
    upsert(spark, table, 2, [(k, f"b{k}", 10, f"d{k % 2}") for k in range(0, 12, 3)])
    run(spark, "delete", {"table": table.url, "keys": [{"k": 1, "dt": "d1"}, {"k": 3, "dt": "d1"},
                                                      {"k": 4, "dt": "d0"}, {"k": 99, "dt": "d1"}], "version": 3})
    upsert(spark, table, 4, [(3, "back", 7, "d1")])  # deleted, then upserted again: data, not a tombstone
    before = merged_rows(spark, table)
    done = compact(table, spark)
    assert done.entry is not None  # one replace commit added both kinds of file
    assert {f.path for f in table.snapshot().files} == {f.path for f in done.entry.added}
    found = kinds(table)
    assert keys_of(table, found["tombstones"]) == {(1, "d1"), (4, "d0"), (99, "d1")}
    assert (3, "d1") in keys_of(table, found["data"])
    assert done.entry.metrics["tombstone_files"] == len(found["tombstones"]) >= 2  # one per partition and bucket
    for kind in found.values():  # one file per partition and bucket of each kind
        assert len({(f.partition["dt"], f.bucket) for f in kind}) == len(kind)
    assert done.entry.metrics["write_exchanges"] == 0  # the writes of the kept merge move no row
    assert done.entry.metrics["tombstones"] == 3
    assert write_dirs(found["data"]) != write_dirs(found["tombstones"])  # two writes of the one instant
    for data_file in table.snapshot().files:  # the table's bucketed file names, the key's bucket
        assert data_file.path.endswith(f"_{data_file.bucket:05d}.c000.snappy.parquet")
    assert merged_rows(spark, table) == before
    plan = table.read(spark)._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" not in plan and "Bucketed: true" in plan  # still merged where it is read


def test_a_compaction_without_deletes_writes_once(spark: Any, tmp_path: Path) -> None:
    table = parted(tmp_path / "t")
    for version in (1, 2):
        upsert(spark, table, version, [(k, f"a{version}", k, f"d{k % 2}") for k in range(8)])
    sc = spark.sparkContext
    sc.setJobGroup("compact-no-deletes", "compact-no-deletes")
    try:
        done = compact(table, spark)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert done.entry is not None and "tombstone_files" not in done.entry.metrics
    assert len(write_dirs(done.entry.added)) == 1  # one write: no second pass over the rows
    # the one Spark job it ran before tombstones got files of their own (measured on both)
    assert len(sc.statusTracker().getJobIdsForGroup("compact-no-deletes")) == 1
    assert all(f.stats["__lake_v"].null_count == 0 for f in table.snapshot().files)


def test_a_second_compaction_right_after_has_nothing_to_do(spark: Any, tmp_path: Path) -> None:
    table = parted(tmp_path / "t")
    upsert(spark, table, 1, [(k, f"a{k}", k, f"d{k % 2}") for k in range(8)])
    run(spark, "delete", {"table": table.url, "keys": [{"k": k, "dt": f"d{k % 2}"} for k in (0, 1, 2, 3, 5)],
                          "version": 2})
    assert compact(table, spark).entry is not None
    files = {f.path for f in table.snapshot().files}
    assert len(files) > 4  # data and tombstone files: more than the 2 buckets of each of the 2 partitions
    assert compact(table, spark).entry is None  # the tombstone files are not deltas
    assert {f.path for f in table.snapshot().files} == files
    # a delta lands in one partition: that one is compacted as before, tombstones folded back in
    upsert(spark, table, 3, [(4, "new", 1, "d0"), (6, "new", 1, "d0")])
    before = merged_rows(spark, table)
    done = compact(table, spark)
    assert done.entry is not None
    assert {f.partition["dt"] for f in done.entry.added} == {"d0"}
    assert all(f.partition["dt"] == "d0" for f in table.snapshot().files if f.path not in files)
    assert merged_rows(spark, table) == before
    kinds(table)
    assert compact(table, spark).entry is None
    # a versioned delete's delta file holds only delete rows, like a tombstone file: it is a delta, compacted
    assert {f.bucket for f in table.snapshot().files if f.partition["dt"] == "d1"} == {0, 1}  # 2 files, as before
    run(spark, "delete", {"table": table.url, "keys": [{"k": 7, "dt": "d1"}], "version": 4})  # a third
    done = compact(table, spark)
    assert done.entry is not None and {f.partition["dt"] for f in done.entry.added} == {"d1"}
    assert (7, "d1") in keys_of(table, kinds(table)["tombstones"])
    assert compact(table, spark).entry is None


def test_a_late_backfill_stays_deleted_across_two_compactions(spark: Any, tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FOLDED)
    events = [(5, frame([{"k": 1, "a": "a5", "tag": "t", "n": 1, "hi": 3}, {"k": 2, "a": "b5", "tag": "x", "n": 2,
                                                                           "hi": 2}]))]
    versioned_upsert(table, spark_df(spark, events[0][1]), version=5)
    delete_keys(spark, table, [1, 99], 7)
    events.append((7, frame([{"k": 1, "_delete": True}, {"k": 99, "_delete": True}])))
    compact(table, spark)
    tombstones = kinds(table)["tombstones"]
    assert {r["k"] for f in tombstones for r in pq.read_table(table.storage.path(f.path)).to_pylist()} == {1, 99}
    late = frame([{"k": 1, "a": "late6", "n": 100}, {"k": 99, "a": "late"}])
    versioned_upsert(table, spark_df(spark, late), version=6)  # below the delete: stays deleted
    events.append((6, late))
    expected = merge_with_deletes(events, "k", COLUMNS, operators=FOLDED, null_values={"tag": ["null"]})
    check(spark, table, expected)
    second = compact(table, spark)  # folds the tombstone files and the late delta back
    assert second.entry is not None and set(second.entry.removed) >= {f.path for f in tombstones}
    found = kinds(table)
    assert {r["k"] for f in found["tombstones"] for r in pq.read_table(table.storage.path(f.path)).to_pylist()} == \
        {1, 99}
    assert "late" not in " ".join(str(r) for f, rows in base_files(table) for r in rows)  # dropped, not kept
    check(spark, table, expected)
    assert [r[0] for r in merged_rows(spark, table)] == [2]
    newer = frame([{"k": 1, "n": 5}])
    versioned_upsert(table, spark_df(spark, newer), version=8)  # a newer version brings the key back
    events.append((8, newer))
    compact(table, spark)
    check(spark, table, merge_with_deletes(events, "k", COLUMNS, operators=FOLDED, null_values={"tag": ["null"]}))
    assert {r["k"] for f in kinds(table)["tombstones"] for r in
            pq.read_table(table.storage.path(f.path)).to_pylist()} == {99}


def test_rows_of_no_known_version_are_data_not_tombstones(spark: Any, tmp_path: Path) -> None:
    """A table written before versioned deletes has a key upserted with no value (no stamp at all): compacted, its
    row holds data of no known version, and its `__lake_v` is UNKNOWN_NEWEST, never NULL (which marks a
    tombstone): another engine reading the data files gets the key."""
    legacy = Legacy("last", tmp_path)
    compact(legacy.table, spark)
    found = kinds(legacy.table)
    assert not found["tombstones"]
    rows = {r["k"]: r for _, file_rows in base_files(legacy.table) for r in file_rows}
    assert rows[9]["__lake_v"] == UNKNOWN_NEWEST and rows[9]["__lake_d"] is None
    legacy.check(spark)
    legacy.refused(spark, [9], 55, r"key \(k=9\).*newest version is unknown")  # as before the compaction
    legacy.delete(spark, [9, 3], 65)  # at or above every version the table applied: all of it goes
    legacy.upsert(spark, 62, [{"k": 9, "a": "late"}])
    compact(legacy.table, spark)
    assert (9, None) in {(r["k"], None) for f in kinds(legacy.table)["tombstones"]
                         for r in pq.read_table(legacy.table.storage.path(f.path)).to_pylist()}
    legacy.check(spark)


def test_tombstone_files_are_known_by_their_stats_without_parquet_null_counts(spark: Any, tmp_path: Path) -> None:
    """With Parquet statistics turned off a footer has no null counts (read as 0): the compaction still records
    every row of a tombstone file as NULL in `__lake_v`, which the write made so."""
    table = parted(tmp_path / "t")
    upsert(spark, table, 1, [(k, f"a{k}", k, "d0") for k in range(6)])
    run(spark, "delete", {"table": table.url, "keys": [{"k": 1, "dt": "d0"}, {"k": 2, "dt": "d0"}], "version": 2})
    spark.conf.set("parquet.column.statistics.enabled", "false")
    try:
        compact(table, spark)
    finally:
        spark.conf.unset("parquet.column.statistics.enabled")
    found = kinds(table)
    assert keys_of(table, found["tombstones"]) == {(1, "d0"), (2, "d0")}


def test_a_base_file_mixing_tombstones_and_data_is_compacted_again(spark: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A table compacted before tombstones got files of their own (the single write, as then) has base files of
    both; the next compaction splits them, though no delta landed since."""
    table = parted(tmp_path / "t")
    upsert(spark, table, 1, [(k, f"a{k}", k, "d0") for k in range(6)])
    run(spark, "delete", {"table": table.url, "keys": [{"k": 1, "dt": "d0"}, {"k": 2, "dt": "d0"}], "version": 2})
    with monkeypatch.context() as patched:
        patched.setattr(compact_module, "has_deletes", lambda files: False)  # the release before: one write
        patched.setattr(compact_module, "_by_construction", lambda files, tombstones: files)
        compact(table, spark)
    assert any(0 < f.stats["__lake_v"].null_count < f.rows for f in table.snapshot().files)
    before = merged_rows(spark, table)
    assert compact(table, spark).entry is not None
    assert keys_of(table, kinds(table)["tombstones"]) == {(1, "d0"), (2, "d0")}
    assert merged_rows(spark, table) == before
    assert compact(table, spark).entry is None


def test_a_base_file_with_data_of_no_version_from_before_is_compacted_again(spark: Any, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The release before wrote a key of no known version with a NULL `__lake_v` beside rows with versions (no
    delete anywhere): the next compaction rewrites it with UNKNOWN_NEWEST, so no base file has NULL `__lake_v` on
    rows with data."""
    from pyspark.sql import functions as F

    legacy = Legacy("last", tmp_path)
    merged = compact_module.merged

    def as_before(*args: Any, **kwargs: Any) -> Any:
        rows = merged(*args, **kwargs)
        return rows.withColumn("__lake_v", F.when(F.col("__lake_v") != UNKNOWN_NEWEST, F.col("__lake_v")))

    with monkeypatch.context() as patched:
        patched.setattr(compact_module, "merged", as_before)
        patched.setattr(compact_module, "_by_construction", lambda files, tombstones: files)
        compact(legacy.table, spark)
    assert any(0 < f.stats["__lake_v"].null_count < f.rows for f in legacy.table.snapshot().files)
    assert compact(legacy.table, spark).entry is not None
    assert not kinds(legacy.table)["tombstones"]
    legacy.check(spark)
    assert compact(legacy.table, spark).entry is None
