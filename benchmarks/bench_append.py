"""Benchmark: an append through the job runner vs a plain Spark Parquet write of the same data, in one session.

Generates a source Parquet dataset once (`--rows` rows: id bigint, k bigint = id % 7, s string, d double), then in
one local[2] SparkSession alternates, for an unpartitioned and a partitioned (by k) variant:
  baseline  spark.read.parquet(src).write.mode("overwrite")[.partitionBy("k")].parquet(out)
  ours      airflow_lake.jobs.run(spark, "write", {"table": t, "source": {"path": src}})  (t made by create_table)
One warm-up round is dropped; the median of `--rounds` rounds is reported, with ours/baseline against the 1.2x goal.
With `--profile` (or when the goal is missed) it also times pieces of our write path to show where the time goes.

    .venv/bin/python benchmarks/bench_append.py --rows 4000000 --json-out /tmp/bench_append.json
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import dir_bytes, local_spark, machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.jobs import run
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.table import LakeTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

GOAL_RATIO = 1.2
SCHEMA = "id BIGINT, k BIGINT, s STRING, d DOUBLE"
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


@dataclass(frozen=True)
class Variant:
    """One pair of writes to compare."""

    name: str
    partition_by: tuple[str, ...]


VARIANTS = (Variant("unpartitioned", ()), Variant("partitioned by k", ("k",)))


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
    writer = spark.read.parquet(src).write.mode("overwrite")
    if variant.partition_by:
        writer = writer.partitionBy(*variant.partition_by)
    writer.parquet(out)


def create_lake_table(path: str, variant: Variant) -> None:
    spec: dict[str, Any] = {"table": path, "schema": SCHEMA}
    if variant.partition_by:
        spec["partition_by"] = list(variant.partition_by)
    run(None, "create_table", spec)


def ours_write(spark: SparkSession, src: str, table: str) -> dict[str, Any]:
    return run(spark, "write", {"table": table, "source": {"path": src}})


def run_rounds(spark: SparkSession, root: Path, src: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Alternate baseline and ours per variant; the first `--warmup` rounds are not counted."""
    samples: dict[str, dict[str, list[float]]] = {v.name: {"baseline": [], "ours": []} for v in VARIANTS}
    checks: dict[str, dict[str, Any]] = {}
    total = args.warmup + args.rounds
    for round_no in range(total):
        counted = round_no >= args.warmup
        for variant in VARIANTS:
            slug = variant.name.split()[0]
            out = str(root / f"baseline-{slug}")
            table = str(root / f"lake-{slug}-{round_no}")
            create_lake_table(table, variant)
            # alternate who goes first, so neither always runs on a warmer JVM or a quieter machine
            order = ("baseline", "ours") if round_no % 2 == 0 else ("ours", "baseline")
            metrics: dict[str, Any] = {}
            for who in order:
                if who == "baseline":
                    seconds, _ = timed(partial(baseline_write, spark, src, out, variant))
                else:
                    seconds, metrics = timed(partial(ours_write, spark, src, table))
                if counted:
                    samples[variant.name][who].append(seconds)
                print(f"  round {round_no + 1}/{total}{'' if counted else ' (warm-up)'} {variant.name:17s} "
                      f"{who:8s} {seconds:6.2f} s", flush=True)
            if round_no == total - 1:
                checks[variant.name] = verify(spark, out, table, metrics, args.rows)
            previous = root / f"lake-{slug}-{round_no - 1}"
            if previous.exists():
                _remove(previous)
    results = []
    for variant in VARIANTS:
        base, ours = samples[variant.name]["baseline"], samples[variant.name]["ours"]
        results.append({
            "variant": variant.name, "baseline_seconds": median(base), "ours_seconds": median(ours),
            "ratio": ratio(median(ours), median(base)), "meets_goal": median(ours) <= GOAL_RATIO * median(base),
            # other load on the machine only ever adds time: the minimum and the ratio of each back-to-back
            # pair are less noisy than the medians, so they are reported too
            "baseline_min": min(base), "ours_min": min(ours), "ratio_of_mins": ratio(min(ours), min(base)),
            "paired_ratio_median": median([o / b for o, b in zip(ours, base, strict=True)]),
            "baseline_all": base, "ours_all": ours, **checks[variant.name],
        })
    return results


