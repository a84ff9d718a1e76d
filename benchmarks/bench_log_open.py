"""Benchmark: open a table of 100,000 commits and resolve its latest snapshot, in a fresh process (goal <= 0.3 s),
this code vs an older checkout.

The table is built without Spark by writing its log (entries and checkpoints as writers make them; the data files
are only described), partitioned by day: `--commits` commits, each appending one file to one of 7 days, and every
50th instead a clustering-like replace of one day's live files by one file, so the live file count stays what a
clustered table has (reported, with the tombstones no clean removed). A checkpoint every 100 entries
(`checkpoint.interval`), written by `LakeTable.after_commit` as a writer would.

Each measurement is a fresh `python` process with the code under test first on its path (PYTHONPATH, from the
checkout's directory: the editable install would otherwise import this checkout): its imports are timed apart,
then `LakeTable.open(path).snapshot()` — the open and the resolution of the latest snapshot. The process also counts
its metadata calls (`Storage.list_dir` and the names it returned, `exists`, `read_bytes`): on an object store each
is a request, so the counts show what an open costs there. `--before DIR` runs the same in the checkout in DIR,
alternately with this code, round by round, on the same table; the ratio is after / before.

Building 100,000 commits takes a few minutes: the table is kept in a scratch directory (`common.scratch_dir`, kept)
whose path is printed; `--cache DIR` reuses it (it is rebuilt only if its `built.json` does not match).

    git worktree add --detach /tmp/before-log ccc68ac   # the code before the constant-time open
    .venv/bin/python benchmarks/bench_log_open.py --before /tmp/before-log --json-out /tmp/bench_log_open.json
    .venv/bin/python benchmarks/bench_log_open.py --before /tmp/before-log --cache /tmp/bench-log-open-XXXX   # reuse
    .venv/bin/python benchmarks/bench_log_open.py --commits 2000 --rounds 2      # quick, this code only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import REPO, machine_info, median, print_table, ratio, scratch_dir, timed, write_result

sys.path.insert(0, str(REPO))
from synthetic_log import append_commits

from airflow_lake.lake.format import paths
from airflow_lake.lake.table import LakeTable

GOAL_SECONDS = 0.3
# Runs in a fresh interpreter, from the checkout under test (its directory is the working directory and on
# PYTHONPATH). Counts the metadata calls of the open by wrapping `Storage`'s methods (both codes have them).
PROBE = """
import collections, json, sys, time
tree, path = sys.argv[1:3]
started = time.perf_counter()
import airflow_lake
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.table import LakeTable
imported = time.perf_counter()
assert airflow_lake.__file__.startswith(tree), (airflow_lake.__file__, tree)
calls = collections.Counter()
def counting(name):
    original = getattr(Storage, name)
    def wrapper(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        calls[name] += 1
        if name in ("list_dir", "list_after"):
            calls["names_listed"] += len(result)
        return result
    setattr(Storage, name, wrapper)
for name in ("exists", "read_bytes", "list_dir", "list_after"):
    if hasattr(Storage, name):
        counting(name)
began = time.perf_counter()
snapshot = LakeTable.open(path).snapshot()
done = time.perf_counter()
print(json.dumps({"import_seconds": imported - started, "open_seconds": done - began, "seq": snapshot.seq,
                  "files": len(snapshot.files), "calls": dict(calls)}))
"""


def build(path: Path, commits: int) -> dict[str, Any]:
    """The table (see the module's doc); returns what it holds."""
    table = LakeTable.create(str(path), {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"],
                                         "properties": {"checkpoint.interval": "100"}})
    started = time.perf_counter()

    def progress(seq: int) -> None:
        if seq % 10_000 == 0:
            print(f"  built {seq:,} commits in {time.perf_counter() - started:.0f} s", flush=True)

    append_commits(table, commits, clustered=True, progress=progress)
    state = table.state()
    pointer = table.storage.read_json(paths.LAST_CHECKPOINT)
    return {"commits": commits, "live_files": len(state.files), "tombstones": len(state.tombstones),
            "checkpoint_seq": pointer["seq"], "checkpoint_bytes": pointer["bytes"],
            "log_entries": len(os.listdir(table.storage.path(paths.LOG))),
            "build_seconds": round(time.perf_counter() - started, 1)}


def cached_table(cache: Path, commits: int) -> tuple[Path, dict[str, Any]]:
    """The table of `commits` commits under `cache`, built unless its `built.json` says it is there."""
    path = cache / f"table-{commits}"
    marker = cache / f"built-{commits}.json"
    if marker.exists():
        facts = json.loads(marker.read_text())
        if facts.get("commits") == commits and path.exists():
            print(f"reusing the table of {commits:,} commits at {path}")
            return path, facts
    if path.exists():
        raise SystemExit(f"{path} exists but was not built completely: delete it, or give another --cache")
    print(f"building a table of {commits:,} commits at {path} (once; reuse it with --cache {cache})")
    facts = build(path, commits)
    marker.write_text(json.dumps(facts, indent=2) + "\n")  # last: a half-built table is never reused
    return path, facts


def fresh(tree: Path, table: Path) -> dict[str, Any]:
    """One fresh process opening the table with the code in `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    seconds, done = timed(lambda: subprocess.run([sys.executable, "-c", PROBE, str(tree), str(table)],
                                                 capture_output=True, text=True, check=False, timeout=600,
                                                 cwd=str(tree), env=env))
    if done.returncode != 0:
        raise RuntimeError(f"the probe of {tree} failed:\n{done.stderr[-3000:]}")
    return {"wall_seconds": seconds, **json.loads(done.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000, help="commits of the table (default 100000)")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per code (default 5)")
    parser.add_argument("--before", default=None, help="a checkout of the code to compare with")
    parser.add_argument("--cache", default=None, help="a directory holding (or to hold) the built table")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    trees = {"after": REPO, **({"before": Path(args.before).resolve()} if args.before else {})}
    machine = machine_info()
    print(f"log open benchmark: {machine['nproc']} cores, load {machine['load_average']}, {args.rounds} rounds")
    if args.cache:
        cache = Path(args.cache)
        cache.mkdir(parents=True, exist_ok=True)
        table, facts = cached_table(cache, args.commits)
    else:
        with scratch_dir("bench-log-open-", keep=True) as cache:
            table, facts = cached_table(cache, args.commits)
    print(f"table: {facts['commits']:,} commits, {facts['live_files']:,} live files, {facts['tombstones']:,} "
          f"tombstones, checkpoint at {facts['checkpoint_seq']:,} ({facts['checkpoint_bytes']:,} bytes), "
          f"{facts['log_entries']:,} log entries")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.rounds):  # alternate the codes, so a burst of load hits both
        for name, tree in trees.items():
            runs[name].append(fresh(tree, table))
    results: dict[str, Any] = {}
    for name in trees:
        measured = runs[name]
        if {r["seq"] for r in measured} != {args.commits}:
            raise RuntimeError(f"{name} resolved {sorted({r['seq'] for r in measured})}, not {args.commits}")
        results[name] = {key: median([r[key] for r in measured])
                         for key in ("open_seconds", "import_seconds", "wall_seconds")}
        results[name]["calls"] = measured[-1]["calls"]
        results[name]["files"] = measured[-1]["files"]
        results[name]["runs"] = measured
    headers = ["code", "open + latest snapshot (ms)", "imports (ms)", "listed names", "exists", "reads"]
    rows = [[name, results[name]["open_seconds"] * 1000, results[name]["import_seconds"] * 1000,
             results[name]["calls"].get("names_listed", 0), results[name]["calls"].get("exists", 0),
             results[name]["calls"].get("read_bytes", 0)] for name in trees]
    print()
    print_table(headers, rows)
    after = results["after"]["open_seconds"]
    if "before" in trees:
        results["ratio"] = ratio(after, results["before"]["open_seconds"])
        print(f"after / before: {results['ratio']}")
    meets = after <= GOAL_SECONDS
    print(f"open + latest snapshot {after * 1000:.0f} ms -> {'meets' if meets else 'MISSES'} the goal of "
          f"<= {GOAL_SECONDS * 1000:.0f} ms")
    write_result(args.json_out, {"benchmark": "log_open", "machine": machine, "args": vars(args), "table": facts,
                                 "goal_seconds": GOAL_SECONDS, "results": results, "meets_goal": meets,
                                 "load_average_end": [round(x, 2) for x in os.getloadavg()]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
