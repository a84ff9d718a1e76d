"""Benchmark: reading a bucketed lake table's snapshot as the number of live files grows, three ways, one session.

For each `--files` size N, a real lake table (`LakeTable.create`: k BIGINT, v BIGINT, dt STRING, partitioned by
dt, bucketed by k into `--buckets` B buckets) is written with `table.write` twice: an append, then an overwrite
of the whole table with the same keys. That gives N live files (N/B partitions x B buckets, `--rows-per-file`
rows each) and as many replaced (dead) files still on disk in the same partition directories (no vacuum or
clean runs); the script checks both counts. Then, in one local[2] SparkSession with the runner's conf and
`buckets.catalog.READ_CONF`, it takes turns between:
  trie   `table.read(spark)`: a catalog table CLUSTERED BY (k), LOCATION the root, created with
         manageFilesourcePartitions=false, pathGlobFilter = the trie glob of the live file names (catalog.py)
  flat   the same code with the glob flat, {name1,...,nameN} (`catalog.name_glob` swapped for the read)
  plain  `table.scan().to_df(spark)`: what unbucketed reads do since this benchmark: spark.read with
         basePath = root and pathGlobFilter = the trie glob, over the live files' directories (no bucketing)
  paths  spark.read.schema(s).option("basePath", root).parquet(*live file paths): what unbucketed reads did
         before (no bucketing; the baseline)
Each turn times: building the DataFrame (plan; for the catalog ways this includes CREATE TABLE), a full count(),
a point query where("k = 5").count(), count() again on the same DataFrame (recount), and a second read of the
same table in the same session (a new DataFrame: plan + count). Every count is checked against the snapshot's
live rows (a dead file read would double them). One warm-up round is dropped; the medians of `--rounds` rounds
are reported per size, with ratios vs the path list.

Writing the tables takes long (about 20 s per 1,000 files per write on 2 cores: ~15 min for 20,000), so
`--tables DIR` keeps them in DIR and a later run with the same DIR reuses them (`--build-only` just builds):

    .venv/bin/python benchmarks/bench_bucketed_read_scale.py --files 1000,5000,20000 --tables /tmp/bbrs \
        --json-out /tmp/bench_bucketed_read_scale.json
    .venv/bin/python benchmarks/bench_bucketed_read_scale.py --files 1000 --rounds 1    # quick, ~2 min
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import local_spark, machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.spark import bucketed_read as catalog
from airflow_lake.lake.spark import globs
from airflow_lake.lake.spark.schema import to_struct
from airflow_lake.lake.table import LakeTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA = "k BIGINT, v BIGINT, dt STRING"
METHODS = ("trie", "flat", "plain", "paths")
STEPS = ("plan", "count", "point", "recount", "read2_plan", "read2_count")
POINT_KEY = 5


def flat_glob(names: Sequence[str]) -> str:
    """The glob catalog.py would use without the trie: one flat {n1,...,nK} of all the names."""
    unique = sorted(set(names))
    return "{" + ",".join(globs._escape(n) for n in unique) + "}"


@contextmanager
def flat_globs() -> Iterator[None]:
    """Make `table.read` build its catalog table with the flat glob instead of the trie."""
    trie = catalog.name_glob
    catalog.name_glob = flat_glob
    try:
        yield
    finally:
        catalog.name_glob = trie


def read_trie(spark: SparkSession, table: LakeTable) -> DataFrame:
    return table.read(spark)


def read_flat(spark: SparkSession, table: LakeTable) -> DataFrame:
    with flat_globs():
        return table.read(spark)


def read_plain(spark: SparkSession, table: LakeTable) -> DataFrame:
    return table.scan().to_df(spark)


def read_paths(spark: SparkSession, table: LakeTable) -> DataFrame:
    scan = table.scan()
    root = scan.storage.uri("")
    reader = spark.read.schema(to_struct(scan.snapshot.spec)).option("basePath", root)
    return reader.parquet(*[scan.storage.uri(f.path) for f in scan.files])


READERS: dict[str, Callable[[SparkSession, LakeTable], DataFrame]] = {
    "trie": read_trie, "flat": read_flat, "plain": read_plain, "paths": read_paths,
}


def generation(spark: SparkSession, rows: int, partitions: int, offset: int) -> DataFrame:
    """`rows` rows over `partitions` dt values; every dt holds the keys 0..rows/partitions-1 once."""
    from pyspark.sql import functions as F

    return spark.range(0, rows).select(
        (F.col("id") / partitions).cast("bigint").alias("k"),
        (F.col("id") + offset).alias("v"),
        F.format_string("d%05d", F.col("id") % partitions).alias("dt"),
    )


def build_table(spark: SparkSession, path: Path, files: int, buckets: int, rows_per_file: int) -> dict[str, Any]:
    """A lake table with ~`files` live files and as many dead ones on disk (reused if `path` holds one, as
    `--tables` leaves it); facts about it."""
    partitions = max(1, files // buckets)
    rows = partitions * buckets * rows_per_file
    written = path.with_name(path.name + ".written.json")
    if LakeTable.exists(str(path)) and written.exists():
        first_s, second_s = json.loads(written.read_text())
        print(f"reusing {path} (written before in {first_s:.1f} + {second_s:.1f} s)", flush=True)
    else:
        table = LakeTable.create(str(path), {"schema": SCHEMA, "partition_by": ["dt"],
                                             "bucket": {"columns": ["k"], "count": buckets}})
        first_s, _ = timed(lambda: table.write(generation(spark, rows, partitions, 0)))
        second_s, _ = timed(lambda: table.write(generation(spark, rows, partitions, rows), mode="overwrite"))
        written.write_text(json.dumps([first_s, second_s]))
    snapshot = LakeTable.open(str(path)).snapshot()
    live = {f.path for f in snapshot.files}
    on_disk = {p.relative_to(path).as_posix() for p in path.glob("dt=*/*.parquet")}
    live_rows = sum(f.rows for f in snapshot.files)
    facts = {
        "partitions": partitions, "buckets": buckets, "rows": rows, "live_files": len(live),
        "files_on_disk": len(on_disk), "dead_files_on_disk": len(on_disk - live), "live_rows": live_rows,
        "point_rows": partitions if rows // partitions > POINT_KEY else 0,
        "write_append_seconds": round(first_s, 2), "write_overwrite_seconds": round(second_s, 2),
        "trie_glob_chars": len(globs.name_glob([os.path.basename(p) for p in live])),
        "flat_glob_chars": len(flat_glob([os.path.basename(p) for p in live])),
    }
    if not live <= on_disk:
        raise AssertionError(f"live files missing on disk: {sorted(live - on_disk)[:3]}")
    if facts["dead_files_on_disk"] != len(live) or live_rows != rows:
        raise AssertionError(f"expected {len(live)} dead files on disk and {rows} live rows: {facts}")
    return facts


def one_turn(spark: SparkSession, path: Path, method: str, live_rows: int, point_rows: int) -> dict[str, float]:
    """Time one read of the table (and a second one) by `method`; check every count."""
    reader = READERS[method]
    table = LakeTable.open(str(path))
    got: dict[str, float] = {}
    got["plan"], df = timed(partial(reader, spark, table))
    got["count"], n = timed(df.count)
    got["point"], p = timed(lambda: df.where(f"k = {POINT_KEY}").count())
    got["recount"], n2 = timed(df.count)
    got["read2_plan"], df2 = timed(partial(reader, spark, table))
    got["read2_count"], n3 = timed(df2.count)
    if not n == n2 == n3 == live_rows or p != point_rows:
        raise AssertionError(f"{method}: counts {n}, {n2}, {n3} and point {p}; the live rows are {live_rows} "
                             f"and {point_rows}")
    return got


def run_size(spark: SparkSession, path: Path, facts: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Take turns between the methods, rotating who goes first; medians of the counted rounds."""
    samples: dict[str, dict[str, list[float]]] = {m: {s: [] for s in STEPS} for m in METHODS}
    total = args.warmup + args.rounds
    for round_no in range(total):
        counted = round_no >= args.warmup
        order = METHODS[round_no % len(METHODS):] + METHODS[:round_no % len(METHODS)]
        for method in order:
            got = one_turn(spark, path, method, facts["live_rows"], facts["point_rows"])
            if counted:
                for step in STEPS:
                    samples[method][step].append(got[step])
            print(f"  {facts['live_files']} files, round {round_no + 1}/{total}{'' if counted else ' (warm-up)'} "
                  f"{method:5s} " + " ".join(f"{s} {got[s]:.2f}" for s in STEPS), flush=True)
    result: dict[str, Any] = {**facts, "methods": {}}
    for method in METHODS:
        med = {step: median(samples[method][step]) for step in STEPS}
        med["first"] = med["plan"] + med["count"]
        med["second"] = med["read2_plan"] + med["read2_count"]
        result["methods"][method] = {"median": med, "all": samples[method]}
    paths = result["methods"]["paths"]["median"]
    for method in METHODS:
        med = result["methods"][method]["median"]
        result["methods"][method]["ratio_vs_paths"] = {k: ratio(med[k], paths[k])
                                                       for k in ("first", "point", "second")}
    return result


