"""Benchmark: how fast the command line starts — `airflow-lake --help`, `airflow-lake ls --help` and `airflow-lake ls`
of a root with 50 tables — each a fresh process, this code vs an older checkout (goals: help <= 0.3 s, ls < 1 s).

Each measurement runs the console script's own code (`from airflow_lake.cli import main; sys.exit(main())`) in a
fresh `python` with the code under test first on sys.path, and takes its wall time from outside (start-up,
imports, the command, output). Before timing, both checkouts' `airflow_lake` is compiled to bytecode, as
`.ci/setup` does (with PYTHONDONTWRITEBYTECODE set, as on these machines, an uncompiled tree recompiles every
module on every run, which is not what users pay).

Two roots, their tables built without Spark by writing their logs (entries and checkpoints as writers make them;
the data files are only described: `synthetic_log.py`), partitioned by day, one in three clustered every 50
commits:

* `young`: 50 tables of 12..98 commits — none has reached its first checkpoint (`checkpoint.interval` 100), so
  `ls` needs no Parquet reader;
* `mixed`: the same 40 of them plus 10 tables of 150 commits, whose state starts from a Parquet checkpoint.

The output of every command (stdout and exit code) must be the same for both checkouts before a ratio is
reported. Per command it also records which of pyarrow, numpy, pandas, pyspark and airflow the process loaded
(from one extra run that prints `sys.modules`).

    git worktree add --detach /tmp/before-cli 161fe3f
    .venv/bin/python benchmarks/bench_cli.py --before /tmp/before-cli --rounds 15 --json-out /tmp/bench_cli.json
    .venv/bin/python benchmarks/bench_cli.py --rounds 5          # this code only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import REPO, machine_info, median, print_table, ratio, scratch_dir, write_result

sys.path.insert(0, str(REPO))
from synthetic_log import append_commits

from airflow_lake.lake.table import LakeTable

HELP_GOAL, LS_GOAL = 0.3, 1.0
HEAVY = ("pyarrow", "numpy", "pandas", "pyspark", "py4j", "airflow")
# what the `airflow-lake` console script runs
SCRIPT = "import sys; from airflow_lake.cli import main; sys.exit(main())"
# the same, then which heavy modules (and how many of ours) the command loaded, on stderr's last line
PROBE = (
    "import sys, json\n"
    "from airflow_lake.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = sorted({m.split('.')[0] for m in sys.modules} & set(" + json.dumps(HEAVY) + "))\n"
    "print(json.dumps({'heavy': heavy, 'ours': sum(m.startswith('airflow_lake') for m in sys.modules),\n"
    "                  'file': sys.modules['airflow_lake'].__file__}), file=sys.stderr)\n"
)


def build_roots(base: Path, tables: int, old: int) -> dict[str, Path]:
    """The `young` and `mixed` roots (see the module's doc)."""
    young, mixed = base / "young", base / "mixed"
    for n in range(tables):
        path = young / f"db{n % 5}" / f"t{n:02d}"
        table = LakeTable.create(str(path), {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]})
        append_commits(table, 12 + (n * 37) % 87, clustered=n % 3 == 0)  # 12..98 commits
        if n < tables - old:
            shutil.copytree(path, mixed / path.relative_to(young), symlinks=True)
    for n in range(old):
        table = LakeTable.create(str(mixed / "old" / f"t{n:02d}"),
                                 {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]})
        append_commits(table, 150, clustered=n % 2 == 0)  # a checkpoint at 100, then 50 entries
    return {"young": young, "mixed": mixed}


def compile_tree(tree: Path) -> None:
    """Bytecode for the tree's package, as `.ci/setup` makes it."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "airflow_lake")], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh(tree: Path, argv: list[str]) -> dict[str, Any]:
    """One fresh process running the CLI of `tree`: its wall time, its CPU time (user + sys: on a busy machine
    less inflated than the wall time, and close to a quiet machine's wall time for this one-threaded process),
    exit code and output."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, check=False,
                          timeout=300, env=_env(tree), cwd=tree)
    return {"wall_seconds": time.perf_counter() - started, "cpu_seconds": _children_cpu() - cpu,
            "code": done.returncode, "stdout": done.stdout}


