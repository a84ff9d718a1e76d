"""Benchmark: the cost of publishing each commit as a Delta Lake version, on a table of 100,000 live files.

Builds one table without Spark (data files only described in the log, as `bench_snapshot_100k.py` does: `--commits`
commits of `--files-per-commit` files, stats on 10 columns, partitioned by day, bucketed) with `publish.delta` off,
and a hard-linked copy of it. The copy then turns publishing on (`alter_table`), which publishes its whole log for
the first time (101 Delta versions and a Delta checkpoint of every live file): timed once. Then, alternating, a
commit of `--commit-files` files (a real `begin` / `commit`, as every operation commits) on each table:

* OFF: the commit as it was before publishing existed (`publish.delta` = false);
* ON: the same commit, which then publishes its Delta version (a few existence checks and one exclusive create).

It reports the median commit of each, the ratio ON / OFF, the publish's own time inside each ON commit (timed
around the publisher: the difference of two medians is within the noise) and its share of the commit, the time of one
Delta checkpoint of the 100,000 files (written every `checkpoint.interval` versions, shown amortized per commit),
and, as a check that the published log is usable at this size, delta-rs and DuckDB opening the published table.

    .venv/bin/python benchmarks/bench_publish.py --json-out /tmp/bench_publish.json          # ~2 min
    .venv/bin/python benchmarks/bench_publish.py --commits 10 --files-per-commit 200 --rounds 5   # small, ~15 s
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from typing import Any

from bench_snapshot_100k import BUCKETS, SCHEMA, append_commit, make_files
from common import machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.lake.format import instants
from airflow_lake.lake.format.log import CommitLog
from airflow_lake.lake.publish import delta_checkpoint, delta_log, delta_publisher
from airflow_lake.lake.publish.visibility import FileOperations, visible
from airflow_lake.lake.spec.table_spec import stored_spec
from airflow_lake.lake.table import LakeTable


def build(path: str, args: argparse.Namespace) -> float:
    """The table, publishing off: its log written directly (checkpoints through `after_commit`)."""
    started = time.perf_counter()
    table = LakeTable.create(path, {"schema": SCHEMA, "partition_by": ["dt"],
                                    "bucket": {"columns": ["c0"], "count": BUCKETS},
                                    "properties": {"publish.delta": "false"}})
    log = CommitLog(table.storage)
    rng = random.Random(args.seed)
    base_ms = instants.id_millis(log.read(0).instant)
    for seq in range(1, args.commits + 1):
        table.after_commit(append_commit(log, seq, base_ms, args.files_per_commit, rng))
    return time.perf_counter() - started


def commit(path: str, round_: int, count: int, rng: random.Random) -> float:
    """One commit of `count` described files through the commit protocol; its wall time."""
    table = LakeTable.open(path)
    started = time.perf_counter()
    txn = table.begin("commit", "write")
    files = make_files(10_000 + round_, txn.instant, count, 10_000_000 + round_ * count, rng)
    txn.commit(added=files)
    return time.perf_counter() - started


def checkpoint_seconds(path: str) -> tuple[float, int]:
    """One Delta checkpoint of the table's latest state (as the publisher writes every interval)."""
    table = LakeTable.open(path)
    state = table.state()
    spec = stored_spec(state.spec)
    operations = FileOperations(table, state)
    files = [f for f in state.files.values() if visible(f, spec, operations)]
    protocol, metadata = delta_publisher._table_actions(table, state)  # the publisher's own actions
    return timed(lambda: delta_checkpoint.write(table.storage, state.seq, protocol, metadata, spec, files=files))


