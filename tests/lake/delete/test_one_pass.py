"""A delete whose stats narrow it to a few files rewrites them in ONE pass (no Spark job counting matches first),
and still replaces only the files that had a match: the rewrites of the others are deleted before the commit,
one matching nothing leaves no commit, no instant and no file behind, rows whose predicate is NULL stay, and
files keep their order. Real Spark, real files, a pandas oracle."""

from __future__ import annotations

from typing import Any

import pandas as pd

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format import instants
from tests.lake.delete.test_copy_on_write import SCHEMA, column, live, load, oracle, rows_of
from tests.support import parquet_files_on_disk

GROUP = "airflow-lake-one-pass-test"


def spark_jobs(spark: Any, action: Any) -> tuple[Any, int]:
    """`action()` and the number of Spark jobs it ran."""
    context = spark.sparkContext
    context.setJobGroup(GROUP, "counted")
    try:
        out = action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return out, len(context.statusTracker().getJobIdsForGroup(GROUP))


def test_a_point_delete_reads_its_file_in_one_spark_job_and_keeps_its_order(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": SCHEMA})
    # four files clustered by k (disjoint ranges), each in the order it was written (v descending)
    frame = load(spark, table, [[(k, 1000 - k, "d1") for k in range(i * 50, i * 50 + 50)] for i in range(4)])
    before = live(table)
    out, jobs = spark_jobs(spark, lambda: run(spark, "delete", {"table": table.url, "filters": [["k", "=", 77]]}))
    assert jobs == 1  # the rewrite; no job counting the matches first
    assert (out["files_scanned"], out["files_rewritten"], out["files_dropped"], out["rows_deleted"]) == (1, 1, 0, 1)
    assert out["count_pass"] is False
    assert rows_of(spark, table) == oracle(frame, frame.k == 77)
    after = live(table)
    (old,) = [p for p in before if p not in after]
    (new,) = [p for p in after if p not in before]
    assert column(table, new, "k") == [k for k in column(table, old, "k") if k != 77]
    assert parquet_files_on_disk(table.url) == set(before) | {new}


def test_only_files_with_a_match_are_replaced_and_null_predicates_keep_their_rows(spark: Any,
                                                                                 table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    rows = [(k, None if k == 7 and dt == "d1" else k % 3, dt) for dt in ("d1", "d2", "d3") for k in range(30)
            if not (dt == "d2" and k == 7)]  # d2's stats hold 7, its rows do not
    rows += [(7, 1, "d4"), (7, 1, "d4")]  # every row of d4 matches
    frame = load(spark, table, [rows])
    before = live(table)
    out = run(spark, "delete", {"table": table.url, "filters": [["k", "=", 7], ["v", "=", 1]]})
    mask = (frame.k == 7) & (frame.v == 1)  # d1's k=7 row has v NULL: the predicate is NULL, the row stays
    assert out["count_pass"] is False and out["files_scanned"] == 4
    assert (out["files_rewritten"], out["files_dropped"], out["rows_deleted"]) == (1, 1, int(mask.sum())) == (1, 1, 3)
    assert rows_of(spark, table) == oracle(frame, mask)
    after = live(table)
    replaced = {before[p].partition["dt"] for p in before if p not in after}
    assert replaced == {"d3", "d4"}  # d1 (a NULL) and d2 (no 7) are live as they were
    added = [p for p in after if p not in before]
    assert [after[p].partition["dt"] for p in added] == ["d3"]
    assert parquet_files_on_disk(table.url) == set(before) | set(added)  # the rewrites of d1 and d2 are gone


def test_a_one_pass_delete_matching_nothing_leaves_nothing_behind(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    frame = load(spark, table, [[(k, k, dt) for dt in ("d1", "d2") for k in range(0, 40, 2)]])  # even keys only
    before = live(table)
    head = table.commit_log.head()
    timeline = [(i.id, i.state) for i in table.timeline()]
    out = run(spark, "delete", {"table": table.url, "filters": [["k", "=", 7]]})  # in both files' stats
    assert out["noop"] is True and out["files_scanned"] == 2 and out["rows_deleted"] == 0
    assert table.commit_log.head() == head and [(i.id, i.state) for i in table.timeline()] == timeline
    assert not instants.pending(table.storage)
    assert parquet_files_on_disk(table.url) == set(before) and live(table) == before
    assert rows_of(spark, table) == oracle(frame, pd.Series(False, index=frame.index))
