"""Benchmark: appends through the job runner vs plain Spark writes of the same data, in one session.

Generates a source Parquet dataset once (`--rows` rows: id bigint, k bigint = id % 7, s string, d double), then in
one local[2] SparkSession takes turns, for three variants, between:
  baseline  unpartitioned: spark.read.parquet(src).write.parquet(out)
            partitioned:   ... .write.partitionBy("k").parquet(out)
            bucketed:      ... .repartition(8, "id").write.bucketBy(8, "id").sortBy("id").saveAsTable(t)
  ours      airflow_lake.jobs.run(spark, "write", {"table": t, "source": {"path": src}}) into a lake table with the
            same layout (none / partition_by k / bucket {columns [id], count 8, sort_columns [id]})
  old       the same runner write through the previous pyarrow writer (`--old-path`; the writer was removed after
            commit 5975ca5, so this needs a checkout of that commit)
One warm-up round is dropped; the median of `--rounds` rounds is reported as ours/baseline against the 1.1x goal,
with the load average at the start and end of the run.

    .venv/bin/python benchmarks/bench_append.py --rows 4000000 --old-path --json-out /tmp/bench_append.json
"""

from __future__ import annotations

import argparse
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
SCHEMA = "id BIGINT, k BIGINT, s STRING, d DOUBLE"
BUCKETS = 8


@dataclass(frozen=True)
class Variant:
    """One layout written by the baseline and by us."""

    name: str
    partition_by: tuple[str, ...] = ()
    bucketed: bool = False


VARIANTS = (Variant("unpartitioned"), Variant("partitioned", ("k",)), Variant("bucketed", bucketed=True))


def make_source(spark: SparkSession, path: Path, rows: int, files: int) -> int:
    """Write the source dataset; return its size in bytes."""
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=files).select(
        F.col("id"),
        (F.col("id") % 7).alias("k"),
        F.concat(F.lit("p-"), F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 24)).alias("s"),
        (F.rand(42) * 1000).alias("d"),
    )
    df.write.mode("overwrite").parquet(str(path))
    return dir_bytes(path)


def baseline_write(spark: SparkSession, src: str, out: str, variant: Variant) -> None:
    """What a user of plain Spark writes for the same layout."""
    df = spark.read.parquet(src)
    if variant.bucketed:
        spark.sql("DROP TABLE IF EXISTS bench_bucketed")
        (df.repartition(BUCKETS, "id").write.mode("overwrite").option("path", out)
         .bucketBy(BUCKETS, "id").sortBy("id").saveAsTable("bench_bucketed"))
        return
    writer = df.write.mode("overwrite")
    if variant.partition_by:
        writer = writer.partitionBy(*variant.partition_by)
    writer.parquet(out)


def create_lake_table(path: str, variant: Variant) -> None:
    spec: dict[str, Any] = {"table": path, "schema": SCHEMA}
    if variant.partition_by:
        spec["partition_by"] = list(variant.partition_by)
    if variant.bucketed:
        spec["bucket"] = {"columns": ["id"], "count": BUCKETS, "sort_columns": ["id"]}
    run(None, "create_table", spec)


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
    checks: dict[str, dict[str, Any]] = {}
    total = args.warmup + args.rounds
    for round_no in range(total):
        counted = round_no >= args.warmup
        for variant in variants:
            out = str(root / f"baseline-{variant.name}")
            # rotate who goes first, so nobody always runs on a warmer JVM or a quieter machine
            order = who_all[round_no % len(who_all):] + who_all[:round_no % len(who_all)]
            metrics: dict[str, Any] = {}
            for who in order:
                table = str(root / f"lake-{variant.name}-{who}-{round_no}")
                if who == "baseline":
                    seconds, _ = timed(partial(baseline_write, spark, src, out, variant))
                else:
                    create_lake_table(table, variant)
                    seconds, got = timed(partial(writers[who], spark, src, table))
                    if who == "ours":
                        metrics = got
                if counted:
                    samples[variant.name][who].append(seconds)
                print(f"  round {round_no + 1}/{total}{'' if counted else ' (warm-up)'} {variant.name:13s} "
                      f"{who:8s} {seconds:6.2f} s", flush=True)
            if round_no == total - 1:
                checks[variant.name] = verify(spark, out, str(root / f"lake-{variant.name}-ours-{round_no}"),
                                              metrics, args.rows)
            for who in writers:
                shutil.rmtree(root / f"lake-{variant.name}-{who}-{round_no - 1}", ignore_errors=True)
    results = []
    for variant in variants:
        got = samples[variant.name]
        base = got["baseline"]
        row: dict[str, Any] = {"variant": variant.name, "baseline_seconds": median(base),
                               "baseline_all": base, **checks[variant.name]}
        for who in writers:
            row[f"{who}_seconds"] = median(got[who])
            row[f"{who}_ratio"] = ratio(median(got[who]), median(base))
            # other load only ever adds time: the ratio of each back-to-back pair is less noisy than the medians
            row[f"{who}_paired_ratio_median"] = median([o / b for o, b in zip(got[who], base, strict=True)])
            row[f"{who}_all"] = got[who]
        row["meets_goal"] = row["ours_seconds"] <= GOAL_RATIO * row["baseline_seconds"]
        results.append(row)
    return results


