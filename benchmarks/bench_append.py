"""Benchmark: appends through the job runner vs plain Spark writes of the same data, in one session.

Generates a source Parquet dataset once (`--rows` rows: id bigint, k = id % `--partition-values` (7) as a bigint, or
with `--partition-type string` as the string "region-<nn>", s string, d double), then in one local[2] SparkSession
takes turns, for each variant, between:
  baseline  unpartitioned: spark.read.parquet(src).write.parquet(out)
            partitioned:   ... .write.partitionBy("k").parquet(out)
            bucketed:      ... .repartition(8, "id").write.bucketBy(8, "id").sortBy("id").saveAsTable(t)
  ours      airflow_lake.jobs.run(spark, "write", {"table": t, "source": {"path": src}}) into a lake table with the
            same layout (none / partition_by k / bucket {columns [id], count 8, sort_columns [id]})
The plain variants write into a fresh table (a fresh directory, for both sides) each round; their `-append` twins
(e.g. `partitioned-append`) append to the same table every round, against Spark's `mode("append")` into the same
directory (bucketed: the same catalog table): after the warm-up round every measured write is an append to a table with
data. Both sides pay the same around a timed write: the previous round's output is deleted outside the timing (a
plain Spark overwrite used to delete it inside, a lake table was deleted outside), and before each timed write the
Python and JVM heaps are collected and the page cache's dirty pages written out (`settle`; `--no-settle` turns it
off), so no write pays for the garbage or the disk writes of the one before it.
  old       the same runner write through the previous pyarrow writer (`--old-path`; the writer was removed after
            commit 5975ca5, so this needs a checkout of that commit)
One warm-up round is dropped; the median of `--rounds` rounds is reported as ours/baseline against the 1.1x goal,
with the load average at the start and end of the run, the median of per-round ratios (paired), the ratio of the
fastest rounds (best) and of the median CPU seconds of the driver JVM and this process (CPU: what a write costs when
other load makes wall times noise).

    .venv/bin/python benchmarks/bench_append.py --rows 4000000 --old-path --json-out /tmp/bench_append.json
    .venv/bin/python benchmarks/bench_append.py --rows 3000000 --partition-values 16 --partition-type string
After the last round both outputs are read back: row counts and an order-free hash of every row must be equal.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import dir_bytes, local_spark, machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.jobs import run
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.write import append_overwrite as lake_write

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GOAL_RATIO = 1.1
BUCKETS = 8
PARTITION_TYPES = ("bigint", "string")


@dataclass(frozen=True)
class Variant:
    """One layout written by the baseline and by us."""

    name: str
    partition_by: tuple[str, ...] = ()
    bucketed: bool = False
    append: bool = False  # into the same table every round (Spark: mode("append")), not a fresh one


_LAYOUTS = (Variant("unpartitioned"), Variant("partitioned", ("k",)), Variant("bucketed", bucketed=True))
VARIANTS = (*_LAYOUTS, *(Variant(f"{v.name}-append", v.partition_by, v.bucketed, append=True) for v in _LAYOUTS))


def schema(partition_type: str) -> str:
    """The table schema for the type of the partition column k."""
    return f"id BIGINT, k {partition_type.upper()}, s STRING, d DOUBLE"


def make_source(spark: SparkSession, path: Path, rows: int, files: int, *, values: int = 7,
                partition_type: str = "bigint") -> int:
    """Write the source dataset (k: `values` distinct partition values of `partition_type`); return its bytes."""
    from pyspark.sql import functions as F

    k = F.col("id") % values
    if partition_type == "string":  # "region-00" ... (the user's case: a few string values)
        k = F.concat(F.lit("region-"), F.lpad(k.cast("string"), len(str(values - 1)) + 1, "0"))
    df = spark.range(0, rows, numPartitions=files).select(
        F.col("id"),
        k.alias("k"),
        F.concat(F.lit("p-"), F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 24)).alias("s"),
        (F.rand(42) * 1000).alias("d"),
    )
    df.write.mode("overwrite").parquet(str(path))
    return dir_bytes(path)


def baseline_table(variant: Variant) -> str:
    """The catalog table of the baseline's bucketed write."""
    return "bench_bucketed_append" if variant.append else "bench_bucketed"


