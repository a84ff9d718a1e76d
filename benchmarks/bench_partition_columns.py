"""Benchmark: data files with the partition columns inside vs only in the path (the Hive convention).

The native writer follows the Hive convention. This measures what keeping the partition columns in the files
too (as the previous writer did) would cost, with Spark's own writer in one local[2] session, taking turns:
  hive    df.write.partitionBy("dt", "k").parquet(out)                      files hold id, s, d
  inside  df.withColumn("p_dt", dt).withColumn("p_k", k).write.partitionBy("p_dt", "p_k").parquet(out)
                                                                           files hold id, s, d, dt, k
Reports the median write time and the bytes of each, and the time of a full scan of each (`count` of a column
sum), median of `--rounds` after one warm-up.

    .venv/bin/python benchmarks/bench_partition_columns.py --rows 4000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from common import dir_bytes, local_spark, machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.jobs.session import DEFAULT_CONF


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    machine = machine_info()
    print(f"partition columns benchmark: {args.rows} rows, load {machine['load_average']}")
    with scratch_dir("lake-bench-partcols-") as root:
        spark = local_spark("airflow-lake bench_partition_columns", dict(DEFAULT_CONF), root / "warehouse")
        try:
            from pyspark.sql import functions as F

            src = str(root / "source")
            spark.range(0, args.rows, numPartitions=4).select(
                "id", F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 5).cast("int")).cast("string")
                .alias("dt"), (F.col("id") % 7).alias("k"),
                F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 24).alias("s"),
                (F.rand(42) * 1000).alias("d")).write.parquet(src)

            def write(kind: str) -> None:
                out = str(root / kind)
                shutil.rmtree(out, ignore_errors=True)
                df = spark.read.parquet(src)
                if kind == "hive":
                    df.write.partitionBy("dt", "k").parquet(out)
                else:
                    df.withColumn("p_dt", F.col("dt")).withColumn("p_k", F.col("k")) \
                        .write.partitionBy("p_dt", "p_k").parquet(out)

            def scan(kind: str) -> None:
                spark.read.parquet(str(root / kind)).agg(F.sum("d")).collect()

            samples: dict[str, list[float]] = {"hive write": [], "inside write": [], "hive scan": [],
                                               "inside scan": []}
            for round_no in range(args.rounds + 1):
                order = ("hive", "inside") if round_no % 2 == 0 else ("inside", "hive")
                for kind in order:
                    seconds, _ = timed(lambda kind=kind: write(kind))  # type: ignore[misc]
                    scan_seconds, _ = timed(lambda kind=kind: scan(kind))  # type: ignore[misc]
                    if round_no:
                        samples[f"{kind} write"].append(seconds)
                        samples[f"{kind} scan"].append(scan_seconds)
            sizes = {kind: dir_bytes(root / kind) for kind in ("hive", "inside")}
        finally:
            spark.stop()
    result: dict[str, Any] = {name: median(values) for name, values in samples.items()}
    print_table(["", "hive (path only)", "inside (path + file)", "inside/hive"], [
        ["write s", result["hive write"], result["inside write"],
         f"{ratio(result['inside write'], result['hive write']):.2f}x"],
        ["full scan s", result["hive scan"], result["inside scan"],
         f"{ratio(result['inside scan'], result['hive scan']):.2f}x"],
        ["bytes", sizes["hive"], sizes["inside"], f"{ratio(sizes['inside'], sizes['hive']):.3f}x"],
    ])
    print(f"load average: start {machine['load_average']}, end {[round(x, 2) for x in os.getloadavg()]}")
    write_result(args.json_out, {"benchmark": "partition_columns", "machine": machine, "args": vars(args),
                                 "medians": result, "bytes": sizes, "all": samples})
    return 0


if __name__ == "__main__":
    sys.exit(main())
