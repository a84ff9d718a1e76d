"""Benchmark: one VersionedUpsertOperator task's upsert of a BDCI batch, as the task makes it (`LakeHook.submit`):
in the task's own process without Spark (the default for a small Parquet source) vs through spark-submit
(`in_process_max_bytes=0`, what every upsert did before). The Airflow task's own start is the same either way and
left out.

Each round upserts the same batches (version 0 = base-0, 5 x `--rows` rows; versions 1..`--batches` of `--rows`
rows each) into a fresh table both ways, taking turns (which way goes first alternates). The merged tables are
checked equal (pyarrow merged read) before any time is reported.

    .venv/bin/python benchmarks/bench_upsert_task.py --rows 100000 --batches 2 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import machine_info, median, progress, ratio, timed

from airflow_lake.datagen import bdci
from airflow_lake.lake.table import LakeTable


def upserts(path: Path, files: list[Path], versions: list[int], max_bytes: int) -> list[float]:
    """Seconds of each upsert of `versions` into a fresh table at `path`, through the hook."""
    from airflow_lake.hooks.lake import LakeHook

    LakeTable.create(str(path), bdci.table_spec(16))
    hook = LakeHook(in_process_max_bytes=max_bytes)
    seconds = []
    for version in versions:
        took, done = timed(lambda v=version: hook.submit("versioned_upsert", {  # type: ignore[misc]
            "table": str(path), "source": {"path": str(files[v])}, "version": v}))
        if (done.get("spark") is False) != (max_bytes > 0):
            raise SystemExit(f"version {version} ran the other way: {done}")
        seconds.append(took)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each batch (base-0: 5x)")
    parser.add_argument("--batches", type=int, default=2, help="batches after base-0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lake-bench-upsert-task"))
    args = parser.parse_args(argv)
    # the hook's spark-submit: a local[2] Spark of this venv (an Airflow deployment has its spark_default)
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    work = Path(args.work) / f"run-{int(time.time())}"
    files = bdci.generate(work / "src", args.rows)
    versions = list(range(args.batches + 1))
    info = machine_info()
    results: dict[str, list[list[float]]] = {"task": [], "submit": []}
    for rnd in range(args.rounds):
        ways = ["task", "submit"] if rnd % 2 == 0 else ["submit", "task"]
        for way in ways:
            results[way].append(upserts(work / f"r{rnd}-{way}", files, versions, 64 << 20 if way == "task" else 0))
        same = {LakeTable.open(str(work / f"r{rnd}-{w}")).to_arrow().sort_by("uuid").to_pydict().__repr__()
                for w in ways}
        if len(same) != 1:
            raise SystemExit("the two ways merged to different tables")
        progress(f"round {rnd + 1}: in the task {_runs(results['task'][-1])} s, spark-submit "
                 f"{_runs(results['submit'][-1])} s (same merged table)")
        shutil.rmtree(work / f"r{rnd}-task")
        shutil.rmtree(work / f"r{rnd}-submit")
    command = " ".join(["benchmarks/bench_upsert_task.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"- command: `.venv/bin/python {command}`")
    print(f"- date: {info['date']}; machine: {info['nproc']} cores, {info['memory']}, load {info['load_average']}")
    print(f"- code: git {info['git_revision']}\n")
    print("| upsert | rows | in the task, no Spark: median s (runs) | spark-submit: median s (runs) | ratio |")
    print("|---|---|---|---|---|")
    for i, version in enumerate(versions):
        task = [r[i] for r in results["task"]]
        submit = [r[i] for r in results["submit"]]
        rows = args.rows * (bdci.BASE_FACTOR if version == 0 else 1)
        print(f"| version {version} | {rows:,} | {median(task):.2f} ({_runs(task)}) | {median(submit):.2f} "
              f"({_runs(submit)}) | {ratio(median(task), median(submit)):.3f} |")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    raise SystemExit(main())