def baseline_write(spark: SparkSession, src: str, out: str, variant: Variant) -> None:
    """What a user of plain Spark writes for the same layout (an append variant: into the same output; else into
    a fresh one, whose catalog table `prepare_baseline` dropped)."""
    df = spark.read.parquet(src)
    mode = "append" if variant.append else "overwrite"
    if variant.bucketed:
        (df.repartition(BUCKETS, "id").write.mode(mode).option("path", out)
         .bucketBy(BUCKETS, "id").sortBy("id").saveAsTable(baseline_table(variant)))
        return
    writer = df.write.mode(mode)
    if variant.partition_by:
        writer = writer.partitionBy(*variant.partition_by)
    writer.parquet(out)


def create_lake_table(path: str, variant: Variant, partition_type: str = "bigint") -> None:
    spec: dict[str, Any] = {"table": path, "schema": schema(partition_type)}
    if variant.partition_by:
        spec["partition_by"] = list(variant.partition_by)
    if variant.bucketed:
        spec["bucket"] = {"columns": ["id"], "count": BUCKETS, "sort_columns": ["id"]}
    run(None, "create_table", spec)


def prepare_baseline(spark: SparkSession, variant: Variant) -> None:
    """Outside the timing, as a lake table is made: a fresh bucketed write's catalog table is dropped (external:
    its files stay, and are deleted with the previous round's directory)."""
    if variant.bucketed and not variant.append:
        spark.sql(f"DROP TABLE IF EXISTS {baseline_table(variant)}")


def settle(spark: SparkSession) -> None:
    """Before a timed write, for either side: collect Python's and the driver JVM's garbage and write the dirty
    pages of earlier writes to disk, so that a write does not pay for the one before it (a full GC or the kernel's
    writeback of ~100 MB of Parquet landing in the middle of whichever write comes next)."""
    gc.collect()
    jvm = getattr(spark.sparkContext, "_jvm", None)  # (a benchmark's local session: classic, py4j at hand)
    if jvm is not None:
        jvm.java.lang.System.gc()
    os.sync()


def driver_pid(spark: SparkSession) -> int | None:
    """The process id of the driver JVM (which runs the local executors too); None where there is no /proc."""
    jvm = getattr(spark.sparkContext, "_jvm", None)
    if jvm is None or not os.path.exists("/proc/self/stat"):
        return None
    return int(jvm.java.lang.ProcessHandle.current().pid())