def verify(spark: SparkSession, out: str, table: str, metrics: dict[str, Any], rows: int) -> dict[str, Any]:
    """Row counts and file facts of both outputs of the last round."""
    lake = LakeTable.open(table)
    lake_rows = lake.read(spark).count()
    baseline_rows = spark.read.parquet(out).count()
    snapshot = lake.snapshot()
    return {
        "source_rows": rows, "baseline_rows": baseline_rows, "lake_rows": lake_rows,
        "rows_match": lake_rows == baseline_rows == rows == metrics.get("rows_added"),
        "baseline_files": len(list(Path(out).rglob("*.parquet"))), "lake_files": len(snapshot.files),
        "baseline_bytes": dir_bytes(Path(out)), "lake_bytes": snapshot.bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows in the source (default 4000000)")
    parser.add_argument("--source-files", type=int, default=4, help="Parquet files in the source (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not counted (default 1)")
    parser.add_argument("--old-path", action="store_true",
                        help="also time the previous pyarrow writer (needs a checkout of commit 5975ca5)")
    parser.add_argument("--variants", default=",".join(v.name for v in VARIANTS),
                        help="comma-separated variants to run (default: all)")
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
    if args.rows < 1 or args.rounds < 1 or args.warmup < 0 or args.source_files < 1:
        parser.error("--rows, --rounds and --source-files must be >= 1, --warmup >= 0")

    machine = machine_info()
    print(f"append benchmark: {args.rows} rows, {machine['nproc']} cores, load {machine['load_average']}")
    with scratch_dir("lake-bench-append-", keep=args.keep) as root:
        conf = dict(DEFAULT_CONF)  # the runner's session conf (jobs/session.py)
        spark = local_spark("airflow-lake bench_append", conf, root / "warehouse")
        try:
            src = str(root / "source")
            seconds, source_bytes = timed(lambda: make_source(spark, Path(src), args.rows, args.source_files))
            print(f"source: {args.rows} rows, {source_bytes / 1e6:.1f} MB in {args.source_files} files "
                  f"(generated in {seconds:.1f} s)")
            results = run_rounds(spark, root, src, args)
        finally:
            spark.stop()
    load_end = [round(x, 2) for x in os.getloadavg()]
    print()
    headers = ["variant", "baseline s", "ours s", "ours/baseline", "paired"]
    if args.old_path:
        headers += ["old s", "old/baseline"]
    headers += ["goal", "rows match"]
    table_rows = []
    for r in results:
        line = [r["variant"], r["baseline_seconds"], r["ours_seconds"], f"{r['ours_ratio']:.2f}x",
                f"{r['ours_paired_ratio_median']:.2f}x"]
        if args.old_path:
            line += [r["old_seconds"], f"{r['old_ratio']:.2f}x"]
        line += ["ok" if r["meets_goal"] else f"MISS (> {GOAL_RATIO}x)", r["rows_match"]]
        table_rows.append(line)
    print_table(headers, table_rows)
    print(f"load average: start {machine['load_average']}, end {load_end}")
    write_result(args.json_out, {
        "benchmark": "append", "machine": machine, "args": vars(args), "goal_ratio": GOAL_RATIO,
        "load_average_end": load_end, "spark_conf": conf, "source_bytes": source_bytes, "results": results,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
