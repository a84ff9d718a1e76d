"""Benchmark: the merged read of a primary-key table alone, written as Parquet — this tree's code vs another's.

The 11 BDCI files (`--rows` each, base-0 5x; seed 003) are upserted once, as in `bench_upsert.py --one-shot`, into a
16-bucket table (11 delta files per bucket); then `LakeTable.read` of it is written as Parquet, alternating this
tree's merged read with the one of `--before` (another worktree: its `upsert/merge_read.py` and `upsert/physical.py`
are loaded beside ours, so both run in one local[2] session on the same files), `--rounds` rounds after a warm-up of
each, the order switching every round. Per read: wall seconds and the CPU seconds of the driver JVM (local mode: the
tasks run in it). Both results must have the same rows and row hash (`bdci_oracle.digest`) before a ratio is printed.

With `--compacted`, the table is compacted before the reads (one base file per bucket and nothing else), and with
`--compacted-half` half of the batches are compacted into a base and the others upserted after it (a base + 5
delta files per bucket: the stamps then differ per column and row).

    cd benchmarks && PYTHONPATH=.. python bench_merge_read.py --before /tmp/wt-before --rows 100000 --rounds 5
    # 1.5M rows (docs/benchmarks.md 17.1c); --also <worktree> alternates a third code; --compacted-half: a base + deltas
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bdci_oracle import digest
from common import local_spark, median, progress, ratio

from airflow_lake.datagen import bdci
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert import merge_read
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert


def load_before(tree: Path, label: str) -> ModuleType:
    """`merge_read` of another tree, with its own `physical` (the rest of the package is this tree's)."""
    modules: dict[str, ModuleType] = {}
    for name in ("physical", "merge_read"):
        path = tree / "airflow_lake/lake/upsert" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{label}_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    read, physical = modules["merge_read"], modules["physical"]
    for name in dir(physical):  # what merge_read imported from this tree's physical: the other tree's instead
        if name in read.__dict__ and getattr(read, name) is getattr(sys.modules["airflow_lake.lake.upsert.physical"],
                                                                        name, None):
            setattr(read, name, getattr(physical, name))
    return read


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another worktree whose merged read to compare with ours")
    parser.add_argument("--also", type=Path, action="append", default=[],
                        help="more worktrees to alternate with (labelled by their directory's name)")
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each of base-1..10 (base-0: 5x)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--compacted", action="store_true")
    parser.add_argument("--compacted-half", action="store_true")
    parser.add_argument("--explain", action="store_true", help="print our executed plan")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lake-bench-merge-read-"))
    spark = local_spark("bench-merge-read", DEFAULT_CONF, work / "warehouse")
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # (a benchmark may)
    try:
        files = bdci.generate(work / "src", args.rows)
        order = list(range(bdci.FILES))
        random.Random(3).shuffle(order)  # the order of bench_upsert.py
        table = LakeTable.create(str(work / "t"), bdci.table_spec(16))
        started = time.perf_counter()
        for i, version in enumerate(order):
            versioned_upsert(table, spark.read.parquet(str(files[version])), version=version)
            if (args.compacted and i == len(order) - 1) or (args.compacted_half and i == len(order) // 2):
                compact(table, spark)
        progress(f"built the table in {time.perf_counter() - started:.1f} s; load {os.getloadavg()[0]:.1f}")
        ways: dict[str, Any] = {"ours": merge_read}
        if args.before:
            ways["before"] = load_before(args.before, "before")
        for tree in args.also:
            ways[tree.name] = load_before(tree, tree.name.replace("-", "_"))
        if args.explain:
            snapshot = table.snapshot()
            merge_read.merged(spark, merge_read.raw_scan(table, snapshot), snapshot.spec).explain("formatted")

        def run(name: str, out: Path) -> tuple[float, float]:
            module = ways[name]
            snapshot = table.snapshot()
            cpu, wall = cpu_seconds(jvm_pid), time.perf_counter()
            module.merged(spark, module.raw_scan(table, snapshot), snapshot.spec).select(
                *[f"`{c}`" for c in snapshot.spec.column_names]).write.parquet(str(out))
            return time.perf_counter() - wall, cpu_seconds(jvm_pid) - cpu

        names = list(ways)
        results: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        digests: set[tuple[int, int]] = set()
        load = [os.getloadavg()[0]]
        for rnd in range(args.rounds + 1):  # round 0: the warm-up
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:  # each goes first in turn
                out = work / f"{name}-{rnd}.parquet"
                wall, cpu = run(name, out)
                digests.add(digest(spark, out))
                shutil.rmtree(out)
                progress(f"round {rnd}{' (warm-up)' if rnd == 0 else ''}: {name} {wall:.2f} s, CPU {cpu:.2f} s")
                if rnd:
                    results[name].append((wall, cpu))
        load.append(os.getloadavg()[0])
        if len(digests) != 1:
            raise SystemExit(f"results differ: {digests}")
        rows = digests.pop()[0]
        shape = "compacted" if args.compacted else "half compacted" if args.compacted_half else "11 delta files/bucket"
        print(f"merged read -> Parquet, BDCI {args.rows * (bdci.BASE_FACTOR + 10):,} rows ({shape}), {rows:,} rows "
              f"out, same hash; {args.rounds} rounds; load {load[0]:.1f} -> {load[1]:.1f}\n")
        print("| code | wall s median (rounds) | CPU s median (rounds) | wall / before | CPU / before |")
        print("|---|---|---|---|---|")
        base = results.get("before")
        for name in names:
            walls, cpus = [w for w, _ in results[name]], [c for _, c in results[name]]
            rel = (f"{ratio(median(walls), median([w for w, _ in base])):.2f} | "
                   f"{ratio(median(cpus), median([c for _, c in base])):.2f}") if base else "- | -"
            print(f"| {name} | {median(walls):.2f} ({', '.join(f'{w:.2f}' for w in walls)}) | {median(cpus):.2f} "
                  f"({', '.join(f'{c:.2f}' for c in cpus)}) | {rel} |")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