def print_size(result: dict[str, Any]) -> None:
    print(f"\n{result['live_files']} live files ({result['partitions']} partitions x {result['buckets']} buckets, "
          f"{result['rows']} rows) + {result['dead_files_on_disk']} dead files on disk; glob chars: trie "
          f"{result['trie_glob_chars']}, flat {result['flat_glob_chars']}; table written in "
          f"{result['write_append_seconds']} + {result['write_overwrite_seconds']} s")
    headers = ["method", "plan s", "count s", "first s", "point s", "recount s", "2nd read s",
               "first/paths", "point/paths", "2nd/paths"]
    rows = []
    for method in METHODS:
        med = result["methods"][method]["median"]
        rat = result["methods"][method]["ratio_vs_paths"]
        rows.append([method, med["plan"], med["count"], med["first"], med["point"], med["recount"], med["second"],
                     f"{rat['first']:.2f}x", f"{rat['point']:.2f}x", f"{rat['second']:.2f}x"])
    print_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1000,5000,20000",
                        help="live file counts, comma-separated (default 1000,5000,20000)")
    parser.add_argument("--buckets", type=int, default=100, help="buckets per partition (default 100)")
    parser.add_argument("--rows-per-file", type=int, default=20, help="rows per data file (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not counted (default 1)")
    parser.add_argument("--tables", default=None,
                        help="build the tables in this directory and keep them; a later run with the same "
                             "directory reuses them (default: a scratch directory, deleted)")
    parser.add_argument("--build-only", action="store_true", help="only build the tables (with --tables)")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    try:
        sizes = [int(x) for x in args.files.split(",") if x.strip()]
    except ValueError:
        parser.error("--files: comma-separated integers, e.g. 1000,5000,20000")
    if not sizes or min(sizes) < args.buckets or args.buckets < 1 or args.rounds < 1 or args.warmup < 0 \
            or args.rows_per_file < 1:
        parser.error("--files must be >= --buckets >= 1, --rounds and --rows-per-file >= 1, --warmup >= 0")
    if args.build_only and not args.tables:
        parser.error("--build-only needs --tables")
    machine = machine_info()
    print(f"bucketed read scaling: files {sizes}, {args.buckets} buckets, {machine['nproc']} cores, "
          f"load {machine['load_average']}")
    results = []
    with scratch_dir("lake-bench-bucketed-read-", keep=args.keep) as root:
        conf = {**DEFAULT_CONF, **catalog.READ_CONF}  # the runner's conf + the recommended bucketed-read conf
        spark = local_spark("airflow-lake bench_bucketed_read_scale", conf, root / "warehouse")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            for files in sizes:
                tables = Path(args.tables) if args.tables else root
                tables.mkdir(parents=True, exist_ok=True)
                path = tables / f"table-{files}-b{args.buckets}-r{args.rows_per_file}"
                seconds, facts = timed(partial(build_table, spark, path, files, args.buckets, args.rows_per_file))
                print(f"table with {facts['live_files']} live + {facts['dead_files_on_disk']} dead files built in "
                      f"{seconds:.1f} s (load {[round(x, 2) for x in os.getloadavg()]})", flush=True)
                if not args.build_only:
                    results.append(run_size(spark, path, facts, args))
        finally:
            spark.stop()
    load_end = [round(x, 2) for x in os.getloadavg()]
    for result in results:
        print_size(result)
    print(f"\nload average: start {machine['load_average']}, end {load_end}")
    write_result(args.json_out, {
        "benchmark": "bucketed_read_scale", "machine": machine, "args": vars(args), "spark_conf": conf,
        "load_average_end": load_end, "results": results,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
