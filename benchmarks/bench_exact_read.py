"""Benchmark: what restricting a read to exactly the snapshot's files costs (`scan.exactly`, `listing`).

The same range sort (`repartitionByRange(F, "x")` + `sortWithinPartitions("x")` + a Parquet write, as a LINEAR
clustering does) of a lake table of `--rows` rows in `--input-files` appends, read three ways, alternating in one
session (the order rotated each round), each run's row count checked equal:

- `listed`: `Scan.to_df` as it is — a classic read that listed exactly the scan's files has no row filter;
- `filtered`: the same read with the `_metadata.file_path IN (...)` filter every read had before (`exactly`);
- `plain`: `spark.read.parquet(<the live files>)` (the baseline: Spark on the same files).

    PYTHONPATH=. python benchmarks/bench_exact_read.py --rows 4000000 --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_clustering import SCHEMA_XY, build_lake, live_files, split, xy_chunk
from common import local_spark, machine_info, median, progress, ratio, timed

from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.spark.scan import exactly
from airflow_lake.lake.table import LakeTable

WAYS = ("listed", "filtered", "plain")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--input-files", type=int, default=8)
    parser.add_argument("--files", type=int, default=64, help="files the sort writes (default 64)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="lake-bench-exact-"))
    spark = local_spark("airflow-lake bench_exact_read", {**DEFAULT_CONF, "spark.sql.shuffle.partitions": "4"},
                        root / "warehouse")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        build_lake(spark, root / "lake", SCHEMA_XY,
                   [xy_chunk(n, i) for i, n in enumerate(split(args.rows, args.input_files))], root / "staging")
        table = LakeTable.open(str(root / "lake"))
        inputs = live_files(root / "lake")
        out = root / "out"

        def read(way: str) -> Any:
            if way == "plain":
                return spark.read.parquet(*inputs)
            scan = table.scan()
            df = scan.to_df(spark)
            return exactly(df, scan.storage, scan.files) if way == "filtered" else df

        def sort_write(way: str) -> None:
            shutil.rmtree(out, ignore_errors=True)
            read(way).repartitionByRange(args.files, "x").sortWithinPartitions("x").write.parquet(str(out))

        for way in WAYS:  # warm-up
            sort_write(way)
        seconds: dict[str, list[float]] = {w: [] for w in WAYS}
        for round_no in range(args.rounds):
            order = WAYS[round_no % len(WAYS):] + WAYS[:round_no % len(WAYS)]
            for way in order:
                took, _ = timed(lambda w=way: sort_write(w))  # type: ignore[misc]
                rows = spark.read.parquet(str(out)).count()
                if rows != args.rows:
                    raise RuntimeError(f"{way} wrote {rows} rows, not {args.rows}")
                seconds[way].append(took)
                progress(f"round {round_no + 1}/{args.rounds} {way:9s} {took:6.2f} s")
        plain = seconds["plain"]
        print(f"# bench_exact_read: {args.rows} rows, {args.input_files} input files, {args.files} output files, "
              f"{args.rounds} rounds; {machine_info()['date']}, load {machine_info()['load_average']}")
        print("| read | median s | runs s | / plain | paired (median of per-round ratios) |")
        print("|---|---|---|---|---|")
        for way in WAYS:
            runs = seconds[way]
            paired = median([a / b for a, b in zip(runs, plain, strict=True)])
            print(f"| {way} | {median(runs):.2f} | {', '.join(f'{s:.2f}' for s in runs)} | "
                  f"{ratio(median(runs), median(plain)):.3f}x | {paired:.3f}x |")
        return 0
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
