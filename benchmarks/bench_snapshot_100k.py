"""Benchmark: opening a table with 100,000 live files, Parquet checkpoint (ours) vs the legacy JSON checkpoint.

Builds one table without Spark (data files are only described in the log): `--commits` commits of
`--files-per-commit` files each, written straight into the log with `CommitLog.try_append`, stats on 10
columns of mixed types (bigint, double, string, date, timestamp, int, boolean), partitioned by day and
bucketed. Every `checkpoint.interval`-th entry goes through `LakeTable.after_commit`, so the core writes the
Parquet checkpoint. Then a copy of the table shares the same log (hard links) and gets, instead, the legacy
JSON checkpoint of the same state (`TableState.to_dict`, as the core wrote it before): that is BEFORE, and
the same code reads both. Alternating BEFORE and AFTER, it times:

* a fresh `python -c` process doing `LakeTable.open(path).snapshot()` (wall time of the whole process,
  and the open + snapshot part measured inside it);
* `LakeTable.open(path).snapshot()` in this process, on a fresh table object each time;
* `LakeTable.open(path).scan([("c1", "<", N)])`, and the scan alone on an already resolved table;
* once, `snapshot(as_of=head-1)`, which has no checkpoint at or before it and folds the log;

and reports the metadata bytes on disk and the time to write each checkpoint.

    .venv/bin/python benchmarks/bench_snapshot_100k.py --json-out /tmp/bench_snapshot_100k.json
    .venv/bin/python benchmarks/bench_snapshot_100k.py --commits 10 --files-per-commit 200 \\
        --checkpoint-interval 10 --runs 3 --repeats 2          # CI-sized, ~10 s
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.lake.format import checkpoints, instants, paths
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.log import CommitLog, LogEntry
from airflow_lake.lake.format.snapshots import Snapshot
from airflow_lake.lake.format.table_state import TableState
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.table import LakeTable

GOAL_SECONDS = 1.0
SCHEMA = ("dt STRING, c0 BIGINT, c1 BIGINT, c2 DOUBLE, c3 DOUBLE, c4 STRING, c5 STRING, c6 DATE, c7 TIMESTAMP, "
          "c8 INT, c9 BOOLEAN")
BUCKETS = 100
C1_LIMIT = 100_000_000  # c1 minima are uniform in [0, 1e9): `c1 < 1e8` keeps about 10% of the files
PROBE = """
import json, sys, time
started = time.perf_counter()
import airflow_lake
from airflow_lake.lake import LakeTable
imported = time.perf_counter()
snap = LakeTable.open(sys.argv[1]).snapshot()
done = time.perf_counter()
print(json.dumps({"import_seconds": imported - started, "open_snapshot_seconds": done - imported,
                  "files": len(snap.files), "code": airflow_lake.__file__,
                  "max_rss_mb": next(int(line.split()[1]) for line in open("/proc/self/status")
                                     if line.startswith("VmHWM:")) / 1024}))  # ru_maxrss survives exec