def modules(tree: Path, argv: list[str]) -> dict[str, Any]:
    """The heavy modules the command loaded, and the package file it ran (checked to be the tree's)."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False,
                          timeout=300, env=_env(tree), cwd=tree)
    found: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])
    if not Path(found["file"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the probe of {tree} ran {found['file']}: put the tree first on sys.path")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50, help="tables per root (default 50)")
    parser.add_argument("--old", type=int, default=10, help="tables of 150 commits in the mixed root (default 10)")
    parser.add_argument("--rounds", type=int, default=15, help="fresh processes per command and code (default 15)")
    parser.add_argument("--before", default=None, help="a checkout of the code to compare with")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the roots")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.old > args.tables:
        parser.error("--rounds must be >= 1 and --old at most --tables")
    trees = {"after": REPO, **({"before": Path(args.before).resolve()} if args.before else {})}
    machine = machine_info()
    print(f"CLI start-up benchmark: {machine['nproc']} cores, load {machine['load_average']}, {args.rounds} rounds")
    for tree in trees.values():
        compile_tree(tree)
    with scratch_dir("bench-cli-", keep=args.keep) as base:
        started = time.perf_counter()
        roots = build_roots(base, args.tables, args.old)
        print(f"built the roots in {time.perf_counter() - started:.0f} s")
        commands = {"--help": ["--help"], "ls --help": ["ls", "--help"],
                    **{f"ls {name} ({args.tables} tables)": ["ls", str(path)] for name, path in roots.items()}}
        loaded = {c: {t: modules(tree, a) for t, tree in trees.items()} for c, a in commands.items()}
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {c: {t: [] for t in trees} for c in commands}
        for _ in range(args.rounds):  # alternate the codes, so a burst of load hits both
            for command, command_argv in commands.items():
                for tree_name, tree in trees.items():
                    runs[command][tree_name].append(fresh(tree, command_argv))
    results: dict[str, Any] = {}
    rows = []
    for command in commands:
        outputs = {(r["code"], r["stdout"]) for t in trees for r in runs[command][t]}
        if len(outputs) != 1:  # the same output from every run of both codes, or no ratio
            raise RuntimeError(f"`airflow-lake {command}` printed different outputs: {len(outputs)} distinct")
        code, stdout = outputs.pop()
        goal = LS_GOAL if command.startswith("ls ") and "--help" not in command else HELP_GOAL
        result: dict[str, Any] = {"exit_code": code, "stdout_lines": len(stdout.splitlines()), "goal_seconds": goal}
        for tree_name in trees:
            walls = [r["wall_seconds"] for r in runs[command][tree_name]]
            result[tree_name] = {"median_seconds": median(walls), "min_seconds": min(walls),
                                 "max_seconds": max(walls),
                                 "median_cpu_seconds": median([r["cpu_seconds"] for r in runs[command][tree_name]]),
                                 "loaded": loaded[command][tree_name]}
        after = result["after"]["median_seconds"]
        result["meets_goal"] = after < goal if goal == LS_GOAL else after <= goal
        row = [command, after * 1000, result["after"]["median_cpu_seconds"] * 1000,
               ",".join(result["after"]["loaded"]["heavy"]) or "-"]
        if "before" in trees:
            before = result["before"]["median_seconds"]
            result["ratio"] = ratio(after, before)
            result["cpu_ratio"] = ratio(result["after"]["median_cpu_seconds"], result["before"]["median_cpu_seconds"])
            row += [before * 1000, result["before"]["median_cpu_seconds"] * 1000,
                    ",".join(result["before"]["loaded"]["heavy"]) or "-", result["ratio"], result["cpu_ratio"]]
        row += [f"{'<' if goal == LS_GOAL else '<='} {goal:g} s: {'yes' if result['meets_goal'] else 'NO'}"]
        results[command] = result
        rows.append(row)
    headers = ["command", "after: wall ms", "after: CPU ms", "after loads"]
    if "before" in trees:
        headers += ["before: wall ms", "before: CPU ms", "before loads", "after / before (wall)",
                    "after / before (CPU)"]
    print()
    print_table([*headers, "goal met"], rows)
    load_end = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at the end: {load_end}; every command printed the same with both codes")
    write_result(args.json_out, {"benchmark": "cli", "machine": machine, "args": vars(args), "results": results,
                                 "meets_goal": all(r["meets_goal"] for r in results.values()),
                                 "load_average_end": load_end})
    return 0


if __name__ == "__main__":
    sys.exit(main())
