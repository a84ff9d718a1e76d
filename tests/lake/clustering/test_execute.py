"""execute_clustering with real Spark and real files: same rows, fewer files, the layout in the footers,
retries, concurrent writers, buckets."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs.runner import run
from airflow_lake.lake import LakeTable, faults
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.lake.errors import LakePlanAborted
from airflow_lake.lake.format import instants
from tests.lake.buckets.bucket_helpers import file_rows_in_their_bucket

BIG = 10**12  # every file is "small", every group fits


def appends(spark: Any, path: str, batches: int, rows: int, *, days: tuple[str, ...] = ("d1", "d2")) -> None:
    from pyspark.sql import functions as F

    table = LakeTable.open(path)
    for i in range(batches):
        df = spark.range(i * rows, (i + 1) * rows, 1, 1).select(  # one task: one file per partition
            F.col("id"), (F.rand(i) * 1000).cast("bigint").alias("x"), (F.rand(100 + i) * 1000).alias("y"),
            F.concat(F.lit("http://www."), F.col("id").cast("string")).alias("s"),
            F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int")).alias("dt"))
        table.write(df)


def all_rows(spark: Any, path: str) -> list[Any]:
    rows = LakeTable.open(path).read(spark).collect()
    return sorted(rows, key=lambda r: tuple((v is None, "" if v is None else v) for v in r))


def schedule(path: str, **spec: Any) -> dict[str, Any]:
    return run(None, "schedule_clustering", {"table": path, "small_file_limit_bytes": BIG,
                                             "max_bytes_per_group": BIG, **spec})


@pytest.fixture
def table(spark: Any, table_path: str) -> LakeTable:
    LakeTable.create(table_path, {"schema": "id BIGINT, x BIGINT, y DOUBLE, s STRING, dt STRING",
                                  "partition_by": ["dt"]})
    appends(spark, table_path, 4, 500)
    return LakeTable.open(table_path)


def test_clustering_keeps_every_row_in_fewer_sorted_files(spark: Any, table: LakeTable) -> None:
    before = all_rows(spark, table.url)
    files_before = len(table.snapshot().files)
    plan = schedule(table.url, layout="LINEAR", sort_columns=["x"], request_id="plan-1")
    assert plan["input_files"] == files_before == 8 and plan["output_files"] == 2
    out = run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"], "request_id": "run-1"})
    assert (out["files_before"], out["files_after"], out["rows"]) == (8, 2, 2000)
    assert out["already_committed"] is False and out["action"] == "replace" and out["groups"] == 2
    assert all_rows(spark, table.url) == before
    snap = table.snapshot()
    assert len(snap.files) == 2 and pending_plans(table) == []
    for data_file in snap.files:  # each file is sorted by x
        xs = pq.read_table(table.storage.path(data_file.path), columns=["x"]).column("x").to_pylist()
        assert xs == sorted(xs) and data_file.stats["x"].min == xs[0]
    assert table.resolve(plan["plan_id"]) == out["seq"]  # the plan's id names its commit
    assert instants.pending(table.storage) == []

    again = run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"], "request_id": "run-1"})
    assert again["already_committed"] is True and again["seq"] == out["seq"]
    other = run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"], "request_id": "x"})
    assert other["already_committed"] is True and table.commit_log.head() == out["seq"]  # nothing written
    nothing = run(spark, "execute_clustering", {"table": table.url})
    assert nothing["plans_executed"] == 0 and nothing["noop"] is True


def test_oldest_and_all_pending_plans(spark: Any, table: LakeTable) -> None:
    first = schedule(table.url, partitions=[{"dt": "d1"}])["plan_id"]
    second = schedule(table.url, min_commits=0, partitions=[{"dt": "d2"}])["plan_id"]
    assert first < second
    oldest = run(spark, "execute_clustering", {"table": table.url})
    assert oldest["plan_id"] == first and [p.id for p in pending_plans(table)] == [second]
    appends(spark, table.url, 1, 100)
    third = schedule(table.url, min_commits=0, partitions=[{"dt": "d1"}])["plan_id"]
    both = run(spark, "execute_clustering", {"table": table.url, "which": "all", "request_id": "all"})
    assert both["plans_executed"] == 2 and [p["plan_id"] for p in both["plans"]] == [second, third]
    assert pending_plans(table) == []
    assert table.find_request("all#1") is not None  # each plan's commit under its own request id


def test_an_append_during_execution_lands_too(spark: Any, table: LakeTable, monkeypatch: Any) -> None:
    plan = schedule(table.url, layout="ZORDER", sort_columns=["x", "y"])
    original = faults.reach
    done: list[str] = []

    def append_at_commit(point: str) -> None:  # another writer commits while the clustering is about to
        if point == "before_commit" and not done:
            done.append(point)
            appends(spark, table.url, 1, 50, days=("d1",))
        original(point)

    monkeypatch.setattr(faults, "reach", append_at_commit)
    before = all_rows(spark, table.url)
    out = run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"]})
    assert done and out["files_before"] == 8
    rows = all_rows(spark, table.url)
    new = Counter(rows) - Counter(before)
    assert len(rows) == 2050 and not Counter(before) - Counter(rows)  # both landed: no row lost, none doubled
    assert sum(new.values()) == 50 and all(r["dt"] == "d1" for r in new)


def test_a_plan_whose_files_were_replaced_is_aborted_cleanly(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    plan = schedule(table.url)["plan_id"]
    from pyspark.sql import functions as F

    replacement = spark.range(0, 5, 1, 1).select(F.col("id"), F.lit(1).cast("bigint").alias("x"),
                                                 F.lit(1.0).alias("y"), F.lit("r").alias("s"), F.lit("d1").alias("dt"))
    table.write(replacement, mode="overwrite", partitions=[{"dt": "d1"}])
    expected = all_rows(spark, table.url)
    with pytest.raises(LakePlanAborted, match="replaced"):
        run(spark, "execute_clustering", {"table": table.url, "plan_id": plan})
    assert all_rows(spark, table.url) == expected
    assert pending_plans(table) == [] and plan in table.state().rolled_back
    with pytest.raises(LakePlanAborted, match="rolled back"):  # a retry says so again, writes nothing
        run(spark, "execute_clustering", {"table": table.url, "plan_id": plan})
    # planned again: d2's four files (d1's one new file alone is not worth a rewrite)
    assert schedule(table.url, min_commits=0)["input_files"] == 4


def test_an_overwrite_during_execution_aborts_the_plan_and_wins(spark: Any, table: LakeTable,
                                                                monkeypatch: Any) -> None:
    from pyspark.sql import functions as F

    plan = schedule(table.url)["plan_id"]
    original = faults.reach
    done: list[str] = []

    def overwrite_at_commit(point: str) -> None:
        if point == "before_commit" and not done:
            done.append(point)
            df = spark.range(3).select(F.col("id"), F.lit(7).cast("bigint").alias("x"), F.lit(7.0).alias("y"),
                                       F.lit("o").alias("s"), F.lit("d2").alias("dt"))
            LakeTable.open(table.url).write(df, mode="overwrite", partitions=[{"dt": "d2"}])
        original(point)

    monkeypatch.setattr(faults, "reach", overwrite_at_commit)
    with pytest.raises(LakePlanAborted, match="concurrent commit replaced"):
        run(spark, "execute_clustering", {"table": table.url, "plan_id": plan})
    rows = all_rows(spark, table.url)
    assert len([r for r in rows if r["dt"] == "d2"]) == 3 and len([r for r in rows if r["dt"] == "d1"]) == 1000
    assert plan in table.state().rolled_back and instants.pending(table.storage) == []
    on_disk = {str(p.relative_to(table.url)) for p in Path(table.url).rglob("*.parquet") if "_lake" not in p.parts}
    live = {f.path for f in table.snapshot().files}
    assert live <= on_disk and on_disk - live <= set(table.state().tombstones)  # the attempt's files are gone


def test_bucketed_tables_get_one_sorted_file_per_bucket(spark: Any, table_path: str) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, x BIGINT, y DOUBLE, s STRING, dt STRING",
                                  "partition_by": ["dt"], "bucket": {"columns": ["id"], "count": 4,
                                                                      "sort_columns": ["id"]}})
    appends(spark, table_path, 3, 400)
    table = LakeTable.open(table_path)
    before = all_rows(spark, table_path)
    assert len(table.snapshot().files) == 3 * 2 * 4
    plan = schedule(table_path, min_commits=3)
    assert plan["output_files"] == 8 and plan["groups"] == 2
    out = run(spark, "execute_clustering", {"table": table_path, "plan_id": plan["plan_id"]})
    assert out["files_after"] == 8
    assert all_rows(spark, table_path) == before
    snap = table.snapshot()
    assert sorted((f.partition["dt"], f.bucket) for f in snap.files) == [(d, b) for d in ("d1", "d2") for b in range(4)]
    file_rows_in_their_bucket(spark, table)
    for data_file in snap.files:
        ids = pq.read_table(table.storage.path(data_file.path), columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids)


def test_a_curve_inside_buckets_without_sort_columns(spark: Any, table_path: str) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, x BIGINT, y DOUBLE, s STRING, dt STRING",
                                  "partition_by": ["dt"], "bucket": {"columns": ["id"], "count": 2}})
    appends(spark, table_path, 2, 300)
    before = all_rows(spark, table_path)
    plan = schedule(table_path, min_commits=2, layout="HILBERT", sort_columns=["x", "y"], curve="DIRECT")
    out = run(spark, "execute_clustering", {"table": table_path, "plan_id": plan["plan_id"]})
    assert out["files_after"] == 4 and all_rows(spark, table_path) == before
    file_rows_in_their_bucket(spark, LakeTable.open(table_path))


def test_every_curve_type_orders_and_keeps_rows(spark: Any, table_path: str) -> None:
    from pyspark.sql import functions as F

    LakeTable.create(table_path, {"schema": "i INT, d DOUBLE, m DECIMAL(12,3), day DATE, ts TIMESTAMP, "
                                            "nts TIMESTAMP_NTZ, s STRING, f FLOAT"})
    table = LakeTable.open(table_path)
    for seed in range(2):
        df = spark.range(300).select(
            (F.rand(seed) * 1000 - 500).cast("int").alias("i"), F.when(F.col("id") % 7 == 0, None)
            .otherwise(F.randn(seed)).alias("d"), (F.rand(seed + 1) * 1e6).cast("decimal(12,3)").alias("m"),
            F.date_add(F.lit("2024-01-01").cast("date"), (F.rand(seed) * 300).cast("int")).alias("day"),
            F.timestamp_seconds((F.rand(seed) * 1e9).cast("bigint")).alias("ts"),
            F.timestamp_seconds((F.rand(seed + 3) * 1e9).cast("bigint")).cast("timestamp_ntz").alias("nts"),
            F.concat(F.lit("http://www."), (F.rand(seed) * 1e6).cast("bigint").cast("string")).alias("s"),
            F.rand(seed + 2).cast("float").alias("f"))
        table.write(df)
    before = all_rows(spark, table_path)
    for layout, curve in (("ZORDER", "DIRECT"), ("HILBERT", "SAMPLE"), ("ZORDER", "SAMPLE")):
        plan = schedule(table_path, min_commits=0, single_group_clustering=True, layout=layout, curve=curve,
                        sort_columns=["i", "d", "m", "day", "ts", "nts", "s", "f"])
        out = run(spark, "execute_clustering", {"table": table_path, "plan_id": plan["plan_id"]})
        assert out["rows"] == 600 and all_rows(spark, table_path) == before, (layout, curve)


# -- layout quality: files a 1% box query opens, judged by the Parquet footers ------------------------
def footer_ranges(table: LakeTable, columns: tuple[str, str]) -> list[tuple[Any, Any, Any, Any]]:
    out = []
    for data_file in table.snapshot().files:
        meta = pq.ParquetFile(table.storage.path(data_file.path)).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        ranges = []
        for column in columns:
            stats = [meta.row_group(g).column(names.index(column)).statistics for g in range(meta.num_row_groups)]
            ranges += [min(s.min for s in stats), max(s.max for s in stats)]
        out.append((ranges[0], ranges[1], ranges[2], ranges[3]))
    return out


def box_overlap(files: list[tuple[Any, Any, Any, Any]], boxes: list[tuple[Any, Any, Any, Any]]) -> float:
    """Mean share of files whose footer ranges intersect a box."""
    hits = [sum(1 for (a0, a1, b0, b1) in files if not (a1 < x0 or a0 > x1 or b1 < y0 or b0 > y1)) / len(files)
            for (x0, x1, y0, y1) in boxes]
    return sum(hits) / len(hits)


@pytest.mark.slow
def test_curves_cluster_two_uniform_columns_into_64_files_that_box_queries_skip(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    rng = random.Random(11)
    boxes = []
    for _ in range(50):  # each box covers 1% of the domain: 0.1 x 0.1 of [0, 1e6)^2
        x0, y0 = rng.uniform(0, 9e5), rng.uniform(0, 9e5)
        boxes.append((x0, x0 + 1e5, y0, y0 + 1e5))
    source = tmp_path / "source"
    spark.range(256_000, numPartitions=4).select(
        (F.rand(1) * 1e6).cast("bigint").alias("x"), (F.rand(2) * 1e6).cast("bigint").alias("y"),
        F.sha1(F.col("id").cast("string")).substr(1, 20).alias("p")).write.parquet(str(source))
    overlap = {}
    for layout, curve, columns in (("LINEAR", "SAMPLE", ["x"]), ("ZORDER", "SAMPLE", ["x", "y"]),
                                   ("HILBERT", "SAMPLE", ["x", "y"]), ("ZORDER", "DIRECT", ["x", "y"]),
                                   ("HILBERT", "DIRECT", ["x", "y"])):
        path = str(tmp_path / f"{layout}-{curve}")
        LakeTable.create(path, {"schema": "x BIGINT, y BIGINT, p STRING"}).write(spark.read.parquet(str(source)))
        table = LakeTable.open(path)
        total = sum(f.bytes for f in table.snapshot().files)
        plan = schedule(path, min_commits=1, layout=layout, curve=curve, sort_columns=columns,
                        target_file_max_bytes=-(-total // 64))
        assert plan["output_files"] == 64
        run(spark, "execute_clustering", {"table": path, "plan_id": plan["plan_id"]})
        files = footer_ranges(table, ("x", "y"))
        assert len(files) == 64
        overlap[f"{layout} {curve}"] = box_overlap(files, boxes)
    print("share of files a 1% box query opens:", {k: f"{v:.1%}" for k, v in overlap.items()})
    assert overlap["ZORDER SAMPLE"] <= 0.10 and overlap["ZORDER DIRECT"] <= 0.10
    assert overlap["HILBERT SAMPLE"] <= 0.09 and overlap["HILBERT DIRECT"] <= 0.09
    # the aim (8% / 7%): file cuts on curve-cell borders give the 8 x 8 grid's ~5%
    assert overlap["ZORDER SAMPLE"] <= 0.08 and overlap["HILBERT SAMPLE"] <= 0.07
    assert overlap["LINEAR SAMPLE"] > overlap["ZORDER SAMPLE"]  # a sort on x alone: ~11% (reported)


@pytest.mark.slow
def test_sample_beats_direct_on_strings_with_a_shared_prefix(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    letters = "abcdefghijklmnopqrstuvwxyz"
    source = tmp_path / "source"
    spark.range(100_000, numPartitions=2).select(
        (F.rand(3) * 1e6).cast("bigint").alias("x"),
        F.concat(F.lit("http://www."), *[F.substring(F.lit(letters), (F.rand(10 + i) * 26).cast("int") + 1, 1)
                                         for i in range(8)]).alias("s")).write.parquet(str(source))
    values = sorted(r["s"] for r in spark.read.parquet(str(source)).select("s").collect())
    rng = random.Random(5)
    boxes = []
    for _ in range(50):  # 10% of the x range by 10% of the strings by rank: 1% of the domain
        x0, r0 = rng.uniform(0, 9e5), rng.randrange(0, int(len(values) * 0.9))
        boxes.append((x0, x0 + 1e5, values[r0], values[r0 + len(values) // 10]))
    overlap = {}
    for curve in ("DIRECT", "SAMPLE"):
        path = str(tmp_path / curve)
        LakeTable.create(path, {"schema": "x BIGINT, s STRING"}).write(spark.read.parquet(str(source)))
        table = LakeTable.open(path)
        total = sum(f.bytes for f in table.snapshot().files)
        plan = schedule(path, min_commits=1, layout="ZORDER", curve=curve, sort_columns=["x", "s"],
                        target_file_max_bytes=-(-total // 32))
        run(spark, "execute_clustering", {"table": path, "plan_id": plan["plan_id"]})
        overlap[curve] = box_overlap(footer_ranges(table, ("x", "s")), boxes)
    print("ZORDER(x, s) with a shared 'http://www.' prefix, share of files opened:",
          {k: f"{v:.1%}" for k, v in overlap.items()})
    assert overlap["SAMPLE"] < overlap["DIRECT"]


def test_reads_filtered_on_the_clustered_columns_skip_files_and_say_so(spark: Any, table: LakeTable,
                                                                       tmp_path: Path) -> None:
    total = sum(f.bytes for f in table.snapshot().files if f.partition["dt"] == "d1")
    plan = schedule(table.url, layout="LINEAR", sort_columns=["x"], partitions=[{"dt": "d1"}],
                    target_file_max_bytes=-(-total // 4))
    run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"]})
    scan = table.scan(filters=[["dt", "=", "d1"], ["x", "<", 100]])
    assert len(scan.files) == 1 and scan.files_skipped == len(table.snapshot().files) - 1
    target = LakeTable.create(str(tmp_path / "small_x"), {"schema": "id BIGINT, x BIGINT"})
    out = run(spark, "write", {"table": target.url, "source": {
        "query": "SELECT id, x FROM t", "tables": {"t": {"path": table.url, "filters": [["dt", "=", "d1"],
                                                                                          ["x", "<", 100]]}}}})
    expected = sum(1 for r in all_rows(spark, table.url) if r["dt"] == "d1" and r["x"] < 100)
    assert out["rows_added"] == expected > 0
    assert out["source_scans"] == {"t": {"files_read": 1, "files_skipped": scan.files_skipped}}


# -- retries of which="all", plans that cannot be run (issue 20) ------------------------------------------
def test_a_retry_of_which_all_after_a_partial_run_runs_the_plans_left(spark: Any, table: LakeTable,
                                                                      monkeypatch: Any) -> None:
    first = schedule(table.url, partitions=[{"dt": "d1"}])["plan_id"]
    second = schedule(table.url, min_commits=0, partitions=[{"dt": "d2"}])["plan_id"]
    before = all_rows(spark, table.url)
    original = faults.reach
    commits: list[str] = []

    def worker_lost_at_the_second_commit(point: str) -> None:
        if point == "before_commit":
            commits.append(point)
            if len(commits) == 2:
                raise RuntimeError("executor lost")
        original(point)

    spec = {"table": table.url, "which": "all", "request_id": "dag/cluster/run1/-1"}
    with monkeypatch.context() as patch:
        patch.setattr(faults, "reach", worker_lost_at_the_second_commit)
        with pytest.raises(RuntimeError, match="executor lost"):
            run(spark, "execute_clustering", spec)
    assert table.is_finished(first) and [p.id for p in pending_plans(table)] == [second]

    retry = run(spark, "execute_clustering", spec)  # Airflow's retry of the task
    assert retry["plans_executed"] == 2 and retry["plans_already_committed"] == 1
    assert [(p["plan_id"], p["already_committed"]) for p in retry["plans"]] == [(first, True), (second, False)]
    assert pending_plans(table) == [] and all_rows(spark, table.url) == before
    assert len(table.snapshot().files) == 2
    again = run(spark, "execute_clustering", spec)  # and once more: nothing left, nothing written
    assert [(p["plan_id"], p["already_committed"]) for p in again["plans"]] == [(first, True), (second, True)]
    assert table.commit_log.head() == retry["plans"][1]["seq"]


def edit_plan(table: LakeTable, plan_id: str, change: Any) -> None:
    """Change a stored plan as a person editing `_lake/pending/<id>.requested.json` would."""
    rel = instants.requested_file(plan_id)
    raw = table.storage.read_json(rel)
    change(raw["metadata"]["plan"])
    table.storage.write_json(rel, raw)


DAMAGES = {
    "negative output_files": (lambda p: p["groups"][0].update(output_files=-3), "groups[0].output_files is -3"),
    "more files than rows": (lambda p: p["groups"][0].update(output_files=5449), "more files than the group has"),
    "unknown sort column": (lambda p: p["layout"].update(sort_columns=["nope"]), "'nope' is not a column"),
    "a file listed twice": (lambda p: p["groups"][0]["files"].append(p["groups"][0]["files"][0]), "a second time"),
    "unknown layout": (lambda p: p["layout"].update(layout="SPIRAL"), "layout.layout is 'SPIRAL'"),
    "no groups": (lambda p: p.pop("groups"), "groups is None"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_plan_that_cannot_be_run_fails_clearly_commits_nothing_and_blocks_no_other_plan(
        spark: Any, table_path: str, damage: str) -> None:
    from airflow_lake.cli import main
    from airflow_lake.lake.errors import LakeSpecError
    from tests.lake.lake_core_helpers import append, make_table

    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", rows=40)
    plan_id = schedule(table_path, min_commits=4)["plan_id"]
    change, problem = DAMAGES[damage]
    edit_plan(table, plan_id, change)
    head = table.commit_log.head()
    for spec in ({"plan_id": plan_id}, {}, {"which": "all"}):
        with pytest.raises(LakeSpecError) as err:
            run(spark, "execute_clustering", {"table": table_path, **spec})
        assert err.value.field == ("plan_id" if "plan_id" in spec else "which") and problem in str(err.value)
        assert f"airflow-lake rollback-pending {table.url} {plan_id}" in str(err.value)  # a command that exists
    assert table.commit_log.head() == head and [p.id for p in pending_plans(table)] == [plan_id]
    assert pending_plans(table)[0].problem is not None

    assert main(["rollback-pending", table.url, plan_id]) == 0  # the command the message names
    assert plan_id in table.state().rolled_back and pending_plans(table) == []


def test_which_oldest_skips_a_damaged_plan_and_runs_the_next(spark: Any, table: LakeTable, caplog: Any) -> None:
    damaged = schedule(table.url, partitions=[{"dt": "d1"}])["plan_id"]
    good = schedule(table.url, min_commits=0, partitions=[{"dt": "d2"}])["plan_id"]
    edit_plan(table, damaged, DAMAGES["a file listed twice"][0])
    out = run(spark, "execute_clustering", {"table": table.url})
    assert out["plan_id"] == good and out["files_before"] == 4
    assert f"skipping clustering plan {damaged}" in caplog.text and "airflow-lake rollback-pending" in caplog.text
    assert [p.id for p in pending_plans(table)] == [damaged]


def test_a_retry_of_the_schedule_after_its_plan_ran_returns_that_plan_and_plans_nothing_new(
        spark: Any, table: LakeTable) -> None:
    """Airflow retries a schedule task whose first try stored a plan (and then failed to report), after the
    downstream execute task already ran it: the retry must not plan the freshly clustered files again."""
    first = schedule(table.url, min_commits=0, request_id="dag/plan/run1/-1")
    run(spark, "execute_clustering", {"table": table.url, "plan_id": first["plan_id"],
                                      "request_id": "dag/cluster/run1/-1"})
    appends(spark, table.url, 2, 50)  # new small files: a fresh schedule would plan them
    retry = schedule(table.url, min_commits=0, request_id="dag/plan/run1/-1")
    assert retry["plan_id"] == first["plan_id"] and retry["already_scheduled"] and "executed since" in retry["reason"]
    assert pending_plans(table) == []
    assert schedule(table.url, min_commits=0, request_id="dag/plan/run2/-1")["plan_id"] not in (None, first["plan_id"])


def test_sample_curves_order_strings_sharing_a_long_prefix_across_files(spark: Any, tmp_path: Path) -> None:
    """Strings sharing a 100-byte prefix (URLs, paths), of varying lengths: SAMPLE ranks follow their order, so a
    Z-order over them (the other column constant) cuts files whose ranges follow one another — ranked by length,
    every file held strings from all over the range."""
    from pyspark.sql import functions as F

    prefix = "https://example.com/" + "p" * 80
    path = str(tmp_path / "t")
    table = LakeTable.create(path, {"schema": "s STRING, x BIGINT"})
    table.write(spark.range(0, 2000, 1, 2).select(
        F.concat(F.lit(prefix), F.lpad((F.col("id") * 7919 % 2000).cast("string"), 5, "0"),
                 F.expr("repeat('z', cast(id % 7 as int))")).alias("s"), F.lit(0).cast("bigint").alias("x")))
    total = sum(f.bytes for f in table.snapshot().files)
    plan = schedule(path, min_commits=1, layout="ZORDER", curve="SAMPLE", sort_columns=["s", "x"],
                    target_file_max_bytes=-(-total // 8))
    run(spark, "execute_clustering", {"table": path, "plan_id": plan["plan_id"]})
    ranges = sorted((lo, hi) for lo, hi, _, _ in footer_ranges(LakeTable.open(path), ("s", "x")))
    assert len(ranges) >= 4
    overlapping = sum(1 for (_, hi), (lo, _) in itertools.pairwise(ranges) if lo >= hi)
    assert overlapping == len(ranges) - 1, [(lo[100:], hi[100:]) for lo, hi in ranges]  # none overlaps the next
    assert LakeTable.open(path).read(spark).count() == 2000
