"""Benchmark: bucketed lake tables in Spark (joins, point queries, writes) vs plain Parquet and Spark's bucketBy.

One local[2] SparkSession (`buckets.catalog.READ_CONF` and `spark.sql.autoBroadcastJoinThreshold=-1` set on it)
generates the data once, then measures three things; every figure is taken in the same run as its baseline,
the turns rotate each round, one warm-up round is dropped and the median of `--rounds` rounds is reported:

(a) join   A(k BIGINT, v BIGINT, s STRING) and B(k BIGINT, w BIGINT), `--rows` rows each, k unique in each:
           SELECT count(*), sum(a.v + b.w) FROM a JOIN b ON a.k = b.k
           ours      lake tables bucketed 16 on k (sorted by k), read with `LakeTable.register` (temp views)
           plain     the same data as plain Parquet (`spark.read.parquet`)               <- the baseline
           spark     Spark's own bucketed catalog tables (repartition(16, k) + bucketBy + sortBy + saveAsTable)
           Time (read/register + plan + run), shuffle Exchanges in the plan (`plans.shuffles`, and how many
           are hashpartitioning: the join's), shuffle bytes written: per Exchange from its SQL metric, and
           the total over the query's stages from the status store (`statusStore().stageList`). The global
           count/sum always ends in one tiny `Exchange SinglePartition`; the join itself shuffles nothing
           only when no hashpartitioning Exchange is left.
(b) point  a lake table partitioned by dt (4 values) and bucketed 16 on k vs a plain Parquet copy partitioned
           by dt: `dt = <one> AND k = 5`. Files the scan's tasks open (the files in the FileScanRDD's
           partitions) vs the partition's files; also the scan's `numFiles` SQL metric, which Spark fills
           from the partition listing before bucket pruning, so it counts the whole partition.
(c) write  the --rows rows of A read from `--source-files` Parquet files (M input partitions):
           ours          `LakeTable.write(df)` into a table bucketed 16 on k (one sorted file per bucket)
           bucketBy      df.write.bucketBy(16, "k").sortBy("k").saveAsTable(...): up to M x 16 files
           repartition   df.repartition(16, "k").write.bucketBy(...)...: 16 files
           Time and file counts.

Goals printed: join ours/plain <= 0.3 with 0 join shuffle bytes; point query reads 1/16 of the partition's files.

    .venv/bin/python benchmarks/bench_buckets.py --json-out /tmp/bench_buckets.json          # 10M rows
    .venv/bin/python benchmarks/bench_buckets.py --rows 200000 --rounds 1                    # smoke run
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import local_spark, machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.spark.bucketed_read import READ_CONF
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from airflow_lake.lake.table import LakeTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BUCKETS = 16
GOAL_JOIN_RATIO = 0.3
SCHEMA_A = "k BIGINT, v BIGINT, s STRING"
SCHEMA_B = "k BIGINT, w BIGINT"
SCHEMA_P = "k BIGINT, v BIGINT, dt STRING"
BUCKET_SPEC = {"columns": ["k"], "count": BUCKETS, "sort_columns": ["k"]}
JOIN_SQL = "SELECT count(*) AS n, sum(a.v + b.w) AS total FROM a JOIN b ON a.k = b.k"
POINT_DT = "2024-01-02"
POINT_K = 5
DATES = 4
QUICK_ROWS = 200_000
_HASH_EXCHANGE = re.compile(r"(?<![A-Za-z])Exchange hashpartitioning\b")

Runner = Callable[[], dict[str, Any]]


# -- data --------------------------------------------------------------------------------------------
def make_sources(spark: SparkSession, root: Path, rows: int, files: int) -> dict[str, str]:
    """Plain Parquet A, B (`files` files each) and P (partitioned by dt); return their paths."""
    from pyspark.sql import functions as F

    ids = spark.range(0, rows, numPartitions=files)
    paths = {name: str(root / f"plain-{name}") for name in ("a", "b", "p")}
    ids.select(F.col("id").alias("k"), (F.col("id") % 1000).alias("v"),
               F.format_string("row-%012d", F.col("id")).alias("s")).write.parquet(paths["a"])
    ids.select((F.lit(rows - 1) - F.col("id")).alias("k"), (F.col("id") % 997).alias("w")).write.parquet(paths["b"])
    keys = max(rows // 64, 1)  # every k in every dt, 16 rows per (k, dt)
    ids.select((F.col("id") % keys).alias("k"), F.col("id").alias("v"),
               F.format_string("2024-01-%02d", F.floor(F.col("id") / keys) % DATES + 1).alias("dt")
               ).write.partitionBy("dt").parquet(paths["p"])
    return paths


def lake_table(path: Path, schema: str, partition_by: tuple[str, ...] = ()) -> LakeTable:
    spec: dict[str, Any] = {"schema": schema, "bucket": dict(BUCKET_SPEC)}
    if partition_by:
        spec["partition_by"] = list(partition_by)
    return LakeTable.create(str(path), spec)


def spark_bucketed_write(df: DataFrame, name: str, path: Path, repartition: bool) -> None:
    """Spark's own bucketed catalog table (replacing one of that name)."""
    spark = df.sparkSession
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    shutil.rmtree(path, ignore_errors=True)
    if repartition:
        df = df.repartition(BUCKETS, "k")
    (df.write.mode("overwrite").option("path", str(path))
     .bucketBy(BUCKETS, "k").sortBy("k").saveAsTable(name))


