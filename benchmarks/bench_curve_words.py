"""The curve words alone: the Java UDF (`airflow_lake/jvm/CurveWords.java`) vs the Arrow UDF in Python workers.

On `--rows` rows of a Parquet file (x BIGINT lognormal, y DOUBLE normal with 1% NULL, s STRING of a Zipf-like
integer behind a shared prefix), one local[2] session reads the file and writes to Spark's `noop` format:

- plain: the rows only (the baseline of the same process);
- jvm / python: the rows plus the words of a ZORDER or HILBERT SAMPLE curve (1,024 ranges, 64 file cuts) over
  (x, y) and over (s, x, y), computed by `keys.words_column` with the JVM code and without it.

The three alternate for `--rounds` rounds after one warm-up of each; the report gives medians, the cost per row
above the plain read (us), and jvm / python. The words of both are checked equal first (a count of rows whose words
differ: must be 0).

    PYTHONPATH=. python benchmarks/bench_curve_words.py --rows 4000000 --rounds 5
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import local_spark, machine_info, median, print_table, progress, scratch_dir, timed, write_result

from airflow_lake.lake.clustering import keys
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.spec.table_spec import TableSpec

SCHEMA = "x BIGINT, y DOUBLE, s STRING"
CASES = [("ZORDER", ("x", "y")), ("HILBERT", ("x", "y")), ("ZORDER", ("s", "x", "y"))]


def data(path: Path, rows: int) -> None:
    rng = np.random.default_rng(20261130)
    y = rng.normal(0, 1e3, rows)
    pq.write_table(pa.table({
        "x": pa.array(np.floor(rng.lognormal(10, 2, rows)).astype(np.int64)),
        "y": pa.array(y, mask=rng.random(rows) < 0.01),
        "s": pa.array([f"https://example.com/item/{v}" for v in rng.zipf(1.3, rows) % 100_000]),
    }), path, row_group_size=1 << 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    spec = TableSpec.from_dict({"schema": SCHEMA})
    with scratch_dir("lake-bench-curve-words") as scratch:
        source = scratch / "rows.parquet"
        data(source, args.rows)
        spark = local_spark("bench-curve-words", {"spark.sql.shuffle.partitions": "4"}, scratch / "warehouse")
        df = spark.read.parquet(str(source))
        rows: list[list[Any]] = []
        results: dict[str, Any] = {}
        for kind, columns in CASES:
            name = f"{kind}({', '.join(columns)})"
            model, inputs = keys.curve_model(df, Layout(kind, columns, "SAMPLE", 1024), spec, files=64, seed=1)
            types = [spec.column(c).type for c in columns]
            jvm, where = keys.words_column(df, model, inputs, types)
            python, _ = keys.words_column(df, model, inputs, types, jvm=False)
            assert where == "the JVM", where
            differ = df.where(jvm != python).count()
            runs: dict[str, Any] = {
                "plain": lambda: df.write.format("noop").mode("overwrite").save(),
                "jvm": lambda jvm=jvm: df.withColumn("w", jvm).write.format("noop").mode("overwrite").save(),
                "python": lambda python=python: df.withColumn("w", python).write.format("noop").mode("overwrite")
                .save(),
            }
            times: dict[str, list[float]] = {k: [] for k in runs}
            for run in runs.values():  # warm-up
                timed(run)
            for r in range(args.rounds):
                order = list(runs)[r % 3:] + list(runs)[:r % 3]
                for key in order:
                    times[key].append(timed(runs[key])[0])
                progress(f"{name} round {r + 1}: " + ", ".join(f"{k} {times[k][-1]:.2f} s" for k in runs))
            plain, jvm_s, python_s = (median(times[k]) for k in ("plain", "jvm", "python"))
            per_row = {k: (median(times[k]) - plain) / args.rows * 1e6 for k in ("jvm", "python")}
            rows.append([name, differ, f"{plain:.2f}", f"{jvm_s:.2f}", f"{python_s:.2f}", f"{per_row['jvm']:.3f}",
                         f"{per_row['python']:.3f}", f"{jvm_s / python_s:.2f}x"])
            results[name] = {"differ": differ, "times": times, "per_row_us": per_row}
        spark.stop()
    print(f"curve words on {args.rows:,} rows (SAMPLE, 1,024 ranges, 64 file cuts), medians of {args.rounds} rounds")
    print_table(["curve", "rows whose words differ", "plain read s", "+ JVM words s", "+ Arrow UDF words s",
                 "JVM us / row", "Arrow UDF us / row", "JVM / Arrow UDF"], rows)
    write_result(args.json_out, {"machine": machine_info(), "rows": args.rows, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
