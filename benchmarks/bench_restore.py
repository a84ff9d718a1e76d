"""Benchmark: `restore` of a table with 100,000 live files, in a fresh process (goal <= 2 s).

Builds the table without Spark, as `bench_snapshot_100k.py` does (data files only described in the log, stats on 10
columns, partitioned by day and bucketed; the Parquet checkpoint written by `LakeTable.after_commit`): `--commits`
commits of `--files-per-commit` files. Then a bad day: a `replace` that rewrites the files of commit 1 (which are
created on disk, empty, so a restore can re-add them) and an append of `--files-per-commit` files. Each case is a
copy of that table (hard links) and a fresh `python -c` process that opens it and restores:

* `undo the bad day`: restore to the snapshot before it (re-adds the rewritten files, removes the new ones);
* `back to the middle`: restore to the snapshot after half the commits (removes half the files).

It prints the wall time of the process and the open + restore time inside it.

    .venv/bin/python benchmarks/bench_restore.py --json-out /tmp/bench_restore.json          # ~1.5 min
    .venv/bin/python benchmarks/bench_restore.py --commits 10 --files-per-commit 200 --checkpoint-interval 10 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_snapshot_100k import build, make_files
from common import machine_info, median, print_table, scratch_dir, write_result

from airflow_lake.lake.format import instants
from airflow_lake.lake.format.log import CommitLog, LogEntry
from airflow_lake.lake.table import LakeTable

GOAL_SECONDS = 2.0
PROBE = """
import json, sys, time
started = time.perf_counter()
from airflow_lake.lake import LakeTable
imported = time.perf_counter()
result = LakeTable.open(sys.argv[1]).restore(to_seq=int(sys.argv[2]), request_id="bench")
done = time.perf_counter()
entry = result.entry
print(json.dumps({"import_seconds": imported - started, "restore_seconds": done - imported,
                  "seq": entry.seq if entry else None, "files_removed": len(entry.removed) if entry else 0,
                  "files_readded": len(entry.added) if entry else 0}))
"""


def bad_day(path: str, args: argparse.Namespace) -> dict[str, int]:
    """A replace of commit 1's files (put on disk first) and an append; returns the seqs to restore."""
    table = LakeTable.open(path)
    log = CommitLog(table.storage)
    head = log.head()
    rng = random.Random(args.seed + 1)
    first = log.read(1).added
    for data_file in first:  # restore re-adds only files that are on disk
        target = Path(table.storage.path(data_file.path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    base_ms = instants.id_millis(log.read(head).instant)
    for offset, removed in ((1, tuple(f.path for f in first)), (2, ())):
        seq = head + offset
        instant = instants.format_id(base_ms + offset)
        added = make_files(seq, instant, args.files_per_commit, seq * args.files_per_commit, rng)
        now = time.time()
        entry = LogEntry(seq=seq, instant=instant, action="replace" if removed else "commit",
                         operation="compact" if removed else "write", started_at=now, completed_at=now,
                         base_seq=seq - 1, added=tuple(added), removed=removed)
        if not log.try_append(entry):
            raise RuntimeError(f"log entry {seq} already exists")
    return {"undo the bad day": head, "back to the middle": args.commits // 2}


def fresh_restore(path: str, seq: int) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, path, str(seq)], capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(path))
    return {"wall_seconds": time.perf_counter() - started, **json.loads(done.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100, help="commits after create (default 100)")
    parser.add_argument("--files-per-commit", type=int, default=1000, help="files per commit (default 1000)")
    parser.add_argument("--checkpoint-interval", type=int, default=100, help="table property (default 100)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per case (default 3)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the table directories")
    args = parser.parse_args(argv)
    if args.commits < max(2, args.checkpoint_interval) or min(args.runs, args.files_per_commit) < 1:
        parser.error("--commits must be >= --checkpoint-interval and >= 2; --runs, --files-per-commit >= 1")

    machine = machine_info()
    files = args.commits * args.files_per_commit
    print(f"restore benchmark, {files} live files: {machine['nproc']} cores, load {machine['load_average']}")
    results: dict[str, list[dict[str, Any]]] = {}
    with scratch_dir("lake-bench-restore-", keep=args.keep) as root:
        template = str(root / "template")
        built = build(template, args)
        targets = bad_day(template, args)
        print(f"built in {built['seconds']:.1f} s: head {CommitLog(LakeTable(template).storage).head()}")
        for name, seq in targets.items():
            results[name] = []
            for run in range(args.runs):
                path = str(root / f"{name.replace(' ', '_')}-{run}")
                shutil.copytree(template, path, copy_function=os.link)
                results[name].append(fresh_restore(path, seq))
    rows = []
    summary: dict[str, dict[str, Any]] = {}
    for name, runs in results.items():
        wall = median([r["wall_seconds"] for r in runs])
        inside = median([r["restore_seconds"] for r in runs])
        summary[name] = {"wall_seconds": wall, "open_restore_seconds": inside, "seq": targets[name],
                         "files_removed": runs[0]["files_removed"], "files_readded": runs[0]["files_readded"],
                         "runs": runs}
        rows.append([f"{name} (to seq {targets[name]}): -{runs[0]['files_removed']} / +{runs[0]['files_readded']} "
                     "files", wall, inside])
    print()
    print_table(["fresh process", "wall (s)", "open + restore inside (s)"], rows)
    worst = max(s["wall_seconds"] for s in summary.values())
    print(f"worst fresh-process restore: {worst:.3f} s -> {'meets' if worst <= GOAL_SECONDS else 'MISSES'} the goal "
          f"of <= {GOAL_SECONDS} s")
    write_result(args.json_out, {"benchmark": "restore", "machine": machine, "args": vars(args),
                                 "goal_seconds": GOAL_SECONDS, "results": summary, "meets_goal": worst <= GOAL_SECONDS,
                                 "load_average_end": [round(x, 2) for x in os.getloadavg()]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