def parquet_files(path: Path) -> int:
    """Data files under `path` (not the lake's metadata under `_lake`)."""
    return sum(1 for p in path.rglob("*.parquet") if "_lake" not in p.relative_to(path).parts)


# -- what Spark did ----------------------------------------------------------------------------------
def plan_nodes(spark: SparkSession, df: DataFrame) -> list[Any]:
    """The nodes of `df`'s executed physical plan (after it ran: the final adaptive plan, query stages opened)."""
    out: list[Any] = []

    def walk(node: Any) -> None:
        out.append(node)
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            walk(node.executedPlan())
            return
        if kind.endswith("QueryStageExec"):
            walk(node.plan())
            return
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    return out


def metric(node: Any, key: str) -> int | None:
    found = node.metrics().get(key)
    return int(found.get().value()) if found.isDefined() else None


def exchange_bytes(nodes: list[Any]) -> dict[str, int]:
    """Shuffle bytes written per kind of Exchange (HashPartitioning, SinglePartition, ...), from SQL metrics."""
    out: dict[str, int] = {}
    for node in nodes:
        if node.getClass().getSimpleName() == "ShuffleExchangeExec":
            kind = node.outputPartitioning().getClass().getSimpleName().rstrip("$")
            out[kind] = out.get(kind, 0) + (metric(node, "shuffleBytesWritten") or 0)
    return out


def stage_shuffle_bytes(spark: SparkSession) -> dict[tuple[int, int], int]:
    """Shuffle bytes written by every stage attempt the status store holds (after the listener bus drained)."""
    sc = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
    sc.listenerBus().waitUntilEmpty()
    store = sc.statusStore()
    stages = store.stageList(None, False, False, getattr(store, "stageList$default$4")(), None)
    out: dict[tuple[int, int], int] = {}
    for i in range(stages.size()):
        stage = stages.apply(i)
        out[(int(stage.stageId()), int(stage.attemptId()))] = int(stage.shuffleWriteBytes())
    return out


