"""Benchmark: snapshot resolution on a table with many instants, with checkpoints vs a full fold of the log.

Builds a partitioned table with `--instants` commits (no Spark: data files are only described in the log,
they need not exist). About every `--compact-every`-th commit is a `replace` that compacts one partition, so
the live file set stays realistic. Then, each time with a fresh `LakeTable` object (no cache), it times
`LakeTable.open(path).snapshot()`, two time-travel snapshots and a filtered `scan`, and the same calls with
a resolver whose checkpoint lookup is disabled (the baseline: fold every log entry from the start).

    .venv/bin/python benchmarks/bench_snapshot.py --instants 10000 --json-out /tmp/bench_snapshot.json
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from common import machine_info, median, print_table, ratio, scratch_dir, timed, write_result

from airflow_lake.lake.format import checkpoints, instants
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.log import CommitLog, LogEntry
from airflow_lake.lake.format.paths import CHECKPOINTS, LAST_CHECKPOINT, LOG, checkpoint_file
from airflow_lake.lake.format.snapshots import Snapshot, SnapshotResolver, TableState
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.table import LakeTable

GOAL_SECONDS = 1.0
ROWS_PER_FILE = 1000
SCHEMA = "id BIGINT, dt STRING"


class FullFoldResolver(SnapshotResolver):
    """The baseline: never reads a checkpoint, so every state is the fold of the log from entry 0."""

    def _from_checkpoint(self, target: int, exclude: int | None = None) -> TableState:
        return TableState()


@dataclass(frozen=True)
class BuildResult:
    """What building the table produced."""

    seconds: float
    commits: int
    compactions: int
    live_files: int
    head: int


class LogBuilder:
    """Generates the commits: appends of one file to a random partition, and periodic compactions."""

    def __init__(self, partitions: int, compact_every: int, seed: int) -> None:
        self.days = [f"2024-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(partitions)]
        self.compact_every = compact_every
        self.rng = random.Random(seed)
        self.live: dict[str, dict[str, DataFile]] = {d: {} for d in self.days}
        self.compactions = 0

    def compaction_target(self, seq: int) -> str | None:
        """The partition commit `seq` compacts, or None if it is an append."""
        if seq % self.compact_every:
            return None
        day = self.days[(seq // self.compact_every) % len(self.days)]
        return day if len(self.live[day]) >= 2 else None

    def change(self, seq: int, instant: str, compact: str | None) -> tuple[list[DataFile], list[str]]:
        """(added, removed) of commit `seq`; updates the live set."""
        if compact is not None:
            old = list(self.live[compact].values())
            merged = DataFile(
                path=f"dt={compact}/part-{instant}-0.parquet", partition={"dt": compact},
                rows=sum(f.rows for f in old), bytes=sum(f.bytes for f in old), instant=instant,
                stats={"id": ColumnStats(min(f.stats["id"].min for f in old),
                                         max(f.stats["id"].max for f in old), 0)})
            self.live[compact] = {merged.path: merged}
            self.compactions += 1
            return [merged], [f.path for f in old]
        day = self.rng.choice(self.days)
        lo = seq * ROWS_PER_FILE
        added = DataFile(path=f"dt={day}/part-{instant}-0.parquet", partition={"dt": day}, rows=ROWS_PER_FILE,
                         bytes=16 * ROWS_PER_FILE, instant=instant,
                         stats={"id": ColumnStats(lo, lo + ROWS_PER_FILE - 1, 0)})
        self.live[day][added.path] = added
        return [added], []

    def live_count(self) -> int:
        return sum(len(files) for files in self.live.values())


def build_direct(path: str, args: argparse.Namespace) -> BuildResult:
    """Write log entries straight into the log; checkpoints through `LakeTable.after_commit`.

    `after_commit` only writes a checkpoint when `seq % checkpoint.interval == 0` and does nothing else, so it is
    called for those entries only: calling it for every entry costs one listing of the log directory each.
    """
    started = time.perf_counter()
    table = LakeTable.create(path, table_spec(args))
    log = CommitLog(table.storage)
    interval = int(table.spec.float_property("checkpoint.interval"))
    builder = LogBuilder(args.partitions, args.compact_every, args.seed)
    base_ms = instants.id_millis(log.read(0).instant)
    for seq in range(1, args.instants + 1):
        instant = instants.format_id(base_ms + seq)
        compact = builder.compaction_target(seq)
        action = "commit" if compact is None else "replace"
        added, removed = builder.change(seq, instant, compact)
        now = time.time()
        entry = LogEntry(
            seq=seq, instant=instant, action=action, operation="write" if action == "commit" else "compact",
            started_at=now, completed_at=now, base_seq=seq - 1, added=tuple(added), removed=tuple(removed),
            metadata={"mode": "append", "partitions": None} if action == "commit" else {},
            metrics={"files_added": len(added), "files_removed": len(removed),
                     "rows_added": sum(f.rows for f in added), "bytes_added": sum(f.bytes for f in added),
                     "duration_seconds": 0.0},
        )
        if not log.try_append(entry):
            raise RuntimeError(f"log entry {seq} already exists")
        if seq % interval == 0:
            table.after_commit(entry)
        progress(seq, args.instants, started)
    return BuildResult(time.perf_counter() - started, args.instants, builder.compactions, builder.live_count(),
                       log.head())


def build_txn(path: str, args: argparse.Namespace) -> BuildResult:
    """Commit through the transaction API (`begin` + `commit`), as a writer does. Slow for 10k commits."""
    started = time.perf_counter()
    table = LakeTable.create(path, table_spec(args))
    builder = LogBuilder(args.partitions, args.compact_every, args.seed)
    for seq in range(1, args.instants + 1):
        compact = builder.compaction_target(seq)
        if compact is None:
            txn = table.begin("commit", "write", recover=False)
        else:
            txn = table.begin("replace", "compact", recover=False)
        added, removed = builder.change(seq, txn.instant, compact)
        txn.commit(added=added, removed=removed)
        progress(seq, args.instants, started)
    return BuildResult(time.perf_counter() - started, args.instants, builder.compactions, builder.live_count(),
                       table.commit_log.head())


def table_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"schema": SCHEMA, "partition_by": ["dt"]}
    if args.checkpoint_interval:
        spec["properties"] = {"checkpoint.interval": str(args.checkpoint_interval)}
    return spec


def progress(seq: int, total: int, started: float) -> None:
    if seq % max(1, total // 10) == 0:
        print(f"  built {seq}/{total} commits in {time.perf_counter() - started:.1f} s", flush=True)


def open_table(path: str, checkpoints: bool) -> LakeTable:
    """A fresh table object (empty cache); the baseline swaps in the full-fold resolver."""
    table = LakeTable.open(path)
    if not checkpoints:
        table._resolver = FullFoldResolver(table.storage, table.commit_log)
    return table


def on_fresh_table(call: Callable[[LakeTable], Any], path: str, checkpoints: bool) -> Any:
    """`call` on a table object opened just now (what is timed includes the open)."""
    return call(open_table(path, checkpoints))


def measure(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeats):
        seconds, result = timed(fn)
        times.append(seconds)
    return times, result


def run_cases(path: str, args: argparse.Namespace, head: int, interval: int) -> list[dict[str, Any]]:
    """Time each case with checkpoints (ours) and without (baseline), alternating, fresh object every time."""
    middle = min(head, head // 2 + interval // 2)  # between two checkpoints, not on one
    worst = max(0, head - 1)  # interval - 1 entries past the previous checkpoint
    id_limit = (head // 2) * ROWS_PER_FILE
    cases: list[tuple[str, str, Callable[[LakeTable], Any]]] = [
        ("snapshot() latest", f"seq {head}", lambda t: t.snapshot()),
        ("snapshot(as_of=middle)", f"seq {middle}", lambda t: t.snapshot(as_of=middle)),
        ("snapshot(as_of=head-1)", f"seq {worst}", lambda t: t.snapshot(as_of=worst)),
        ("scan(id < N)", f"N={id_limit}", lambda t: t.scan(filters=[("id", "<", id_limit)])),
    ]
    out = []
    for name, detail, call in cases:
        ours_times: list[float] = []
        base_times: list[float] = []
        ours_result: Any = None
        base_result: Any = None
        for _ in range(args.repeats):
            seconds, ours_result = timed(partial(on_fresh_table, call, path, True))
            ours_times.append(seconds)
            seconds, base_result = timed(partial(on_fresh_table, call, path, False))
            base_times.append(seconds)
        same = fingerprint(ours_result) == fingerprint(base_result)
        out.append({
            "case": name, "detail": detail, "ours_seconds": median(ours_times),
            "baseline_seconds": median(base_times), "ours_all": ours_times, "baseline_all": base_times,
            "speedup": ratio(median(base_times), median(ours_times)),
            "ours_over_baseline": ratio(median(ours_times), median(base_times)),
            "result": describe(ours_result), "same_result": same,
        })
    return out


def describe(result: Snapshot | Scan) -> dict[str, Any]:
    """Facts of a snapshot or scan for the report."""
    if isinstance(result, Scan):
        return {"seq": result.snapshot.seq, "files_read": len(result.files), "files_total": result.files_total}
    return {"seq": result.seq, "files": len(result.files), "rows": result.rows}


def fingerprint(result: Snapshot | Scan) -> tuple[int, tuple[DataFile, ...]]:
    """What must be equal between ours and the baseline: the sequence number and the exact files."""
    seq = result.snapshot.seq if isinstance(result, Scan) else result.seq
    return seq, tuple(result.files)


def components(path: str, repeats: int) -> dict[str, Any]:
    """Where the time of `snapshot()` goes: log listings, the checkpoint read, and how many listings it does."""
    table = LakeTable.open(path)
    listing, _ = measure(lambda: CommitLog(table.storage).head(), repeats)
    root = Path(table.storage.path(""))
    checkpoint_files = [p for p in (root / CHECKPOINTS).iterdir() if not p.name.endswith(".tmp")]
    out: dict[str, Any] = {"log_listing_seconds": median(listing), "checkpoints": len(checkpoint_files),
                           "checkpoints_total_bytes": sum(p.stat().st_size for p in checkpoint_files)}
    if table.storage.exists(LAST_CHECKPOINT):
        hint = table.storage.read_json(LAST_CHECKPOINT)
        seq, fmt = int(hint["seq"]), hint.get("format", "json")
        load, _ = measure(lambda: checkpoints.read(table.storage, seq, fmt), repeats)
        out.update({"checkpoint_seq": seq, "checkpoint_format": fmt, "checkpoint_load_seconds": median(load),
                    "checkpoint_bytes": (root / checkpoint_file(seq, fmt)).stat().st_size})
    calls = 0
    original = CommitLog.head

    def counting_head(self: CommitLog) -> int:
        nonlocal calls
        calls += 1
        return original(self)

    CommitLog.head = counting_head  # type: ignore[method-assign]
    try:
        LakeTable.open(path).snapshot()
    finally:
        CommitLog.head = original  # type: ignore[method-assign]
    out["log_listings_per_open_and_snapshot"] = calls
    log_files = list((root / LOG).glob("*.json"))
    out.update({"log_files": len(log_files), "log_total_bytes": sum(p.stat().st_size for p in log_files)})
    return out


def commit_cost(path: str, commits: int) -> dict[str, Any]:
    """Milliseconds per commit through `begin` + `commit` on the big table (after the measurements)."""
    table = LakeTable.open(path)
    table.snapshot()
    head = table.commit_log.head()
    times = []
    for i in range(commits):
        def one(i: int = i) -> None:
            txn = table.begin("commit", "write", recover=False)
            lo = (head + 1 + i) * ROWS_PER_FILE
            txn.commit(added=[DataFile(path=f"dt=2099-01-01/part-{txn.instant}-0.parquet",
                                       partition={"dt": "2099-01-01"}, rows=ROWS_PER_FILE, bytes=16000,
                                       instant=txn.instant, stats={"id": ColumnStats(lo, lo + 999, 0)})])
        seconds, _ = timed(one)
        times.append(seconds)
    return {"commits": commits, "at_head": head, "median_ms": round(median(times) * 1000, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instants", type=int, default=10_000, help="commits after create (default 10000)")
    parser.add_argument("--partitions", type=int, default=100, help="distinct dt values (default 100)")
    parser.add_argument("--compact-every", type=int, default=10, help="every Nth commit compacts (default 10)")
    parser.add_argument("--checkpoint-interval", type=int, default=None,
                        help="table property checkpoint.interval (default: the table default, 100)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per case (default 5)")
    parser.add_argument("--build", choices=("direct", "txn"), default="direct",
                        help="direct: write log entries + after_commit (fast); txn: begin/commit per instant")
    parser.add_argument("--commit-probe", type=int, default=20,
                        help="finally time this many begin/commit calls on the big table (0: skip)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the table directory")
    args = parser.parse_args(argv)
    if args.instants < 2 or args.repeats < 1 or args.partitions < 1 or args.compact_every < 1:
        parser.error("--instants must be >= 2; --repeats, --partitions and --compact-every >= 1")

    machine = machine_info()
    print(f"snapshot benchmark: {args.instants} instants, {machine['nproc']} cores, load {machine['load_average']}")
    with scratch_dir("lake-bench-snapshot-", keep=args.keep) as root:
        path = str(root / "table")
        build = (build_direct if args.build == "direct" else build_txn)(path, args)
        interval = int(LakeTable.open(path).spec.float_property("checkpoint.interval"))
        print(f"built in {build.seconds:.1f} s ({args.build}): head {build.head}, {build.compactions} compactions, "
              f"{build.live_files} live files, checkpoint every {interval}")
        cases = run_cases(path, args, build.head, interval)
        parts = components(path, args.repeats)
        probe = commit_cost(path, args.commit_probe) if args.commit_probe else None

    print()
    print_table(["case", "detail", "ours s", "baseline s", "speedup", "same result"],
                [[c["case"], c["detail"], c["ours_seconds"], c["baseline_seconds"], f"{c['speedup']:.1f}x",
                  c["same_result"]] for c in cases])
    latest = cases[0]["ours_seconds"]
    verdict = "meets" if latest <= GOAL_SECONDS else "MISSES"
    print(f"\nlatest snapshot with checkpoints: {latest:.3f} s -> {verdict} the goal of <= {GOAL_SECONDS} s")
    listings = parts["log_listings_per_open_and_snapshot"]
    print(f"one log listing {parts['log_listing_seconds'] * 1000:.1f} ms x {listings} per open+snapshot; "
          f"{parts['checkpoints']} checkpoints kept, {parts['checkpoints_total_bytes'] / 1e6:.2f} MB in all; "
          f"log {parts['log_files']} files, {parts['log_total_bytes'] / 1e6:.1f} MB")
    if "checkpoint_bytes" in parts:
        print(f"newest checkpoint ({parts['checkpoint_format']}) {parts['checkpoint_bytes'] / 1e6:.3f} MB loads in "
              f"{parts['checkpoint_load_seconds'] * 1000:.1f} ms")
    if probe:
        print(f"begin+commit on the {probe['at_head']}-entry table: {probe['median_ms']} ms per commit (median)")
    write_result(args.json_out, {
        "benchmark": "snapshot", "machine": machine, "args": vars(args), "goal_seconds": GOAL_SECONDS,
        "build": asdict(build), "checkpoint_interval": interval, "cases": cases, "components": parts,
        "commit_probe": probe, "meets_goal": latest <= GOAL_SECONDS,
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
