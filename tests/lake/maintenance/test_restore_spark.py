"""Restore with real Spark and real files: a plain table after clustering and a bad load, a primary-key table after
upserts and compaction (merged reads checked against the pandas oracle), then upserts of undone versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from airflow_lake.datagen import bdci
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from tests.lake.upsert.oracle import as_strings, bdci_expected

BIG = 1 << 30


def rows(spark: Any, path: str, as_of: int | None = None) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(path).read(spark, as_of=as_of).collect())


def write(spark: Any, path: str, start: int, count: int, days: tuple[str, ...] = ("d1", "d2")) -> None:
    from pyspark.sql import functions as F

    df = spark.range(start, start + count, 1, 1).select(
        F.col("id"), (F.col("id") * 7 % 1000).alias("x"),
        F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int")).alias("dt"))
    LakeTable.open(path).write(df)


def test_a_plain_table_restores_across_clustering_and_a_bad_load(spark: Any, table_path: str) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, x BIGINT, dt STRING", "partition_by": ["dt"]})
    for i in range(3):
        write(spark, table_path, i * 100, 100)
    good = LakeTable.open(table_path).commit_log.head()
    plan = run(None, "schedule_clustering", {"table": table_path, "small_file_limit_bytes": BIG,
                                             "max_bytes_per_group": BIG, "layout": "LINEAR", "sort_columns": ["x"],
                                             "min_commits": 1})
    clustered = run(spark, "execute_clustering", {"table": table_path, "plan_id": plan["plan_id"]})
    assert "files_after" in clustered, (plan, clustered)
    assert clustered["files_after"] < clustered["files_before"]
    after_clustering = LakeTable.open(table_path).commit_log.head()
    expected_clustered = rows(spark, table_path)
    write(spark, table_path, 10_000, 50, days=("d2", "d3"))  # the bad load
    assert len(rows(spark, table_path)) == 350

    undo = run(None, "restore", {"table": table_path, "to_seq": after_clustering, "request_id": "dag/undo/run/-1"})

    table = LakeTable.open(table_path)
    assert (undo["action"], undo["files_added"], undo["restored_to_seq"]) == ("restore", 0, after_clustering)
    assert rows(spark, table_path) == expected_clustered
    assert {f.path for f in table.snapshot().files} == {f.path for f in table.snapshot(after_clustering).files}
    assert len(rows(spark, table_path, as_of=undo["seq"] - 1)) == 350  # time travel before the restore
    # and back to before the clustering: its input files are re-added, its output removed
    back = table.restore(to_seq=good)
    assert back.entry is not None and back.entry.metrics["files_added"] == clustered["files_before"]
    assert rows(spark, table_path) == rows(spark, table_path, as_of=good) == expected_clustered
    assert {f.path for f in LakeTable.open(table_path).snapshot().files} == \
        {f.path for f in table.snapshot(good).files}


def merged(spark: Any, path: str, columns: list[str]) -> pd.DataFrame:
    return as_strings(LakeTable.open(path).read(spark).toPandas(), columns=columns)


def test_a_primary_key_table_restores_its_versions_after_upserts_and_compaction(spark: Any, table_path: str,
                                                                                tmp_path: Path) -> None:
    batches = bdci.generate(tmp_path / "src", 400, keys=500)
    LakeTable.create(table_path, bdci.table_spec(2))

    def upsert(version: int) -> dict[str, Any]:
        return run(spark, "versioned_upsert", {"table": table_path, "source": {"path": str(batches[version])},
                                               "version": version, "request_id": f"dag/upsert/{version}/-1"})

    def check(versions: list[int]) -> None:
        expected = bdci_expected(batches, versions)
        pd.testing.assert_frame_equal(merged(spark, table_path, list(expected.columns[1:])), expected)

    for version in (0, 3, 1):  # out of order
        upsert(version)
    before_7 = LakeTable.open(table_path).commit_log.head()  # "7": the versions the restore undoes are 2 and 4
    upsert(4)
    upsert(2)
    compacted = run(spark, "compact_upserts", {"table": table_path})
    assert compacted["files_removed"] > 0
    upsert(5)
    check([0, 1, 2, 3, 4, 5])

    restored = run(None, "restore", {"table": table_path, "to_seq": before_7})

    assert restored["versions_changed"] is True and restored["files_added"] > 0  # the compacted deltas are back
    check([0, 1, 3])
    assert sorted(LakeTable.open(table_path).state().versions or {}) == [0, 1, 3]
    # the undone versions apply again (not refused as duplicates), in any order, and merge right
    again_4 = upsert(4)
    assert again_4["already_committed"] is False and again_4["action"] == "upsert"
    upsert(2)
    check([0, 1, 2, 3, 4])
    same_1 = upsert(1)  # a version the restore kept is still applied: the same data again is a no-op
    assert same_1["already_committed"] is True
    compact = run(spark, "compact_upserts", {"table": table_path})
    assert compact["files_removed"] > 0
    check([0, 1, 2, 3, 4])
    # and the restore's own history: time travel to before it reads the six versions
    seq = restored["seq"]
    expected = bdci_expected(batches, [0, 1, 2, 3, 4, 5])
    got = as_strings(LakeTable.open(table_path).read(spark, as_of=seq - 1).toPandas(),
                     columns=list(expected.columns[1:]))
    pd.testing.assert_frame_equal(got, expected)