def shuffle_delta(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> int:
    return sum(v for key, v in after.items() if key not in before)


# -- (a) join ------------------------------------------------------------------------------------------
def join_run(spark: SparkSession, setup: Callable[[], None]) -> dict[str, Any]:
    """Make the views `a` and `b` (`setup`), run the join; time, result, plan and shuffle facts."""
    before = stage_shuffle_bytes(spark)

    def go() -> tuple[DataFrame, str, list[Any]]:
        setup()
        query = spark.sql(JOIN_SQL)
        text = plan_text(query)
        return query, text, query.collect()

    seconds, (query, text, rows) = timed(go)
    by_kind = exchange_bytes(plan_nodes(spark, query))
    return {
        "seconds": seconds, "result": [rows[0][0], rows[0][1]], "exchanges": shuffles(text),
        "hash_exchanges": len(_HASH_EXCHANGE.findall(text)), "bucketed_scans": text.count("Bucketed: true"),
        "join_shuffle_bytes": by_kind.get("HashPartitioning", 0), "exchange_bytes": by_kind,
        "stage_shuffle_bytes": shuffle_delta(before, stage_shuffle_bytes(spark)), "plan": text,
    }


def join_runners(spark: SparkSession, paths: dict[str, str], lake: dict[str, LakeTable]) -> dict[str, Runner]:
    def ours() -> None:
        lake["a"].register(spark, "a")
        lake["b"].register(spark, "b")

    def plain() -> None:
        spark.read.parquet(paths["a"]).createOrReplaceTempView("a")
        spark.read.parquet(paths["b"]).createOrReplaceTempView("b")

    def spark_tables() -> None:
        spark.table("spark_a").createOrReplaceTempView("a")
        spark.table("spark_b").createOrReplaceTempView("b")

    return {"ours": partial(join_run, spark, ours), "plain": partial(join_run, spark, plain),
            "spark": partial(join_run, spark, spark_tables)}


# -- (b) point query ---------------------------------------------------------------------------------
def point_run(spark: SparkSession, read: Callable[[], DataFrame]) -> dict[str, Any]:
    """`dt = POINT_DT AND k = POINT_K`: time, rows, and the files the scan opened / its numFiles metric."""
    def go() -> tuple[DataFrame, list[Any]]:
        query = read().where(f"dt = '{POINT_DT}' AND k = {POINT_K}").select("k", "v", "dt")
        return query, query.collect()

    seconds, (query, rows) = timed(go)
    scans = [n for n in plan_nodes(spark, query) if n.getClass().getSimpleName() == "FileSourceScanExec"]
    opened = sum(len(p.files()) for scan in scans for p in scan.inputRDD().partitions())
    return {"seconds": seconds, "rows": len(rows), "files_opened": opened,
            "num_files_metric": sum(metric(scan, "numFiles") or 0 for scan in scans),
            "scan_tasks": sum(len(scan.inputRDD().partitions()) for scan in scans), "plan": plan_text(query)}


# -- (c) writes --------------------------------------------------------------------------------------
def write_runners(spark: SparkSession, root: Path, src: str, round_no: int) -> dict[str, Runner]:
    def ours() -> dict[str, Any]:
        path = root / f"write-ours-{round_no}"
        table = lake_table(path, SCHEMA_A)
        seconds, _ = timed(lambda: table.write(spark.read.parquet(src)))
        return {"seconds": seconds, "files": len(table.snapshot().files), "files_on_disk": parquet_files(path),
                "path": path}

    def spark_write(repartition: bool) -> dict[str, Any]:
        path = root / f"write-spark-{int(repartition)}"
        name = f"bench_write_{int(repartition)}"
        seconds, _ = timed(lambda: spark_bucketed_write(spark.read.parquet(src), name, path, repartition))
        return {"seconds": seconds, "files": parquet_files(path), "files_on_disk": parquet_files(path), "path": path}

    return {"ours": ours, "bucketBy": partial(spark_write, False), "repartition": partial(spark_write, True)}


# -- rounds ------------------------------------------------------------------------------------------
def rotate(names: list[str], round_no: int) -> list[str]:
    """Who goes first changes every round, so nobody always runs on a warmer JVM or a quieter machine."""
    shift = round_no % len(names)
    return names[shift:] + names[:shift]


def run_rounds(label: str, total: int, warmup: int, make: Callable[[int], dict[str, Runner]],
               after: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every runner once per round, in rotating order; the counted rounds' results per runner."""
    kept: dict[str, list[dict[str, Any]]] = {}
    for round_no in range(total):
        runners = make(round_no)
        got: dict[str, Any] = {}
        for who in rotate(list(runners), round_no):
            got[who] = runners[who]()
            print(f"  {label} round {round_no + 1}/{total}{'' if round_no >= warmup else ' (warm-up)'} "
                  f"{who:12s} {got[who]['seconds']:7.2f} s", flush=True)
            if round_no >= warmup:
                kept.setdefault(who, []).append(got[who])
        if after is not None:
            after(round_no, got)
    return kept


def summarize(samples: dict[str, list[dict[str, Any]]], baseline: str) -> dict[str, dict[str, Any]]:
    """Median seconds (and the last round's facts) per runner, with the ratio to `baseline`."""
    base = median([s["seconds"] for s in samples[baseline]])
    out: dict[str, dict[str, Any]] = {}
    for who, runs in samples.items():
        seconds = [s["seconds"] for s in runs]
        last = {k: (str(v) if isinstance(v, Path) else v) for k, v in runs[-1].items() if k != "seconds"}
        out[who] = {**last, "seconds": median(seconds), "all_seconds": seconds,
                    "ratio": ratio(median(seconds), base)}
        if who != baseline:
            out[who]["paired_ratio_median"] = median(
                [s["seconds"] / b["seconds"] for s, b in zip(runs, samples[baseline], strict=True)])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows in A, in B and in P (default 10000000)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: --rows {QUICK_ROWS}, --rounds 1")
    parser.add_argument("--source-files", type=int, default=8, help="Parquet files of each source (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not counted (default 1)")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.rounds = QUICK_ROWS, 1
    if args.rows < 64 or args.rounds < 1 or args.warmup < 0 or args.source_files < 1:
        parser.error("--rows must be >= 64, --rounds and --source-files >= 1, --warmup >= 0")
    total = args.warmup + args.rounds

    machine = machine_info()
    print(f"buckets benchmark: {args.rows} rows, {BUCKETS} buckets, {machine['nproc']} cores, "
          f"load {machine['load_average']}")
    with scratch_dir("lake-bench-buckets-", keep=args.keep) as root:
        conf = {**DEFAULT_CONF, **READ_CONF, "spark.sql.autoBroadcastJoinThreshold": "-1",
                # the write input is read as about --source-files tasks (Spark would pack small files into 2)
                "spark.sql.files.minPartitionNum": str(args.source_files)}
        spark = local_spark("airflow-lake bench_buckets", conf, root / "warehouse")
        try:
            seconds, paths = timed(lambda: make_sources(spark, root, args.rows, args.source_files))
            lake = {name: lake_table(root / f"lake-{name}", schema, partition_by)
                    for name, schema, partition_by in (("a", SCHEMA_A, ()), ("b", SCHEMA_B, ()),
                                                       ("p", SCHEMA_P, ("dt",)))}
            for name, table in lake.items():
                source = spark.read.parquet(paths[name])
                # Spark's partition discovery reads dt=2024-01-02 as a date; the lake table's dt is a string
                table.write(source.withColumn("dt", source["dt"].cast("string")) if name == "p" else source)
            for name in ("a", "b"):
                spark_bucketed_write(spark.read.parquet(paths[name]), f"spark_{name}", root / f"spark-{name}", True)
            input_partitions = spark.read.parquet(paths["a"]).rdd.getNumPartitions()
            print(f"data: A, B, P of {args.rows} rows as plain Parquet, lake tables and (A, B) Spark bucketed "
                  f"tables, made in {seconds:.1f} s (sources) + setup; write input: {input_partitions} partitions")

            joins = summarize(run_rounds("join ", total, args.warmup,
                                         lambda _: join_runners(spark, paths, lake)), "plain")
            point_partition_files = {
                "ours": sum(1 for f in lake["p"].snapshot().files if f.partition.get("dt") == POINT_DT),
                "plain": parquet_files(Path(paths["p"]) / f"dt={POINT_DT}"),
            }
            points = summarize(run_rounds("point", total, args.warmup, lambda _: {
                "ours": partial(point_run, spark, lambda: lake["p"].read(spark)),
                "plain": partial(point_run, spark, lambda: spark.read.parquet(paths["p"])),
            }), "plain")

            def drop_previous(round_no: int, got: dict[str, Any]) -> None:
                if round_no < total - 1:
                    shutil.rmtree(got["ours"]["path"], ignore_errors=True)

            writes = summarize(run_rounds("write", total, args.warmup,
                                          partial(write_runners, spark, root, paths["a"]), drop_previous),
                               "bucketBy")
        finally:
            spark.stop()
    load_end = [round(x, 2) for x in os.getloadavg()]

    same_result = len({tuple(j["result"]) for j in joins.values()}) == 1 and joins["plain"]["result"][0] == args.rows
    print()
    print(f"(a) join of A and B ({args.rows} rows each, {BUCKETS} buckets): {JOIN_SQL}")
    print_table(["read as", "seconds", "/plain", "paired", "exchanges (hash)", "join shuffle bytes",
                 "all shuffle bytes (stages)", "bucketed scans"],
                [[who, r["seconds"], f"{r['ratio']:.3f}x", f"{r.get('paired_ratio_median', 1.0):.3f}x",
                  f"{r['exchanges']} ({r['hash_exchanges']})", r["join_shuffle_bytes"], r["stage_shuffle_bytes"],
                  r["bucketed_scans"]] for who, r in joins.items()])
    ours = joins["ours"]
    join_ok = ours["ratio"] <= GOAL_JOIN_RATIO and ours["join_shuffle_bytes"] == 0
    print(f"goal ours/plain <= {GOAL_JOIN_RATIO} and 0 join shuffle bytes: "
          f"{'ok' if join_ok else 'MISS'} ({ours['ratio']:.3f}x, {ours['join_shuffle_bytes']} B); "
          f"same result everywhere: {same_result} {ours['result']}")
    print()
    print(f"(b) point query dt = '{POINT_DT}' AND k = {POINT_K} on P partitioned by dt ({DATES} values)")
    print_table(["read as", "seconds", "/plain", "rows", "files opened", "partition files", "opened/partition",
                 "numFiles metric", "scan tasks"],
                [[who, r["seconds"], f"{r['ratio']:.3f}x", r["rows"], r["files_opened"], point_partition_files[who],
                  f"{r['files_opened'] / max(point_partition_files[who], 1):.4f}", r["num_files_metric"],
                  r["scan_tasks"]] for who, r in points.items()])
    point_ok = points["ours"]["files_opened"] * BUCKETS == point_partition_files["ours"]
    print(f"goal ours opens 1/{BUCKETS} of the partition's files: {'ok' if point_ok else 'MISS'}")
    print()
    print(f"(c) bucketed write of A ({args.rows} rows, {input_partitions} input partitions, {BUCKETS} buckets)")
    print_table(["writer", "seconds", "/bucketBy", "paired", "files"],
                [[who, r["seconds"], f"{r['ratio']:.3f}x", f"{r.get('paired_ratio_median', 1.0):.3f}x", r["files"]]
                 for who, r in writes.items()])
    print(f"load average: start {machine['load_average']}, end {load_end}")
    write_result(args.json_out, {
        "benchmark": "buckets", "machine": machine, "args": vars(args), "spark_conf": conf, "buckets": BUCKETS,
        "goal_join_ratio": GOAL_JOIN_RATIO, "load_average_end": load_end, "input_partitions": input_partitions,
        "join": {"sql": JOIN_SQL, "same_result": same_result, "meets_goal": join_ok, "results": joins},
        "point": {"dt": POINT_DT, "k": POINT_K, "partition_files": point_partition_files, "meets_goal": point_ok,
                  "results": points},
        "write": {"results": writes},
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
