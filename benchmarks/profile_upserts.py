"""Profile: where the wall time of the BDCI upserts of `bench_upsert.py --one-shot` goes, per upsert.

The 11 BDCI files (`--rows` each, base-0 5x) are upserted one after the other into a fresh 16-bucket table, after an
untimed warm-up of the same 11 into another table, in one local[2] session with Spark's event log on. Per upsert it
prints the wall time, every Spark job's interval with its stages' tasks, run time and executor CPU, the union of the
job intervals ("in jobs") and the rest ("driver only": no Spark job running, the driver's Python and JVM at work);
then the merged read written as Parquet, and the driver's Python profile (cProfile, cumulative) of the upserts.

    .venv/bin/python benchmarks/profile_upserts.py --rows 100000      # 1.5M rows, as (d) of bench_upsert.py
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import shutil
import tempfile
import time
from pathlib import Path

from common import local_spark

from airflow_lake.datagen import bdci
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.upsert import versioned_upsert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each of base-1..10 (base-0: 5x)")
    parser.add_argument("--profile-lines", type=int, default=25)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lake-profile-upserts-"))
    events = work / "events"
    events.mkdir()
    conf = {**DEFAULT_CONF, "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}
    spark = local_spark("profile-upserts", conf, work / "warehouse")
    try:
        files = bdci.generate(work / "src", args.rows)
        order = list(range(bdci.FILES))
        random.Random(3).shuffle(order)  # the order of bench_upsert.py

        def upsert_all(path: Path, profile: cProfile.Profile | None) -> tuple[LakeTable, list[tuple[float, float]]]:
            table = LakeTable.create(str(path), bdci.table_spec(16))
            marks = []
            for version in order:
                started = time.time()
                if profile is not None:
                    profile.enable()
                versioned_upsert(table, spark.read.parquet(str(files[version])), version=version)
                if profile is not None:
                    profile.disable()
                marks.append((started, time.time()))
            return table, marks

        upsert_all(work / "warm", None)
        profile = cProfile.Profile()
        table, marks = upsert_all(work / "t", profile)
        started = time.time()
        table.read(spark).write.parquet(str(work / "merged"))
        read_seconds = time.time() - started
    finally:
        spark.stop()
    jobs, stages = _events(events)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"rows per batch {args.rows} (base-0 {args.rows * bdci.BASE_FACTOR}); load average {load}")
    total = busy_total = 0.0
    for version, (start, end) in zip(order, marks, strict=True):
        inside = sorted((a, b, ids) for a, b, ids in jobs.values() if a >= start - 0.01 and b <= end + 0.01)
        for a, b, ids in inside:
            detail = "; ".join(f"stage {s}: {stages[s][0]} tasks, run {stages[s][1]:.2f} s, CPU {stages[s][2]:.2f} s"
                               for s in ids if s in stages)
            print(f"   job at +{a - start:6.3f} s, {b - a:6.3f} s: {detail}")
        busy = _union([(a, b) for a, b, _ in inside])
        print(f"version {version:2d}: wall {end - start:6.3f} s, in jobs {busy:6.3f} s, driver only "
              f"{end - start - busy:6.3f} s")
        total += end - start
        busy_total += busy
    print(f"11 upserts: wall {total:.2f} s, in jobs {busy_total:.2f} s, driver only {total - busy_total:.2f} s; "
          f"merged read -> Parquet {read_seconds:.2f} s")
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(args.profile_lines)
    shutil.rmtree(work, ignore_errors=True)


def _events(directory: Path) -> tuple[dict[int, tuple[float, float, list[int]]], dict[int, list[float]]]:
    """Spark's event log: job id -> (start, end, stage ids); stage id -> [tasks, run seconds, CPU seconds]."""
    starts: dict[int, tuple[float, list[int]]] = {}
    jobs: dict[int, tuple[float, float, list[int]]] = {}
    stages: dict[int, list[float]] = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                starts[event["Job ID"]] = (event["Submission Time"] / 1000,
                                           [s["Stage ID"] for s in event.get("Stage Infos", [])])
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in starts:
                start, ids = starts[event["Job ID"]]
                jobs[event["Job ID"]] = (start, event["Completion Time"] / 1000, ids)
            elif kind == "SparkListenerTaskEnd":
                metrics = event.get("Task Metrics") or {}
                stage = stages.setdefault(event["Stage ID"], [0, 0.0, 0.0])
                stage[0] += 1
                stage[1] += metrics.get("Executor Run Time", 0) / 1000
                stage[2] += metrics.get("Executor CPU Time", 0) / 1e9
    return jobs, stages


def _union(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the intervals."""
    covered = 0.0
    current: list[float] | None = None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                covered += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    return covered + (0.0 if current is None else current[1] - current[0])


if __name__ == "__main__":
    main()