def cpu_seconds(jvm_pid: int | None) -> float:
    """CPU seconds (user + system) used so far by the driver JVM and by this process (footers, log, commit).

    Other load on the machine stretches a write's wall time several-fold, its CPU time much less: the ratio of
    CPU seconds says what each side costs when the wall-time ratio is noise."""
    own = os.times()
    if jvm_pid is None:
        return own.user + own.system
    with open(f"/proc/{jvm_pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()  # after the command name, from field 3 (state) on
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + own.user + own.system  # utime, stime


def ours_write(spark: SparkSession, src: str, table: str) -> dict[str, Any]:
    return run(spark, "write", {"table": table, "source": {"path": src}})


def old_write(spark: SparkSession, src: str, table: str) -> dict[str, Any]:
    """The runner write with the previous writer (rows through Python and pyarrow) swapped in."""
    from airflow_lake.lake import arrow_writer  # type: ignore[attr-defined]  # only up to commit 5975ca5

    native = lake_write.write_dataframe
    lake_write.write_dataframe = arrow_writer.write_dataframe
    try:
        return ours_write(spark, src, table)
    finally:
        lake_write.write_dataframe = native


def run_rounds(spark: SparkSession, root: Path, src: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Take turns per variant; the first `--warmup` rounds are not counted."""
    writers: dict[str, Callable[[SparkSession, str, str], dict[str, Any]]] = {"ours": ours_write}
    if args.old_path:
        writers["old"] = old_write
    who_all = ["baseline", *writers]
    variants = [v for v in VARIANTS if v.name in args.variants]
    samples: dict[str, dict[str, list[float]]] = {v.name: {who: [] for who in who_all} for v in variants}
    cpu: dict[str, dict[str, list[float]]] = {v.name: {who: [] for who in who_all} for v in variants}
    jvm_pid = driver_pid(spark)
    checks: dict[str, dict[str, Any]] = {}
    total = args.warmup + args.rounds
    for round_no in range(total):
        counted = round_no >= args.warmup
        for variant in variants:
            out = baseline_path(root, variant, round_no)
            # rotate who goes first, so nobody always runs on a warmer JVM or a quieter machine
            order = who_all[round_no % len(who_all):] + who_all[:round_no % len(who_all)]
            metrics: dict[str, Any] = {}
            for who in order:
                table = lake_path(root, variant, who, round_no)
                if who == "baseline":
                    prepare_baseline(spark, variant)
                    if args.settle:
                        settle(spark)
                    cpu_start = cpu_seconds(jvm_pid)
                    seconds, _ = timed(partial(baseline_write, spark, src, out, variant))
                else:
                    if not variant.append or round_no == 0:
                        create_lake_table(table, variant, args.partition_type)
                    if args.settle:
                        settle(spark)
                    cpu_start = cpu_seconds(jvm_pid)
                    seconds, got = timed(partial(writers[who], spark, src, table))
                    if who == "ours":
                        metrics = got
                cpu_used = cpu_seconds(jvm_pid) - cpu_start
                if counted:
                    samples[variant.name][who].append(seconds)
                    cpu[variant.name][who].append(cpu_used)
                print(f"  round {round_no + 1}/{total}{'' if counted else ' (warm-up)'} {variant.name:13s} "
                      f"{who:8s} {seconds:6.2f} s, {cpu_used:6.2f} s CPU", flush=True)
            if round_no == total - 1:
                checks[variant.name] = verify(spark, out, lake_path(root, variant, "ours", round_no), metrics,
                                              args.rows, writes=total if variant.append else 1,
                                              partition_type=args.partition_type)
            if not variant.append:  # the previous round's outputs, both sides', outside the timing
                for who in writers:
                    shutil.rmtree(lake_path(root, variant, who, round_no - 1), ignore_errors=True)
                shutil.rmtree(baseline_path(root, variant, round_no - 1), ignore_errors=True)
    results = []
    for variant in variants:
        got = samples[variant.name]
        base = got["baseline"]
        row: dict[str, Any] = {"variant": variant.name, "baseline_seconds": median(base),
                               "baseline_all": base, "baseline_cpu_all": cpu[variant.name]["baseline"],
                               **checks[variant.name]}
        for who in writers:
            row[f"{who}_seconds"] = median(got[who])
            row[f"{who}_ratio"] = ratio(median(got[who]), median(base))
            # other load only ever adds time: the ratio of each back-to-back pair is less noisy than the medians
            row[f"{who}_paired_ratio_median"] = median([o / b for o, b in zip(got[who], base, strict=True)])
            # the fastest round of each: what is left when other load added nothing (it only ever adds time)
            row[f"{who}_best_ratio"] = ratio(min(got[who]), min(base))
            row[f"{who}_cpu_ratio"] = ratio(median(cpu[variant.name][who]), median(cpu[variant.name]["baseline"]))
            row[f"{who}_cpu_all"] = cpu[variant.name][who]
            row[f"{who}_all"] = got[who]
        row["meets_goal"] = row["ours_seconds"] <= GOAL_RATIO * row["baseline_seconds"]
        results.append(row)
    return results


def baseline_path(root: Path, variant: Variant, round_no: int) -> str:
    """The directory the baseline writes in a round: a fresh one per round (as the lake table), or for an append
    variant always the same."""
    return str(root / (f"baseline-{variant.name}" if variant.append else f"baseline-{variant.name}-{round_no}"))


def lake_path(root: Path, variant: Variant, who: str, round_no: int) -> str:
    """The lake table `who` writes in a round: a fresh one per round, or for an append variant always the same."""
    return str(root / (f"lake-{variant.name}-{who}" if variant.append else f"lake-{variant.name}-{who}-{round_no}"))


def content_hash(df: Any, partition_type: str) -> int:
    """An order-free hash of every row (sum of xxhash64 of the typed columns): equal for equal multisets of rows."""
    from pyspark.sql import functions as F

    typed = [F.col("id").cast("bigint"), F.col("k").cast(partition_type), F.col("s"), F.col("d").cast("double")]
    return int(df.select(F.sum(F.xxhash64(*typed).cast("decimal(38,0)")).alias("h")).first()["h"] or 0)


def verify(spark: SparkSession, out: str, table: str, metrics: dict[str, Any], rows: int, *, writes: int = 1,
           partition_type: str = "bigint") -> dict[str, Any]:
    """Row counts, content hashes and file facts of both outputs after the last round (`writes` appends each)."""
    lake = LakeTable.open(table)
    lake_df = lake.read(spark)
    baseline_df = spark.read.parquet(out)
    lake_rows, baseline_rows = lake_df.count(), baseline_df.count()
    lake_hash, baseline_hash = content_hash(lake_df, partition_type), content_hash(baseline_df, partition_type)
    snapshot = lake.snapshot()
    return {
        "source_rows": rows, "writes": writes, "baseline_rows": baseline_rows, "lake_rows": lake_rows,
        "rows_match": lake_rows == baseline_rows == rows * writes and metrics.get("rows_added") == rows,
        "hash_match": lake_hash == baseline_hash,
        "baseline_files": len(list(Path(out).rglob("*.parquet"))), "lake_files": len(snapshot.files),
        "baseline_bytes": dir_bytes(Path(out)), "lake_bytes": snapshot.bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows in the source (default 4000000)")
    parser.add_argument("--source-files", type=int, default=4, help="Parquet files in the source (default 4)")
    parser.add_argument("--partition-values", type=int, default=7,
                        help="distinct values of the partition column k (default 7)")
    parser.add_argument("--partition-type", choices=PARTITION_TYPES, default="bigint",
                        help="type of k: bigint (id %% N) or string ('region-<nn>') (default bigint)")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not counted (default 1)")
    parser.add_argument("--old-path", action="store_true",
                        help="also time the previous pyarrow writer (needs a checkout of commit 5975ca5)")
    parser.add_argument("--variants", default=",".join(v.name for v in VARIANTS),
                        help="comma-separated variants to run (default: all)")
    parser.add_argument("--no-settle", dest="settle", action="store_false",
                        help="do not collect garbage and write dirty pages out before each timed write")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    if args.old_path and importlib.util.find_spec("airflow_lake.lake.arrow_writer") is None:
        parser.error("--old-path: the previous writer was removed after commit 5975ca5; run this script from a "
                     "checkout of that commit to time it")
    args.variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = sorted(set(args.variants) - {v.name for v in VARIANTS})
    if unknown or not args.variants:
        parser.error(f"--variants: unknown {unknown or 'empty list'}; choose from "
                     f"{', '.join(v.name for v in VARIANTS)}")
    if args.rows < 1 or args.rounds < 1 or args.warmup < 0 or args.source_files < 1 or args.partition_values < 1:
        parser.error("--rows, --rounds, --source-files and --partition-values must be >= 1, --warmup >= 0")

    machine = machine_info()
    import airflow_lake  # which checkout is measured (a "before" run puts another one first on PYTHONPATH)

    machine["airflow_lake"] = str(Path(airflow_lake.__file__).parent)
    print(f"airflow_lake from {machine['airflow_lake']}")
    print(f"append benchmark: {args.rows} rows, k {args.partition_type} with {args.partition_values} values, "
          f"{machine['nproc']} cores, load {machine['load_average']}")
    with scratch_dir("lake-bench-append-", keep=args.keep) as root:
        conf = dict(DEFAULT_CONF)  # the runner's session conf (jobs/session.py)
        spark = local_spark("airflow-lake bench_append", conf, root / "warehouse")
        try:
            src = str(root / "source")
            seconds, source_bytes = timed(lambda: make_source(spark, Path(src), args.rows, args.source_files,
                                                              values=args.partition_values,
                                                              partition_type=args.partition_type))
            print(f"source: {args.rows} rows, {source_bytes / 1e6:.1f} MB in {args.source_files} files "
                  f"(generated in {seconds:.1f} s)")
            results = run_rounds(spark, root, src, args)
        finally:
            spark.stop()
    load_end = [round(x, 2) for x in os.getloadavg()]
    print()
    headers = ["variant", "baseline s", "ours s", "ours/baseline", "paired", "best", "CPU"]
    if args.old_path:
        headers += ["old s", "old/baseline"]
    headers += ["goal", "rows match", "hash match"]
    table_rows = []
    for r in results:
        line = [r["variant"], r["baseline_seconds"], r["ours_seconds"], f"{r['ours_ratio']:.2f}x",
                f"{r['ours_paired_ratio_median']:.2f}x", f"{r['ours_best_ratio']:.2f}x", f"{r['ours_cpu_ratio']:.2f}x"]
        if args.old_path:
            line += [r["old_seconds"], f"{r['old_ratio']:.2f}x"]
        line += ["ok" if r["meets_goal"] else f"MISS (> {GOAL_RATIO}x)", r["rows_match"], r["hash_match"]]
        table_rows.append(line)
    print_table(headers, table_rows)
    print(f"load average: start {machine['load_average']}, end {load_end}")
    wrong = [r["variant"] for r in results if not (r["rows_match"] and r["hash_match"])]
    if wrong:
        print(f"RESULTS DIFFER from the baseline's in {', '.join(wrong)}: the ratios above mean nothing")
    write_result(args.json_out, {
        "benchmark": "append", "machine": machine, "args": vars(args), "goal_ratio": GOAL_RATIO,
        "load_average_end": load_end, "spark_conf": conf, "source_bytes": source_bytes, "results": results,
    })
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
