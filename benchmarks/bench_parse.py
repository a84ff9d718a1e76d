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
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import REPO, machine_info, median, print_table, ratio, scratch_dir, write_result

sys.path.insert(0, str(REPO))
from tests.test_parse_light import DAG_FILES, Probe, airflow_env, package_modules, run_probe, trivial_dag_file

GOAL_MS = 50.0
SDK = "import airflow.sdk"
OPERATORS = "airflow_lake.operators + operator/sensor/asset modules"
TRIVIAL = "parse: trivial DAG (airflow.sdk only)"
TWIN = "twin (airflow.sdk only, same Params/tasks): "


def operator_modules(root: Path = REPO) -> list[str]:
    """What a DAG file imports from us: every operator module, the commit-count sensor, the assets."""
    return ["airflow.sdk", *package_modules("airflow_lake.operators", root),
            "airflow_lake.sensors.commit_count", "airflow_lake.assets"]


# Runs in a child: the shape of each DAG in a DAG file (its Params, task ids, edges), as JSON.
SHAPE = r"""
import json, os, sys
from airflow.dag_processing.dagbag import BundleDagBag

path = sys.argv[1]
bag = BundleDagBag(dag_folder=path, bundle_path=os.path.dirname(path), bundle_name="shape", load_op_links=False)
shapes = []
for dag in bag.dags.values():
    params = {name: {"value": dag.params.get_param(name).value, "schema": dag.params.get_param(name).schema,
                     "description": dag.params.get_param(name).description} for name in dag.params}
    shapes.append({"dag_id": dag.dag_id, "params": params, "tasks": list(dag.task_dict),
                   "edges": [[t.task_id, d] for t in dag.tasks for d in sorted(t.downstream_task_ids)]})
print("SHAPE " + json.dumps(shapes, default=str))
"""


def twin_dag_file(dag_file: Path, work: Path, root: Path = REPO) -> Path:
    """A DAG file of the same shape as `dag_file` that imports only airflow.sdk: each of its DAGs with the same
    Params (Airflow validates and serializes them per task, our operators or not) and the same task ids and edges,
    every task an `@task` that does nothing. Parsing it is what the DAG file would cost without our package."""
    env = {**airflow_env(work), "PYTHONPATH": str(root), "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags")}
    out = subprocess.run([sys.executable, "-c", SHAPE, str(dag_file)], env=env, cwd=root,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    shapes = json.loads(next(line for line in out.splitlines() if line.startswith("SHAPE "))[len("SHAPE "):])
    lines = ["import datetime as dt", "", "from airflow.sdk import DAG, Param, task", ""]
    for n, shape in enumerate(shapes):
        params = ", ".join(f"{name!r}: Param({p['value']!r}, description={p['description']!r}, **{p['schema']!r})"
                           for name, p in shape["params"].items())
        lines += [f"with DAG(dag_id={shape['dag_id'] + '_twin'!r}, schedule=None, "
                  f"start_date=dt.datetime(2024, 1, 1, tzinfo=dt.UTC), params={{{params}}}):",
                  "    tasks = {}"]
        for i, task_id in enumerate(shape["tasks"]):
            lines += [f"    @task(task_id={task_id!r})", f"    def t{n}_{i}() -> None:", "        pass", "",
                      f"    tasks[{task_id!r}] = t{n}_{i}()"]
        lines += [f"    tasks[{up!r}] >> tasks[{down!r}]" for up, down in shape["edges"]]
        lines.append("")
    path = work / f"twin_{'before_' if root != REPO else ''}{dag_file.name}"
    path.write_text("\n".join(lines) + "\n")
    return path


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
        out[f"{TWIN}{path.name}"] = {"dag_file": twin_dag_file(path, work)}
    if before is not None:
        out[f"before: {OPERATORS}"] = {"imports": operator_modules(before), "root": before}
        for path in sorted((before / "dags").glob("*.py")):
            out[f"before: parse: dags/{path.name}"] = {"dag_file": path, "root": before}
            out[f"before: {TWIN}{path.name}"] = {"dag_file": twin_dag_file(path, work, before)}
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
        plain = name.removeprefix("before: ")
        baseline = TRIVIAL if plain.startswith(("parse:", TWIN)) else SDK
        seconds = median([p.seconds for p in probes])
        base = median([p.seconds for p in runs[baseline]])
        twin = name.replace("parse: dags/", TWIN) if plain.startswith("parse: dags/") else None
        results[name] = {
            "baseline": baseline,
            "median_seconds": seconds,
            "median_process_seconds": median([p.wall_seconds for p in probes]),
            "diff_ms": (seconds - base) * 1000,
            "ratio": ratio(seconds, base),
            "twin": twin,
            "diff_twin_ms": (seconds - median([p.seconds for p in runs[twin]])) * 1000 if twin else None,
            "within_goal": (seconds - base) * 1000 <= GOAL_MS,
            "heavy_modules": probes[-1].heavy,
            "dag_ids": probes[-1].dag_ids,
            "runs_seconds": [round(p.seconds, 4) for p in probes],
        }

    print(f"\nmedian of {args.runs} fresh interpreters per variant; diff = median - the baseline's median "
          f"(goal <= {GOAL_MS:.0f} ms); vs twin = median - the median of the same-shape DAG file that imports only "
          "airflow.sdk; heavy = which of pyarrow, numpy, pandas, pyspark, py4j are in sys.modules")
    print_table(
        ["variant", "median s", "process s", "baseline", "diff ms", "ratio", "vs twin ms", "heavy"],
        [[name, r["median_seconds"], r["median_process_seconds"], "sdk" if r["baseline"] == SDK else "trivial DAG",
          f"{r['diff_ms']:+.0f}", r["ratio"], "-" if r["twin"] is None else f"{r['diff_twin_ms']:+.0f}",
          ", ".join(r["heavy_modules"]) or "-"]
         for name, r in results.items()],
    )
    write_result(args.json_out, {"benchmark": "bench_parse", "machine": machine_info(), "runs": args.runs,
                                 "goal_ms": GOAL_MS, "results": results})


if __name__ == "__main__":
    main()
