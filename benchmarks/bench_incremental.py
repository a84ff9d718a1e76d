"""Benchmark: the example pipeline's DWD + DWS steps after a 1% change of ODS, incremental vs a full rebuild.

Everything runs in one process, on one local[2] SparkSession; both sides are measured in the same run.

Data (the example pipeline's generator, `airflow_lake.datagen.video`): `--days` days of `--events` events each
in `ods_events` (partitioned by day), one batch of the works and users dimensions upserted into `ods_works` and
`ods_users`. Two sets of downstream tables (dwd_plays, dwd_likes, dwd_works, dws_work_daily, bucketed as the
example creates them) are built from it, untimed:

    incremental  the incremental DAG's steps (`video_incremental.STEPS`): built with rebuild "full" (which records
                 the upstream positions), then each run (rebuild "incremental") consumes the upstreams' changes
                 since the positions its table recorded, reads the changed partitions of the upstream tables only,
                 and overwrites the days those changes touch;
    full         the rebuild-the-day DAG's queries (`video_pipeline`) over every day: each table overwritten
                 whole from its upstreams — no views of changes, no positions.

Each round lands late events for one day (1% of ODS: `--late` rows appended to that day's partition, a different
day each round), then times the incremental run of DWD + DWS (dwd_plays, dwd_likes, dwd_works, dws_work_daily,
in the DAG's order) and the full rebuild of the same four tables; rounds alternate which runs first, and a first
round (untimed) warms up both. After each
round both sets hold the same rows, table by table (checked, untimed). Reported: median seconds of each, the ratio
(goal <= 0.15), and the files the incremental steps read of their upstream tables (`source_scans`).

    .venv/bin/python benchmarks/bench_incremental.py --out /tmp/bench_incremental.json   # 20 days x 300k events
    .venv/bin/python benchmarks/bench_incremental.py --days 5 --events 20000 --rounds 1  # a quick run
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import local_spark, machine_info, median, print_table, ratio, scratch_dir, write_result

DWD_DWS = ("dwd_plays", "dwd_likes", "dwd_works", "dws_work_daily")
BUCKETS = 8


def created(name: str) -> dict[str, Any]:
    """The example's create spec of a table, with the bucket counts the DAG's Param would give."""
    from airflow_lake.examples.video_pipeline import CREATE

    spec = dict(CREATE[name])
    if "bucket" in spec:
        bucket = dict(spec["bucket"])
        bucket["count"] = 2 * BUCKETS if "* 2" in str(bucket["count"]) else BUCKETS
        spec["bucket"] = bucket
    return spec


def build_ods(spark: Any, work: Path, paths: dict[str, str], days: list[str], sizes: Any) -> None:
    """ods_events with every day (one commit), and one batch of each dimension upserted."""
    import pyarrow as pa

    from airflow_lake.datagen import video
    from airflow_lake.jobs import run

    for name in ("ods_events", "ods_works", "ods_users"):
        run(spark, "create_table", {"table": paths[name], **created(name)})
    events = pa.concat_tables([video.day_events(day, sizes) for day in days])
    df = spark.createDataFrame(events).repartition(len(days) * 2, "dt")
    run_write = {"table": paths["ods_events"], "mode": "append"}
    staged = work / "landing-events"
    df.write.parquet(str(staged))
    run(spark, "write", {**run_write, "source": {"path": str(staged)}})
    landed = video.land_day(work / "landing", days[0], sizes, parts=("works", "users"))
    for name in ("works", "users"):
        run(spark, "versioned_upsert", {"table": paths[f"ods_{name}"], "source": {"path": landed[name]},
                                        "version": video.version_of(days[0])})


def late_events(spark: Any, work: Path, paths: dict[str, str], day: str, *, rows: int, round_: int) -> int:
    """Append `rows` late events to `day` (other ids than the day's own); returns the rows appended."""
    import pyarrow.compute as pc

    from airflow_lake.datagen import video
    from airflow_lake.jobs import run

    late = video.day_events(day, video.Sizes(events=rows), seed=100 + round_)
    ids = pc.add(late["event_id"], 50_000_000 + round_ * 1_000_000)  # the day's own ids end below that
    staged = work / f"late-{round_}"
    spark.createDataFrame(late.set_column(0, "event_id", ids)).coalesce(1).write.parquet(str(staged))
    out = run(spark, "write", {"table": paths["ods_events"], "mode": "append", "source": {"path": str(staged)}})
    return int(out["rows_added"])


@contextmanager
def task_conf(spark: Any, name: str) -> Iterator[None]:
    """The Spark settings the DAG's task of `name` sets (`spark_conf`: broadcasts off for the DWS step, so its
    joins stay bucketed), for both sides alike."""
    from airflow_lake.examples.video_incremental import STEPS
    from airflow_lake.lake.spark.session_conf import session_conf

    with session_conf(spark, dict(STEPS[name].spark_conf)):
        yield


def incremental_run(spark: Any, paths: dict[str, str], rebuild: str = "incremental") -> dict[str, Any]:
    """The incremental DAG's DWD + DWS steps, in its order, in one `rebuild` mode; their metrics by table."""
    from airflow_lake.examples.video_incremental import STEPS
    from airflow_lake.jobs import run

    out = {}
    for name in DWD_DWS:
        started = time.perf_counter()
        with task_conf(spark, name):
            out[name] = run(spark, "write", STEPS[name].write_spec(paths, rebuild))
        out[name]["step_seconds"] = round(time.perf_counter() - started, 2)
    return out


def full_rebuild(spark: Any, paths: dict[str, str]) -> dict[str, Any]:
    """The rebuild-the-day queries over every day: each table overwritten whole."""
    from airflow_lake.examples.video_incremental import whole_table_specs
    from airflow_lake.jobs import run

    out = {}
    for name, spec in whole_table_specs(paths).items():
        with task_conf(spark, name):
            out[name] = run(spark, "write", spec)
    return out


def same_rows(spark: Any, left: str, right: str) -> bool:
    """Both tables hold the same multiset of rows: the same count and the same sum of a 64-bit hash of each row
    (order-free; one pass over each table, no shuffle)."""
    from pyspark.sql import functions as F

    from airflow_lake.lake import LakeTable

    def digest(path: str) -> tuple[Any, ...]:
        df = LakeTable.open(path).read(spark)
        row = df.select(F.count(F.lit(1)), F.sum(F.xxhash64(*df.columns).cast("decimal(38,0)"))).first()
        assert row is not None
        return tuple(row)

    return digest(left) == digest(right)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--events", type=int, default=300_000, help="events per day")
    parser.add_argument("--late", type=float, default=0.01, help="late events per round, as a share of ODS")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)

    from airflow_lake.datagen import video
    from airflow_lake.jobs import run
    from airflow_lake.jobs.session import DEFAULT_CONF

    first = dt.date(2024, 1, 1)
    days = [(first + dt.timedelta(days=i)).isoformat() for i in range(args.days)]
    sizes = video.Sizes(events=args.events)
    late_rows = max(1, int(args.late * args.days * args.events))
    with scratch_dir("bench-incremental-") as work:
        # a job's session settings (`jobs.session`: bucketed reads used fully), as the DAG's tasks have
        spark = local_spark("bench-incremental", {**DEFAULT_CONF, "spark.sql.shuffle.partitions": "8"},
                            work / "warehouse")
        spark.sparkContext.setLogLevel("ERROR")
        ods = {name: str(work / "lake" / name) for name in ("ods_events", "ods_works", "ods_users")}
        inc = {**ods, **{name: str(work / "incremental" / name) for name in DWD_DWS}}
        full = {**ods, **{name: str(work / "full" / name) for name in DWD_DWS}}
        started = time.perf_counter()
        build_ods(spark, work, ods, days, sizes)
        for paths in (inc, full):
            for name in DWD_DWS:
                run(spark, "create_table", {"table": paths[name], **created(name)})
        incremental_run(spark, inc, "full")  # the DAG's steps with rebuild="full": the positions recorded
        full_rebuild(spark, full)
        print(f"ODS: {args.days} days x {args.events:,} events; DWD + DWS built both ways in "
              f"{time.perf_counter() - started:.1f} s")

        inc_s: list[float] = []
        full_s: list[float] = []
        scans: list[dict[str, Any]] = []
        step_seconds: list[dict[str, float]] = []
        for round_ in range(args.rounds + 1):  # round 0 warms up both sides (untimed, checked)
            day = days[(round_ * 7 + args.days // 2) % args.days]  # a day in the middle, another each round
            appended = late_events(spark, work, ods, day, rows=late_rows, round_=round_)

            def incremental() -> tuple[float, dict[str, Any]]:
                t0 = time.perf_counter()
                out = incremental_run(spark, inc)
                return time.perf_counter() - t0, out

            def rebuild() -> float:
                t0 = time.perf_counter()
                full_rebuild(spark, full)
                return time.perf_counter() - t0

            if round_ % 2:
                full_seconds = rebuild()
                seconds, metrics = incremental()
            else:
                seconds, metrics = incremental()
                full_seconds = rebuild()
            equal = {name: same_rows(spark, inc[name], full[name]) for name in DWD_DWS}
            assert all(equal.values()), equal
            read = {name: m.get("source_scans") for name, m in metrics.items()}
            steps = {name: m["step_seconds"] for name, m in metrics.items()}
            print(f"round {round_}{' (warm-up)' if not round_ else ''}: {appended:,} late events on {day}: "
                  f"incremental {seconds:.2f} s, full {full_seconds:.2f} s; incremental steps {steps}; files read "
                  f"{read}")
            if not round_:
                continue
            inc_s.append(seconds)
            full_s.append(full_seconds)
            scans.append(read)
            step_seconds.append(steps)
        result = {"days": args.days, "events_per_day": args.events, "late_events": late_rows,
                  "rounds": args.rounds, "incremental_median_s": round(median(inc_s), 3),
                  "full_median_s": round(median(full_s), 3), "ratio": ratio(median(inc_s), median(full_s)),
                  "incremental_s": inc_s, "full_s": full_s, "incremental_source_scans": scans,
                  "incremental_step_seconds": step_seconds,
                  "machine": machine_info()}
        print_table(["measure", "value", "goal"], [
            ["ODS events (days x events)", f"{args.days} x {args.events:,}", ""],
            ["late events per round (1% of ODS)", late_rows, ""],
            ["incremental DWD + DWS, median s", result["incremental_median_s"], ""],
            ["full rebuild of DWD + DWS, median s", result["full_median_s"], ""],
            ["ratio incremental / full", result["ratio"], "<= 0.15"],
        ])
        write_result(args.out, result)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