def readers(path: str) -> dict[str, Any]:
    """delta-rs and DuckDB opening the published table (files they see, seconds)."""
    out: dict[str, Any] = {}
    try:
        import deltalake

        seconds, files = timed(lambda: len(deltalake.DeltaTable(path).file_uris()))
        out["delta_rs"] = {"seconds": round(seconds, 3), "files": files}
    except ImportError:
        out["delta_rs"] = "not installed"
    try:
        import duckdb
        import duckdb_ext  # type: ignore[import-not-found]

        connection = duckdb.connect()
        directory = os.path.join(os.path.dirname(duckdb_ext.__path__[0]), "duckdb_ext", "extensions")
        connection.execute("SET extension_directory = ?", [directory])
        connection.execute("LOAD delta")
        seconds, _ = timed(lambda: connection.execute("SELECT count(*) FROM delta_scan(?) WHERE c0 < 0",
                                                      [path]).fetchone())
        out["duckdb"] = {"seconds": round(seconds, 3), "note": "plans over every file's stats; reads none"}
    except ImportError:
        out["duckdb"] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--files-per-commit", type=int, default=1000)
    parser.add_argument("--commit-files", type=int, default=10, help="files of each timed commit")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--json-out")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    with scratch_dir("bench_publish", keep=args.keep) as root:
        off, on = str(root / "off"), str(root / "on")
        build_seconds = build(off, args)
        shutil.copytree(off, on, copy_function=os.link)
        table = LakeTable.open(on)
        first_seconds, _ = timed(lambda: table.alter_table([{"set_properties": {"publish.delta": "true"}}]))
        head = table.commit_log.head()
        if delta_log.published_upto(table.storage, head) != head:
            raise RuntimeError("the first publish did not reach the head")
        rng = random.Random(args.seed)
        times: dict[str, list[float]] = {"off": [], "on": []}
        inside: list[float] = []  # the publish's own time within each ON commit (`DeltaPublished.seconds`)
        real_publish = delta_publisher.publish

        def measured(table: LakeTable, upto: int | None = None) -> delta_publisher.DeltaPublished:
            done = real_publish(table, upto)
            inside.append(done.seconds)
            return done

        delta_publisher.publish = measured  # type: ignore[assignment]
        for round_ in range(args.rounds):
            for name, path in (("off", off), ("on", on)) if round_ % 2 == 0 else (("on", on), ("off", off)):
                times[name].append(commit(path, round_, args.commit_files, rng))
        delta_publisher.publish = real_publish  # type: ignore[assignment]
        if delta_log.published_upto(LakeTable.open(on).storage, LakeTable.open(on).commit_log.head()) < 0:
            raise RuntimeError("the commits were not published")
        cp_seconds, cp_actions = checkpoint_seconds(on)
        interval = int(LakeTable.open(on).spec.float_property("checkpoint.interval"))
        off_ms, on_ms = median(times["off"]) * 1000, median(times["on"]) * 1000
        files = len(LakeTable.open(on).state().files)
        result = {
            "machine": machine_info(), "args": vars(args), "live_files": files,
            "build_seconds": round(build_seconds, 1), "first_publish_seconds": round(first_seconds, 2),
            "commit_ms_off": round(off_ms, 1), "commit_ms_on": round(on_ms, 1),
            "ratio_on_off": ratio(on_ms, off_ms), "publish_ms_difference": round(on_ms - off_ms, 1),
            "publish_ms_inside": round(median(inside) * 1000, 1),
            "publish_share_of_commit": round(median(inside) * 1000 / on_ms, 3),
            "delta_checkpoint_seconds": round(cp_seconds, 2), "delta_checkpoint_actions": cp_actions,
            "checkpoint_interval": interval,
            "checkpoint_ms_per_commit": round(cp_seconds * 1000 / interval, 1),
            "readers": readers(on),
        }
        print_table(["live files", "commit OFF ms", "commit ON ms", "ON/OFF", "publish ms (inside)", "share",
                     "checkpoint s (every N)", "first publish s"],
                    [[files, result["commit_ms_off"], result["commit_ms_on"], result["ratio_on_off"],
                      result["publish_ms_inside"], result["publish_share_of_commit"],
                      f"{result['delta_checkpoint_seconds']} ({interval})", result["first_publish_seconds"]]])
        print("readers:", result["readers"])
        write_result(args.json_out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
