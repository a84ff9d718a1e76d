"""Benchmark: an Airflow retry of a lake task whose request has already committed, two code trees side by side.

A retry is `LakeHook.submit` of a spec whose request id committed before (what the operator calls when Airflow runs
the task again), in a fresh Python process as a task's process is: timed around the call, and whole (the process's
imports and start-up too). Per path — spark-submit (`spark` connection, local[2]) and Spark Connect (a warm
`airflow-lake connect-server`, local[2], started here) — and per operation: a write of 10 rows into a 4-bucket table
and a versioned upsert into a primary-key table. Each round runs the retry with each tree (`--before`: a checkout of
the code to compare with, e.g. `git worktree add --detach ../before main`; "after": this tree), alternating which
goes first. The two trees' results must be equal (the same metrics, `already_committed: true`) and nothing may be
committed by a retry, or no ratio is reported.

    .venv/bin/python benchmarks/bench_retry.py --before ../before --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from bench_connect import Server
from common import REPO, median, scratch_dir

# The task's side of a retry: import the hook, submit, print how long each took and the result.
CHILD = """
import json, sys, time
started = time.perf_counter()
from airflow_lake.hooks.lake import LakeHook
conn_id, operation, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
called = time.perf_counter()
result = LakeHook(conn_id).submit(operation, spec)
done = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"submit": done - called, "process": done - started, "result": result},
                                   default=str), flush=True)
"""


def environment(tree: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    env.update({
        "PYTHONPATH": str(tree), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1",
                                                          "port": port}),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    })
    return env


def submit(tree: Path, port: int, conn_id: str, operation: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One `LakeHook.submit` in a fresh process running `tree`'s airflow_lake: {"submit", "process", "result"}."""
    done = subprocess.run([sys.executable, "-c", CHILD, conn_id, operation, json.dumps(spec)],
                          env=environment(tree, port), cwd=tree, capture_output=True, text=True, timeout=900,
                          check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{operation} on {conn_id} with {tree} failed:\n{(done.stdout + done.stderr)[-4000:]}")
    out: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1])
    return out


def specs(work: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """The committed requests to retry, by name: (operation, spec); their tables are made under `work`."""
    from airflow_lake.lake import LakeTable

    rows = work / "rows.parquet"
    pq.write_table(pa.table({"id": pa.array(range(10), pa.int64()), "v": [float(i) for i in range(10)]}), rows)
    out = {}
    for conn_id in ("spark_default", "spark_connect_default"):
        events = LakeTable.create(str(work / f"events_{conn_id}"), {"schema": "id BIGINT, v DOUBLE", "bucket": {
            "columns": ["id"], "count": 4}}).url
        users = LakeTable.create(str(work / f"users_{conn_id}"), {"schema": "id BIGINT NOT NULL, v DOUBLE",
                                                                  "primary_key": ["id"], "bucket": {
                                                                      "columns": ["id"], "count": 4}}).url
        out[f"{conn_id}: write"] = ("write", {"table": events, "source": {"path": str(rows)},
                                              "request_id": f"bench/{conn_id}/write"})
        out[f"{conn_id}: versioned_upsert"] = ("versioned_upsert", {
            "table": users, "source": {"path": str(rows)}, "version": 1, "request_id": f"bench/{conn_id}/upsert"})
    return out


def heads(todo: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, int]:
    from airflow_lake.lake import LakeTable

    return {name: LakeTable.open(spec["table"]).commit_log.head() for name, (_, spec) in todo.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the code tree to compare with (a checkout)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": REPO}
    print("load average at start:", Path("/proc/loadavg").read_text().strip(), flush=True)
    with scratch_dir("bench-retry-") as work:
        server = Server(work)
        try:
            todo = specs(work)
            for name, (operation, spec) in todo.items():  # the first tries: they commit (and warm the server up)
                first = submit(REPO, server.port, name.split(":")[0], operation, spec)["result"]
                assert first["already_committed"] is False, first
            committed = heads(todo)
            times: dict[tuple[str, str, str], list[float]] = {}
            for r in range(args.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for name, (operation, spec) in todo.items():
                    results = {}
                    for tree in order:
                        got = submit(trees[tree], server.port, name.split(":")[0], operation, spec)
                        results[tree] = got["result"]
                        for what in ("submit", "process"):
                            times.setdefault((name, what, tree), []).append(got[what])
                    if results["before"] != results["after"] or results["after"]["already_committed"] is not True:
                        raise SystemExit(f"{name}: the retries differ:\n{results}")
                print(f"round {r + 1}: " + ", ".join(f"{n} {t} {w} {v[-1]:.2f} s" for (n, w, t), v in times.items()
                                                    if w == "submit"), flush=True)
            if heads(todo) != committed:
                raise SystemExit(f"a retry committed: {committed} -> {heads(todo)}")
        finally:
            server.stop()
    lines = ["| retry of a committed request | before: submit (s) | after: submit (s) | after ÷ before "
             "| before: process (s) | after: process (s) | after ÷ before |", "|---|---|---|---|---|---|---|"]
    for name in todo:
        cells = []
        for what in ("submit", "process"):
            before, after = median(times[(name, what, "before")]), median(times[(name, what, "after")])
            cells += [f"{before:.2f}", f"{after:.2f}", f"{after / before:.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    print("load average at end:", Path("/proc/loadavg").read_text().strip())
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