"""


def make_files(seq: int, instant: str, count: int, first: int, rng: random.Random) -> list[DataFile]:
    """`count` files of commit `seq`, spread over 10 days, with stats on c0..c9."""
    out = []
    for j in range(count):
        n = first + j
        day_index = (seq * 10 + j * 10 // count) % 360
        day = f"2024-{1 + day_index // 30:02d}-{1 + day_index % 30:02d}"
        ts = 1_700_000_000_000_000 + n * 1_000_000
        stats = {
            "c0": ColumnStats(n * 1000, n * 1000 + 999, 0),
            "c1": ColumnStats(rng.randrange(10**9), 10**9 + rng.randrange(10**6), rng.randrange(3)),
            "c2": ColumnStats(rng.random(), 1 + rng.random(), 0),
            "c3": ColumnStats(-rng.random() * 1e4, rng.random() * 1e4, 5),
            "c4": ColumnStats(f"user-{rng.randrange(10**8):08d}", f"user-{rng.randrange(10**8):08d}", 0),
            "c5": ColumnStats("AR", "US", 0),
            "c6": ColumnStats(day, day, 0),
            "c7": ColumnStats(ts, ts + 999_000_000, 0),
            "c8": ColumnStats(rng.randrange(100), 100 + rng.randrange(100), 0),
            "c9": ColumnStats(False, True, rng.randrange(10)),
        }
        bucket = j % BUCKETS
        out.append(DataFile(
            path=f"dt={day}/part-{instant}-{rng.getrandbits(48):012x}-{j:05d}_{bucket:05d}.parquet",
            partition={"dt": day}, rows=1000, bytes=16_000 + j, bucket=bucket, instant=instant, stats=stats))
    return out


def append_commit(log: CommitLog, seq: int, base_ms: int, count: int, rng: random.Random) -> LogEntry:
    """Append entry `seq`: a commit of `count` described files (`make_files`), as a writer makes it."""
    instant = instants.format_id(base_ms + seq)
    added = make_files(seq, instant, count, (seq - 1) * count, rng)
    now = time.time()
    entry = LogEntry(seq=seq, instant=instant, action="commit", operation="write", started_at=now,
                     completed_at=now, base_seq=seq - 1, added=tuple(added),
                     metadata={"mode": "append", "partitions": None},
                     metrics={"files_added": len(added), "rows_added": sum(f.rows for f in added),
                              "bytes_added": sum(f.bytes for f in added)})
    if not log.try_append(entry):
        raise RuntimeError(f"log entry {seq} already exists")
    return entry


def build(path: str, args: argparse.Namespace) -> dict[str, Any]:
    """The AFTER table: the log written directly, checkpoints through `LakeTable.after_commit`."""
    started = time.perf_counter()
    table = LakeTable.create(path, {"schema": SCHEMA, "partition_by": ["dt"],
                                    "bucket": {"columns": ["c0"], "count": BUCKETS},
                                    "properties": {"checkpoint.interval": str(args.checkpoint_interval)}})
    log = CommitLog(table.storage)
    rng = random.Random(args.seed)
    base_ms = instants.id_millis(log.read(0).instant)
    checkpoint_seconds = []
    for seq in range(1, args.commits + 1):
        entry = append_commit(log, seq, base_ms, args.files_per_commit, rng)
        if seq % args.checkpoint_interval == 0:
            seconds, _ = timed(lambda entry=entry: table.after_commit(entry))
            checkpoint_seconds.append(seconds)
    return {"seconds": time.perf_counter() - started, "head": log.head(),
            "after_commit_seconds": checkpoint_seconds}


def make_before(after: str, before: str) -> dict[str, Any]:
    """The BEFORE table: the same log (hard links), the legacy JSON checkpoint of each Parquet one."""
    shutil.copytree(after, before, copy_function=os.link)
    storage = LakeTable(before).storage
    out: dict[str, Any] = {}
    for name in storage.list_dir(paths.CHECKPOINTS):
        found = paths.checkpoint_of(name)
        if found is None:
            continue
        seq, _ = found
        state = fold(before, seq)
        storage.delete(paths.checkpoint_file(seq))
        json_seconds, _ = timed(lambda seq=seq, state=state: storage.write_json(
            paths.checkpoint_file(seq, "json"), state.to_dict()))
        parquet_seconds, data = timed(lambda state=state: checkpoints.encode(state))
        out[str(seq)] = {"json_write_seconds": json_seconds, "parquet_encode_seconds": parquet_seconds,
                         "json_bytes": storage.size(paths.checkpoint_file(seq, "json")), "parquet_bytes": len(data)}
        storage.write_json(paths.LAST_CHECKPOINT, {"seq": seq})  # hints had no format before
    return out


def fold(path: str, seq: int) -> TableState:
    """The state after `seq`, folded from the log alone."""
    state = TableState()
    for entry in LakeTable(path).commit_log.entries(-1, seq):
        state.apply(entry)
    return state


def metadata_bytes(path: str) -> dict[str, int]:
    root = Path(path)
    log_bytes = sum(p.stat().st_size for p in (root / paths.LOG).iterdir())
    checkpoint_bytes = sum(p.stat().st_size for p in (root / paths.CHECKPOINTS).iterdir())
    return {"log": log_bytes, "checkpoints": checkpoint_bytes, "total": log_bytes + checkpoint_bytes,
            "checkpoint_files": len(list((root / paths.CHECKPOINTS).iterdir()))}


def fresh_process(path: str, code: str | None = None) -> dict[str, Any]:
    """One `python -c` that imports the lake core, opens the table and resolves the latest snapshot.

    `code`: a directory holding another version of the `airflow_lake` package to run instead of this one.
    """
    env = {**os.environ, "PYTHONPATH": code} if code else None
    started = time.perf_counter()
    # run from the table's directory: `python -c` puts the working directory first on sys.path
    done = subprocess.run([sys.executable, "-c", PROBE, path], capture_output=True, text=True, check=True, env=env,
                          cwd=os.path.dirname(path))
    wall = time.perf_counter() - started
    result = {"wall_seconds": wall, **json.loads(done.stdout.strip().splitlines()[-1])}
    if code and not result["code"].startswith(os.path.abspath(code)):
        raise RuntimeError(f"--baseline-code {code} was not used: the probe imported {result['code']}")
    return result


def open_snapshot(path: str) -> Snapshot:
    return LakeTable.open(path).snapshot()


def open_scan(path: str) -> Scan:
    return LakeTable.open(path).scan([("c1", "<", C1_LIMIT)])


def scan_only(path: str) -> float:
    table = LakeTable.open(path)
    table.snapshot()
    seconds, _ = timed(lambda: table.scan([("c1", "<", C1_LIMIT)]))
    return seconds


def alternate(cases: dict[str, str], rounds: int, fn: Callable[[str], Any]) -> dict[str, list[Any]]:
    """`fn(path)` for each case, `rounds` times, the order of the cases alternating by round."""
    out: dict[str, list[Any]] = {name: [] for name in cases}
    names = list(cases)
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            out[name].append(fn(cases[name]))
    return out


def profile(path: str, top: int) -> str:
    """cProfile of one in-process open + snapshot (after a warm-up), sorted by own time."""
    open_snapshot(path)
    profiler = cProfile.Profile()
    profiler.runcall(open_snapshot, path)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100, help="commits after create (default 100)")
    parser.add_argument("--files-per-commit", type=int, default=1000, help="files per commit (default 1000)")
    parser.add_argument("--checkpoint-interval", type=int, default=100, help="table property (default 100)")
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per case (default 7)")
    parser.add_argument("--repeats", type=int, default=5, help="in-process repetitions per case (default 5)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the top N functions of a cProfile of AFTER's open + snapshot")
    parser.add_argument("--baseline-code", default=None, metavar="DIR",
                        help="also time fresh processes of BEFORE with the airflow_lake package in DIR (the code "
                             "before Parquet checkpoints: git archive 7086181 airflow_lake | tar -x -C DIR)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the table directories")
    args = parser.parse_args(argv)
    if args.commits < args.checkpoint_interval or min(args.runs, args.repeats, args.files_per_commit) < 1:
        parser.error("--commits must be >= --checkpoint-interval; --runs, --repeats, --files-per-commit >= 1")

    machine = machine_info()
    files = args.commits * args.files_per_commit
    print(f"snapshot benchmark, {files} live files: {machine['nproc']} cores, load {machine['load_average']}")
    with scratch_dir("lake-bench-snapshot-100k-", keep=args.keep) as root:
        cases = {"before (JSON checkpoint)": str(root / "before"), "after (Parquet checkpoint)": str(root / "after")}
        before, after = cases.values()
        built = build(after, args)
        print(f"built in {built['seconds']:.1f} s: head {built['head']}, {files} files, checkpoint(s) written "
              f"by after_commit in {', '.join(f'{s:.2f}' for s in built['after_commit_seconds'])} s")
        writes = make_before(after, before)
        sizes = {name: metadata_bytes(path) for name, path in cases.items()}

        snap_before, snap_after = open_snapshot(before), open_snapshot(after)
        scan_before, scan_after = open_scan(before), open_scan(after)
        same = (snap_before.seq, snap_before.files) == (snap_after.seq, snap_after.files) and \
            scan_before.files == scan_after.files  # every DataFile, stats included
        del snap_before, snap_after, scan_before, scan_after

        fresh = alternate(cases, args.runs, fresh_process)
        old_code = [fresh_process(before, args.baseline_code) for _ in range(args.runs)] if args.baseline_code else []
        in_process = alternate(cases, args.repeats, lambda p: timed(lambda: open_snapshot(p))[0])
        open_scans = alternate(cases, args.repeats, lambda p: timed(lambda: open_scan(p))[0])
        scans = alternate(cases, args.repeats, scan_only)
        scan_facts = open_scan(after)
        travel = {name: timed(lambda p=path: LakeTable.open(p).snapshot(as_of=built["head"] - 1))[0]
                  for name, path in cases.items()}  # no checkpoint at or before it: folds the log
        profiled = profile(after, args.profile) if args.profile else None

    results: dict[str, dict[str, Any]] = {}
    for name in cases:
        results[name] = {
            "fresh_process_wall_seconds": median([r["wall_seconds"] for r in fresh[name]]),
            "fresh_process_import_seconds": median([r["import_seconds"] for r in fresh[name]]),
            "fresh_process_open_snapshot_seconds": median([r["open_snapshot_seconds"] for r in fresh[name]]),
            "fresh_process_max_rss_mb": median([r["max_rss_mb"] for r in fresh[name]]),
            "in_process_open_snapshot_seconds": median(in_process[name]),
            "open_and_scan_seconds": median(open_scans[name]),
            "scan_seconds": median(scans[name]),
            "metadata_bytes": sizes[name],
            "time_travel_head_minus_1_seconds": travel[name],
            "all": {"fresh": fresh[name], "in_process": in_process[name], "open_scan": open_scans[name],
                    "scan": scans[name]},
        }
    b, a = results["before (JSON checkpoint)"], results["after (Parquet checkpoint)"]
    wall_after = a["fresh_process_wall_seconds"]
    rows = []
    for label, key in [("fresh process: wall (python start + import + open + snapshot)", "fresh_process_wall_seconds"),
                       ("fresh process: open + snapshot inside", "fresh_process_open_snapshot_seconds"),
                       ("fresh process: import of the lake core", "fresh_process_import_seconds"),
                       ("in process: open + snapshot", "in_process_open_snapshot_seconds"),
                       ("in process: open + scan(c1 < 1e8)", "open_and_scan_seconds"),
                       ("in process: scan(c1 < 1e8) on a resolved table", "scan_seconds")]:
        rows.append([label, b[key], a[key], f"{ratio(b[key], a[key]):.1f}x"])
    rows.append(["in process: open + snapshot(as_of=head-1), folds the log (1 run)",
                 b["time_travel_head_minus_1_seconds"], a["time_travel_head_minus_1_seconds"], ""])
    rows.append(["fresh process: max RSS (MB)", f"{b['fresh_process_max_rss_mb']:.0f}",
                 f"{a['fresh_process_max_rss_mb']:.0f}", ""])
    for part in ("log", "checkpoints", "total"):
        rows.append([f"metadata on disk: {part} (MB)", f"{b['metadata_bytes'][part] / 1e6:.1f}",
                     f"{a['metadata_bytes'][part] / 1e6:.1f}", ""])
    baseline = None
    if old_code:
        baseline = {key: median([r[key] for r in old_code]) for key in
                    ("wall_seconds", "open_snapshot_seconds", "import_seconds", "max_rss_mb")}
        baseline["code"] = old_code[0]["code"]
        rows.insert(0, ["fresh process: wall, BEFORE read by the old code", baseline["wall_seconds"],
                        a["fresh_process_wall_seconds"], f"{ratio(baseline['wall_seconds'], wall_after):.1f}x"])
        rows.insert(1, ["fresh process: open + snapshot inside, old code", baseline["open_snapshot_seconds"],
                        a["fresh_process_open_snapshot_seconds"],
                        f"{ratio(baseline['open_snapshot_seconds'], a['fresh_process_open_snapshot_seconds']):.1f}x"])
        rows.insert(2, ["fresh process: import of the lake core, old code", baseline["import_seconds"],
                        a["fresh_process_import_seconds"], ""])
    print()
    print_table(["", "before", "after", "before / after"], rows)
    for seq, w in writes.items():
        print(f"checkpoint {seq}: JSON {w['json_bytes'] / 1e6:.1f} MB written in {w['json_write_seconds']:.2f} s, "
              f"Parquet {w['parquet_bytes'] / 1e6:.1f} MB encoded in {w['parquet_encode_seconds']:.2f} s "
              f"(from a state folded from the log)")
    print(f"scan: {len(scan_facts.files)} of {scan_facts.files_total} files kept; before and after give the same "
          f"snapshot and scan (every DataFile with its stats): {same}")
    wall = a["fresh_process_wall_seconds"]
    print(f"fresh process open + snapshot, after: {wall:.3f} s -> {'meets' if wall <= GOAL_SECONDS else 'MISSES'} "
          f"the goal of <= {GOAL_SECONDS} s")
    if profiled:
        print(profiled)
    write_result(args.json_out, {
        "benchmark": "snapshot_100k", "machine": machine, "args": vars(args), "goal_seconds": GOAL_SECONDS,
        "build": built, "checkpoint_writes": writes, "results": results, "same_result": same,
        "scan_files_kept": len(scan_facts.files), "scan_files_total": scan_facts.files_total,
        "meets_goal": wall <= GOAL_SECONDS, "profile": profiled, "baseline_code": baseline,
        "baseline_code_all": old_code,
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    })
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
