"""Benchmark: what a DAG file costs at every parse — `import airflow_lake.operators` (+ the operator, sensor and
asset modules a DAG file imports) and each example DAG file parsed with Airflow's own DagBag, vs a DAG file that
imports only airflow.sdk (goal: within 50 ms of it).

Each measurement runs in a fresh interpreter (the variants alternate, run after run), timed inside the child: the
imports for (a) and (b); for (c) the parse as the dag-processor does it (`BundleDagBag` of the one file, each DAG
serialized), after loading what the dag-processor has loaded before it forks a parse (the bag, the serializer, the
file's `airflow.*` imports). The probe lives in tests/test_parse_light.py, which asserts what this prints in the
`heavy` column.

    .venv/bin/python benchmarks/bench_parse.py --runs 15 --json-out /tmp/bench_parse.json
    git worktree add /tmp/before 5de73b4 && .venv/bin/python benchmarks/bench_parse.py --runs 15 --before /tmp/before
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common import REPO, machine_info, median, print_table, ratio, scratch_dir, write_result

sys.path.insert(0, str(REPO))
from tests.test_parse_light import DAG_FILES, Probe, package_modules, run_probe, trivial_dag_file

GOAL_MS = 50.0
SDK = "import airflow.sdk"
OPERATORS = "airflow_lake.operators + operator/sensor/asset modules"
TRIVIAL = "parse: trivial DAG (airflow.sdk only)"


def operator_modules(root: Path = REPO) -> list[str]:
    """What a DAG file imports from us: every operator module, the commit-count sensor, the assets."""
    return ["airflow.sdk", *package_modules("airflow_lake.operators", root),
            "airflow_lake.sensors.commit_count", "airflow_lake.assets"]


def variants(work: Path, before: Path | None) -> dict[str, dict[str, Any]]:
    """name -> run_probe arguments; the two baselines first; with `before`, the same imports and DAG files of
    that checkout too (an older version, measured in the same run)."""
    out: dict[str, dict[str, Any]] = {
        SDK: {"imports": ["airflow.sdk"]},
        OPERATORS: {"imports": operator_modules()},
        TRIVIAL: {"dag_file": trivial_dag_file(work)},
    }
    for path in DAG_FILES:
        out[f"parse: dags/{path.name}"] = {"dag_file": path}
    if before is not None:
        out[f"before: {OPERATORS}"] = {"imports": operator_modules(before), "root": before}
        for path in sorted((before / "dags").glob("*.py")):
            out[f"before: parse: dags/{path.name}"] = {"dag_file": path, "root": before}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per variant (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (bytecode caches, Airflow home)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to probe (default: this one)")
    parser.add_argument("--before", type=Path, help="a checkout of an older version to measure in the same run "
                        "(e.g. `git worktree add /tmp/before 5de73b4`)")
    parser.add_argument("--json-out")
    parser.add_argument("--keep", action="store_true", help="keep the temporary Airflow home")
    args = parser.parse_args()

    with scratch_dir("bench-parse-", keep=args.keep) as work:
        cases = variants(work, args.before.resolve() if args.before else None)
        runs: dict[str, list[Probe]] = {name: [] for name in cases}
        for n in range(args.warmup + args.runs):
            for name, kwargs in cases.items():
                probe = run_probe(work, trace=False, python=args.python, **kwargs)
                if probe.import_errors or (kwargs.get("dag_file") and not probe.dag_ids):
                    raise SystemExit(f"{name}: does not import / parse: {probe.import_errors}")
                if n >= args.warmup:
                    runs[name].append(probe)
            print(f"round {n + 1}/{args.warmup + args.runs}", file=sys.stderr)

    results: dict[str, dict[str, Any]] = {}
    for name, probes in runs.items():
        baseline = TRIVIAL if name.removeprefix("before: ").startswith("parse:") else SDK
        seconds = median([p.seconds for p in probes])
        base = median([p.seconds for p in runs[baseline]])
        results[name] = {
            "baseline": baseline,
            "median_seconds": seconds,
            "median_process_seconds": median([p.wall_seconds for p in probes]),
            "diff_ms": (seconds - base) * 1000,
            "ratio": ratio(seconds, base),
            "within_goal": (seconds - base) * 1000 <= GOAL_MS,
            "heavy_modules": probes[-1].heavy,
            "dag_ids": probes[-1].dag_ids,
            "runs_seconds": [round(p.seconds, 4) for p in probes],
        }

    print(f"\nmedian of {args.runs} fresh interpreters per variant; diff = median - the baseline's median "
          f"(goal <= {GOAL_MS:.0f} ms); heavy = which of pyarrow, numpy, pandas, pyspark, py4j are in sys.modules")
    print_table(
        ["variant", "median s", "process s", "baseline", "diff ms", "ratio", "heavy"],
        [[name, r["median_seconds"], r["median_process_seconds"], "sdk" if r["baseline"] == SDK else "trivial DAG",
          f"{r['diff_ms']:+.0f}", r["ratio"], ", ".join(r["heavy_modules"]) or "-"]
         for name, r in results.items()],
    )
    write_result(args.json_out, {"benchmark": "bench_parse", "machine": machine_info(), "runs": args.runs,
                                 "goal_ms": GOAL_MS, "results": results})


if __name__ == "__main__":
    main()