def verify(spark: SparkSession, out: str, table: str, metrics: dict[str, Any], rows: int) -> dict[str, Any]:
    """Row counts and file facts of both outputs of the last round."""
    lake_rows = LakeTable.open(table).read(spark).count()
    baseline_rows = spark.read.parquet(out).count()
    snapshot = LakeTable.open(table).snapshot()
    return {
        "source_rows": rows, "baseline_rows": baseline_rows, "lake_rows": lake_rows,
        "lake_rows_added_metric": metrics.get("rows_added"),
        "rows_match": lake_rows == baseline_rows == rows == metrics.get("rows_added"),
        "baseline_files": len(list(Path(out).rglob("*.parquet"))), "lake_files": len(snapshot.files),
        "baseline_bytes": dir_bytes(Path(out)), "lake_bytes": snapshot.bytes,
    }


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- profile: where does our write spend its time? ---------------------------------------------------------------
def arrow_noop(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body that only receives the batches (the cost of moving rows JVM -> Python)."""
    import pyarrow as pa

    rows = 0
    for batch in batches:
        rows += batch.num_rows
    yield pa.RecordBatch.from_pylist([{"rows": rows}], schema=pa.schema([("rows", pa.int64())]))


def arrow_write_plain(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body that writes its batches to one Parquet file with pyarrow: no stats, no partitions."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    rows = 0
    for batch in batches:
        if writer is None:
            writer = pq.ParquetWriter(f"{root}/part-{uuid.uuid4().hex}.parquet", batch.schema, compression="snappy")
        writer.write_batch(batch)
        rows += batch.num_rows
    if writer is not None:
        writer.close()
    yield pa.RecordBatch.from_pylist([{"rows": rows}], schema=pa.schema([("rows", pa.int64())]))


def profile(spark: SparkSession, root: Path, src: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time the pieces of our write path against Spark's own, interleaved, medians of `--profile-repeats`.

    All experiments read the same source in the same session. Each is run once to warm up, then the
    experiments take turns `--profile-repeats` times, so a burst of load from elsewhere hits all of them.
    """
    scratch = root / "profile"
    scratch.mkdir(exist_ok=True)
    tiny = str(scratch / "tiny-source")
    make_source(spark, Path(tiny), 1000, 1)

    def read_df() -> Any:
        return spark.read.parquet(src)

    def with_batch(size: int, fn: Callable[[], Any]) -> Callable[[], float]:
        def measured() -> float:
            spark.conf.set(ARROW_BATCH, str(size))
            try:
                return timed(fn)[0]
            finally:
                spark.conf.set(ARROW_BATCH, DEFAULT_CONF[ARROW_BATCH])
        return measured

    def ours(source: str, size: int) -> Callable[[], float]:
        def measured() -> float:
            table = str(scratch / f"lake-{time.monotonic_ns()}")
            create_lake_table(table, VARIANTS[0])
            seconds = with_batch(size, lambda: ours_write(spark, source, table))()
            _remove(Path(table))
            return seconds
        return measured

    def spark_write(source: str) -> Callable[[], float]:
        def measured() -> float:
            target = scratch / "spark"
            seconds = timed(lambda: spark.read.parquet(source).write.mode("overwrite").parquet(str(target)))[0]
            _remove(target)
            return seconds
        return measured

    def plain_write(size: int) -> Callable[[], float]:
        def measured() -> float:
            target = scratch / f"plain-{size}"
            target.mkdir(exist_ok=True)
            seconds = with_batch(size, lambda: read_df().mapInArrow(
                partial(arrow_write_plain, str(target)), "rows long").collect())()
            _remove(target)
            return seconds
        return measured

    experiments: dict[str, Callable[[], float]] = {
        "spark: read only (noop sink)": lambda: timed(
            lambda: read_df().write.format("noop").mode("overwrite").save())[0],
        "spark: write parquet (the baseline)": spark_write(src),
        "spark: write parquet of a 1000-row source (fixed cost)": spark_write(tiny),
        "ours: runner write of a 1000-row source (fixed cost)": ours(tiny, 100_000),
    }
    for size in (int(x) for x in args.profile_batches.split(",")):
        experiments[f"mapInArrow no-op, batch {size}"] = with_batch(
            size, lambda: read_df().mapInArrow(arrow_noop, "rows long").collect())
        experiments[f"mapInArrow pyarrow write, no stats, batch {size}"] = plain_write(size)
        experiments[f"ours: runner write, batch {size}"] = ours(src, size)
    experiments["prototype: spark native write + stats from footers"] = lambda: native_write_with_footer_stats(
        spark, src, scratch / "native")[0]
    experiments["sortWithinPartitions(k) + mapInArrow no-op, batch 100000"] = with_batch(
        100_000, lambda: read_df().sortWithinPartitions("k").mapInArrow(arrow_noop, "rows long").collect())

    print(f"profiling: {len(experiments)} experiments x (1 warm-up + {args.profile_repeats}) ...", flush=True)
    samples: dict[str, list[float]] = {name: [] for name in experiments}
    for warm_up in experiments.values():
        warm_up()
    for _ in range(args.profile_repeats):
        for name, fn in experiments.items():
            samples[name].append(fn())
    out: dict[str, Any] = {"repeats": args.profile_repeats,
                           "seconds": {name: median(times) for name, times in samples.items()},
                           "all": samples}
    out["prototype_footer_stats_example"] = native_write_with_footer_stats(spark, src, scratch / "native")[1]
    out["phases"] = write_phases(spark, src, scratch)
    out["driver_only"] = driver_only_profile(src, args.profile_batch_rows)
    _remove(scratch)
    return out


def native_write_with_footer_stats(spark: SparkSession, src: str, target: Path) -> tuple[float, dict[str, Any]]:
    """A possible write path: Spark's own Parquet writer, then per-file min/max/nulls from the footers.

    Spark's Parquet files carry min, max and null count per row group and column; folding them per file on the
    driver (pyarrow reads only the footers) gives the stats the lake keeps, without moving rows to Python.
    Returns (seconds, stats of the first file) so the doc can show they are there.
    """
    import pyarrow.parquet as pq

    def write_and_collect() -> dict[str, dict[str, list[Any]]]:
        spark.read.parquet(src).write.mode("overwrite").parquet(str(target))
        per_file: dict[str, dict[str, list[Any]]] = {}
        for path in sorted(target.rglob("*.parquet")):
            meta = pq.read_metadata(path)
            stats: dict[str, list[Any]] = {}
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    column = group.column(c)
                    st = column.statistics
                    entry = stats.setdefault(column.path_in_schema, [None, None, 0])
                    if st is None or not st.has_min_max:
                        continue
                    entry[0] = st.min if entry[0] is None else min(entry[0], st.min)
                    entry[1] = st.max if entry[1] is None else max(entry[1], st.max)
                    entry[2] += st.null_count
            per_file[path.name] = stats
        return per_file

    seconds, per_file = timed(write_and_collect)
    _remove(target)
    return seconds, next(iter(per_file.values()), {})


class _Stamps(logging.Handler):
    """Collects (time, message) of the lake's log records, to split one write into phases."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((time.perf_counter(), record.getMessage()))


def write_phases(spark: SparkSession, src: str, scratch: Path, repeats: int = 3) -> dict[str, float]:
    """Seconds of a runner write split by phase (median per phase of `repeats` writes)."""
    runs = []
    for n in range(repeats):
        table = scratch / f"lake-phases-{n}"
        runs.append(_one_write_phases(spark, src, str(table)))
        _remove(table)
    return {name: median([r[name] for r in runs]) for name in runs[0]}


def _one_write_phases(spark: SparkSession, src: str, table: str) -> dict[str, float]:
    """One runner write split by the core's own log lines (it logs each step at INFO)."""
    logger = logging.getLogger("airflow_lake")
    handler, level = _Stamps(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    create_lake_table(table, VARIANTS[0])
    try:
        started = time.perf_counter()
        ours_write(spark, src, table)
        ended = time.perf_counter()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)

    def at(fragment: str) -> float:
        return next(t for t, message in handler.records if fragment in message)

    begun, written, committed = at(") started from snapshot"), at(" wrote "), at(" completed as log entry")
    return {
        "open table, read source schema, conform, begin instant": begun - started,
        "mapInArrow write + collect (the Spark job)": written - begun,
        "commit (conflict check, log entry, pending cleanup)": committed - written,
        "after commit (metrics)": ended - committed,
        "total": ended - started,
    }


def driver_only_profile(src: str, batch_rows: int) -> dict[str, float]:
    """Without Spark, in this process: our per-file writer on the source's batches, split into its parts.

    Reads the source with pyarrow into `batch_rows`-row batches, then times (one thread, best of 5): the
    lake's per-column stats alone, a plain pyarrow ParquetWriter alone, and the lake's `write_task` (stats +
    write + marker). Also records the file size with one row group per batch (what `write_task` does) vs
    1M-row row groups vs no dictionary encoding, since our files came out larger than Spark's.
    """
    import tempfile

    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from airflow_lake.lake.spec import TableSpec
    from airflow_lake.lake.storage import Storage
    from airflow_lake.lake.writer import WriteContext, _OpenFile, write_task

    table = ds.dataset(src, format="parquet").to_table()
    batches = table.to_batches(max_chunksize=batch_rows)
    spec = TableSpec.from_dict({"schema": SCHEMA})
    columns = tuple((c.name, c.type, c.nullable) for c in spec.columns)
    result: dict[str, float] = {"rows": float(table.num_rows), "batch_rows": float(batch_rows)}
    with tempfile.TemporaryDirectory(prefix="lake-bench-driver-") as tmp:
        ctx = WriteContext(root=tmp, instant="20240101000000000", columns=columns, partition_columns=(),
                           bucketed=False, allowed_partitions=None)
        storage = Storage(tmp)

        def stats_only() -> None:
            open_file = _OpenFile(ctx, storage, (), "stats")
            for batch in batches:
                for name, type_name, nullable in columns:
                    open_file._update_stats(name, type_name, nullable, batch.column(name))

        def plain_write(name: str = "plain", **options: Any) -> Callable[[], None]:
            def write() -> None:
                with pq.ParquetWriter(f"{tmp}/{name}.parquet", table.schema, compression="snappy",
                                      **options) as writer:
                    for batch in batches:
                        writer.write_batch(batch)
            return write

        def big_row_groups() -> None:
            pq.write_table(table, f"{tmp}/big.parquet", compression="snappy", row_group_size=1_000_000)

        def lake_write_task() -> None:
            for _ in write_task(ctx, iter(batches)):
                pass

        for name, fn in (("stats only, s", stats_only), ("pyarrow write only, s", plain_write()),
                         ("lake write_task (stats + write), s", lake_write_task),
                         ("pyarrow write, 1M-row row groups, s", big_row_groups),
                         ("pyarrow write, no dictionary, s", plain_write("nodict", use_dictionary=False))):
            result[name] = min(timed(fn)[0] for _ in range(5))
        result[f"MB, row group per {batch_rows}-row batch"] = os.path.getsize(f"{tmp}/plain.parquet") / 1e6
        result["MB, 1M-row row groups"] = os.path.getsize(f"{tmp}/big.parquet") / 1e6
        result["MB, row group per batch, no dictionary"] = os.path.getsize(f"{tmp}/nodict.parquet") / 1e6
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows in the source (default 4000000)")
    parser.add_argument("--source-files", type=int, default=4, help="Parquet files in the source (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not counted (default 1)")
    parser.add_argument("--profile", choices=("auto", "always", "never"), default="auto",
                        help="profile our write path: auto = only if a variant misses the goal")
    parser.add_argument("--profile-repeats", type=int, default=5)
    parser.add_argument("--profile-batches", default="10000,100000,1000000",
                        help="Arrow batch sizes to profile (comma-separated)")
    parser.add_argument("--profile-batch-rows", type=int, default=100_000, help="batch size of the driver profile")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.rounds < 1 or args.warmup < 0 or args.profile_repeats < 1 or args.source_files < 1:
        parser.error("--rows, --rounds, --profile-repeats and --source-files must be >= 1, --warmup >= 0")

    machine = machine_info()
    print(f"append benchmark: {args.rows} rows, {machine['nproc']} cores, load {machine['load_average']}")
    with scratch_dir("lake-bench-append-", keep=args.keep) as root:
        # the runner's session conf (jobs/session.py DEFAULT_CONF: Arrow batches of 100k rows, UTC)
        conf = dict(DEFAULT_CONF)
        spark = local_spark("airflow-lake bench_append", conf, root / "warehouse")
        try:
            src = str(root / "source")
            seconds, source_bytes = timed(lambda: make_source(spark, Path(src), args.rows, args.source_files))
            print(f"source: {args.rows} rows, {source_bytes / 1e6:.1f} MB in {args.source_files} files "
                  f"(generated in {seconds:.1f} s)")
            results = run_rounds(spark, root, src, args)
            missed = not all(r["meets_goal"] for r in results)
            profiled = profile(spark, root, src, args) if args.profile == "always" or (
                args.profile == "auto" and missed) else None
        finally:
            spark.stop()

    print()
    print_table(["variant", "baseline s", "ours s", "ours/baseline", "goal", "rows match"],
                [[r["variant"], r["baseline_seconds"], r["ours_seconds"], f"{r['ratio']:.2f}x",
                  "ok" if r["meets_goal"] else f"MISS (> {GOAL_RATIO}x)", r["rows_match"]] for r in results])
    if profiled:
        print(f"\nprofile, unpartitioned, median of {profiled['repeats']} (seconds):")
        for name, seconds in profiled["seconds"].items():
            print(f"  {name:60s} {seconds:7.3f}")
        print(f"footer stats of one file written by Spark: {profiled['prototype_footer_stats_example']}")
        print("a runner write split into phases (median of 3, seconds):")
        for name, seconds in profiled["phases"].items():
            print(f"  {name:60s} {seconds:7.3f}")
        print(f"driver only (no Spark, one thread, {args.profile_batch_rows}-row batches, best of 5):")
        for name, value in profiled["driver_only"].items():
            print(f"  {name:60s} {value:7.3f}")
    write_result(args.json_out, {
        "benchmark": "append", "machine": machine, "args": vars(args), "goal_ratio": GOAL_RATIO,
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "spark_conf": conf, "source_bytes": source_bytes, "results": results, "profile": profiled,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
