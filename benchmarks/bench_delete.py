"""Benchmark: a point delete (`delete` with one key) on a table clustered by that key, vs plain Spark.

Everything runs in one process, on one local[2] SparkSession, in the same run as its baseline.

Data: `--rows` rows (k BIGINT 0..rows-1, x BIGINT random, s STRING of 16 random letters), generated from a fixed
seed and written once to an unpartitioned lake table as `--files` files clustered by k (range-partitioned and
sorted by k, the layout LINEAR clustering on k gives). Every measured run starts from a fresh copy of that
table (`shutil.copytree`, outside the timed region).

    ours      `run(spark, "delete", {"table", "filters": [["k", "=", key]]})` for a random key (one per round):
              stats skipping picks the file(s) whose k range holds the key, the matches are counted per file,
              and each such file is rewritten without the row (order kept), then one replace commit.
    baseline  plain Spark on the same input file(s) the delete rewrote: `spark.read.parquet(<those files>)
              .where(k != key).write.parquet(<new dir>)` — no stats lookup, no count, no commit.
    Rounds alternate which runs first. Reported: files rewritten (goal <= 2), median seconds of each, the ratio
    of the medians (goal <= 1.2).

    .venv/bin/python benchmarks/bench_delete.py --out /tmp/bench_delete.json          # 8M rows, 64 files
    .venv/bin/python benchmarks/bench_delete.py --rows 400000 --rounds 3              # a quick run
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import local_spark, machine_info, median, print_table, ratio, scratch_dir, write_result


def build(spark: Any, path: Path, rows: int, files: int) -> None:
    from pyspark.sql import functions as F

    from airflow_lake.lake import LakeTable

    table = LakeTable.create(str(path), {"schema": "k BIGINT, x BIGINT, s STRING"})
    letters = [F.substring(F.lit("abcdefghijklmnopqrstuvwxyz"), (F.rand(seed) * 26 + 1).cast("int"), 1)
               for seed in range(16)]
    df = spark.range(0, rows, 1, max(2, files // 8)).select(
        F.col("id").alias("k"), (F.rand(7) * 1_000_000).cast("bigint").alias("x"), F.concat(*letters).alias("s"))
    table.write(df.repartitionByRange(files, "k").sortWithinPartitions("k"))
    assert len(table.snapshot().files) == files, len(table.snapshot().files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)

    from airflow_lake.jobs import run
    from airflow_lake.lake import LakeTable

    with scratch_dir("bench-delete-") as work:
        spark = local_spark("bench-delete", {"spark.sql.shuffle.partitions": "8"}, work / "warehouse")
        spark.sparkContext.setLogLevel("ERROR")
        source = work / "source"
        started = time.perf_counter()
        build(spark, source, args.rows, args.files)
        print(f"table: {args.rows:,} rows in {args.files} files, built in {time.perf_counter() - started:.1f} s")
        rng = random.Random(42)
        ours: list[float] = []
        base: list[float] = []
        rewritten: list[int] = []
        scanned: list[int] = []
        for round_ in range(args.rounds + 1):  # round 0 warms up both (untimed)
            key = rng.randrange(args.rows)
            copy = work / f"t{round_}"
            shutil.copytree(source, copy)
            table = LakeTable.open(str(copy))
            files = [f for f in table.snapshot().files if f.stats["k"].min <= key <= f.stats["k"].max]

            def delete(copy: Path = copy, key: int = key) -> Any:
                t0 = time.perf_counter()
                out = run(spark, "delete", {"table": str(copy), "filters": [["k", "=", key]]})
                return time.perf_counter() - t0, out

            def plain(round_: int = round_, key: int = key, files: list[Any] = files,
                      table: Any = table) -> float:
                t0 = time.perf_counter()
                spark.read.parquet(*[table.storage.uri(f.path) for f in files]).where(f"k != {key}") \
                    .write.parquet(str(work / f"plain{round_}"))
                return time.perf_counter() - t0

            if round_ % 2:
                seconds, out = delete()
                plain_seconds = plain()
            else:
                plain_seconds = plain()
                seconds, out = delete()
            assert out["rows_deleted"] == 1, out
            if round_:
                ours.append(seconds)
                base.append(plain_seconds)
                rewritten.append(out["files_rewritten"])
                scanned.append(out["files_scanned"])
            shutil.rmtree(copy, ignore_errors=True)
        result = {"rows": args.rows, "files": args.files, "rounds": args.rounds,
                  "files_rewritten_max": max(rewritten), "files_scanned_max": max(scanned),
                  "delete_median_s": round(median(ours), 3), "plain_spark_median_s": round(median(base), 3),
                  "ratio": ratio(median(ours), median(base)), "delete_s": ours, "plain_s": base,
                  "machine": machine_info()}
        print_table(["measure", "value", "goal"], [
            ["files rewritten (max over rounds)", result["files_rewritten_max"], "<= 2"],
            ["files scanned (max over rounds)", result["files_scanned_max"], ""],
            ["delete, median s", result["delete_median_s"], ""],
            ["plain Spark read-filter-write, median s", result["plain_spark_median_s"], ""],
            ["ratio delete / plain", result["ratio"], "<= 1.2"],
        ])
        write_result(args.out, result)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
