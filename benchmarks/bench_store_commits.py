"""Benchmark: what a table on S3 costs in requests — (a) per open (a fresh process: `LakeTable.open(url).snapshot()`)
of tables of `--sizes` commits (1,000 and 10,000 by default; 100,000 if asked), (b) per commit (append; replace),
per kind and method — (c) commits per second with 16 racing writers (threads of one process, each with its own
`LakeTable`) on the S3 server vs the same on local disk, checking that the log holds every writer's commits once —
and (d) with Spark's S3 connector in the loop (`spark_on_s3.py`): appends of `--spark-rows` rows (1M) to an S3 table
through S3A vs the same Spark write of the same DataFrame without the lake, alternating in one local[2] session,
their times (medians, ratio) and requests split by client (Spark's connector vs the lake's Python side) and by data
vs metadata keys; the open of the table Spark wrote; reads of what each side wrote. (d) needs the connector's jars
(`airflow-lake jars s3`, fetched once per machine) and runs only the code under test.

The S3 server is moto's, started here as the tests start it (`tests/s3_server.py`: imported from the tests, its
`serve()`; conditional PUTs made atomic, every request counted per method and kind of key). It runs in this process;
every measurement runs in a child process (the code under test first on its PYTHONPATH), which sets up, says READY,
and measures when told to: the server's counts between the two are what the measurement cost. Tables are built
without Spark (data files only described): (a) as `bench_log_open.py` builds its table (a checkpoint every 100
entries, `--tail` entries after the last one), written on local disk and then copied key by key to the server;
(b) and (c) by commits through the transaction API, on tables with the default properties.

`--before DIR` runs every measurement also with the `airflow_lake` package in DIR (e.g. `git archive 96aa73b
airflow_lake | tar -x -C DIR`, the code before these request savings), alternately with this code.

    .venv/bin/python benchmarks/bench_store_commits.py --json-out /tmp/bench_store_commits.json   # ~3 min
    mkdir -p /tmp/before-store && git archive 96aa73b airflow_lake | tar -x -C /tmp/before-store
    .venv/bin/python benchmarks/bench_store_commits.py --before /tmp/before-store --json-out /tmp/bsc.json
    .venv/bin/python benchmarks/bench_store_commits.py --sizes 1000,10000,100000 --rounds 40   # + 100k (long build)
    .venv/bin/python benchmarks/bench_store_commits.py --parts spark --json-out /tmp/bsc-spark.json  # (d) alone, ~1 min
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent


# -- the child: runs with the code under test first on its path --------------------------------------------------


def step(label: Mapping[str, Any], measure: Callable[[], Mapping[str, Any]]) -> None:
    """One measured step of a child: say READY (with what it is), wait for a line on stdin, measure, print the
    result; the parent counts the server's requests from its GO to the result."""
    print(f"READY {json.dumps(label)}", flush=True)
    sys.stdin.readline()
    print(f"RESULT {json.dumps(measure())}", flush=True)


def child(spec: Mapping[str, Any]) -> None:
    """Set up, then measure in steps (`step`)."""
    import airflow_lake
    from airflow_lake.lake import LakeTable
    from airflow_lake.lake.format.data_files import DataFile

    if not airflow_lake.__file__.startswith(spec["tree"]):
        raise SystemExit(f"imported {airflow_lake.__file__}, not the code in {spec['tree']}")

    def data_file(instant: str, day: str, n: int) -> DataFile:
        return DataFile(f"dt={day}/part-{instant}-{n:05d}.parquet", {"dt": day}, 10, 1000, instant=instant)

    def append(table: Any, day: str, request_id: str | None = None) -> Any:
        txn = table.begin("commit", "write", request_id=request_id)
        return txn.commit(added=[data_file(txn.instant, day, 0)])

    mode, url = spec["mode"], spec["url"]
    measure: Any
    if mode == "spark":
        from spark_on_s3 import child_steps

        child_steps(spec, step)
        return
    if mode == "open":
        def measure() -> dict[str, Any]:
            started = time.perf_counter()
            snapshot = LakeTable.open(url).snapshot()
            return {"seconds": time.perf_counter() - started, "seq": snapshot.seq, "files": len(snapshot.files)}
    elif mode == "commits":
        table = LakeTable.open(url)
        n, kind = int(spec["n"]), spec["kind"]
        for i in range(int(spec["warm"]) + (n if kind == "replace" else 0)):
            append(table, f"d{i % 7}")
        victims = sorted(f.path for f in table.snapshot().files)[:n]

        def measure() -> dict[str, Any]:
            started = time.perf_counter()
            for i in range(n):
                if kind == "append":
                    append(table, f"d{i % 7}")
                else:
                    txn = table.begin("replace", "cluster")
                    txn.commit(added=[data_file(txn.instant, "d0", 0)], removed=[victims[i]], reads=[victims[i]])
            return {"seconds": time.perf_counter() - started, "commits": n}
    elif mode == "race":
        writers, rounds, limit = int(spec["writers"]), int(spec["rounds"]), float(spec["seconds"])

        def measure() -> dict[str, Any]:
            committed: list[list[str]] = [[] for _ in range(writers)]
            errors: list[str] = []
            start = threading.Barrier(writers)
            deadline: list[float] = []

            def writer(i: int) -> None:
                table = LakeTable(url)  # its own table, storage and client
                start.wait()
                try:
                    for n in range(rounds):
                        if time.perf_counter() > deadline[0]:
                            break
                        request_id = f"race-w{i:02d}-{n:03d}"
                        append(table, f"d{i % 7}", request_id)
                        committed[i].append(request_id)
                except BaseException as err:  # reported: the parent fails the run
                    errors.append(f"writer {i}: {type(err).__name__}: {err}")

            started = time.perf_counter()
            deadline.append(started + limit)
            threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return {"seconds": time.perf_counter() - started, "committed": committed, "errors": errors}
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    step({"mode": mode}, measure)


# -- the parent --------------------------------------------------------------------------------------------------


def run_steps(tree: Path, spec: dict[str, Any], server: Any, timeout: float = 3600) -> list[dict[str, Any]]:
    """The steps of a child in a fresh process with the code in `tree`: each step's label, result, and the
    requests it cost per (method, kind) (`counts`) and per (client, method, kind) (`clients`)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child",
                                 json.dumps({**spec, "tree": str(tree)})], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errors, text=True, cwd=str(tree), env=env)
        assert proc.stdin is not None and proc.stdout is not None

        def next_line(prefix: str) -> str | None:
            """The rest of the child's next line that starts with `prefix` (others are skipped); None at EOF."""
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            return None

        try:
            while (label := next_line("READY ")) is not None:
                mark, clients = server.counter.mark(), server.counter.mark_clients()
                proc.stdin.write("GO\n")
                proc.stdin.flush()
                result = next_line("RESULT ")
                if result is None:
                    break
                steps.append({"label": json.loads(label), "result": json.loads(result),
                              "counts": server.counter.since(mark), "clients": server.counter.since_clients(clients)})
            proc.wait(timeout=timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            errors.seek(0)
            print(errors.read()[-3000:], file=sys.stderr)
            raise
        if proc.returncode != 0 or not steps:
            errors.seek(0)
            raise RuntimeError(f"the child ({spec['mode']}, {tree}) failed:\n{errors.read()[-3000:]}")
    return steps


def run_child(tree: Path, spec: dict[str, Any], server: Any, timeout: float = 3600) -> tuple[dict[str, Any],
                                                                                          dict[str, int]]:
    """One measurement in a fresh process with the code in `tree`: its result and the requests it cost."""
    measured = run_steps(tree, spec, server, timeout)[0]
    return measured["result"], {f"{method} {kind}": n for (method, kind), n in sorted(measured["counts"].items())}


def per_commit(counts: Mapping[str, int], commits: int) -> dict[str, float]:
    return {key: round(n / commits, 2) for key, n in counts.items()}


def total(counts: Mapping[str, float]) -> float:
    return round(sum(counts.values()), 2)


def lists(counts: Mapping[str, float]) -> float:
    return round(sum(n for key, n in counts.items() if key.startswith("LIST ")), 2)


def upload(server: Any, local_root: Path, prefix: str) -> int:
    """Copy the table's metadata (`_lake/`) under `local_root` to s3://bucket/prefix/, key by key."""
    files = [p for p in (local_root / "_lake").rglob("*") if p.is_file()]

    def put(path: Path) -> None:
        key = f"{prefix}/{path.relative_to(local_root).as_posix()}"
        server.client.put_object(Bucket=server.bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))
    return len(files)


def verify_race(url: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The log holds every writer's commits once, without a gap, and nothing else (bar the table's creation and
    the checkpoints' work, which writes no entry); every file committed is live."""
    from airflow_lake.lake import LakeTable

    if result["errors"]:
        raise AssertionError(f"writers failed: {result['errors'][:3]}")
    table = LakeTable.open(url)
    head = table.commit_log.head()
    entries = list(table.commit_log.entries(0))
    expected = collections.Counter(rid for ids in result["committed"] for rid in ids)
    logged = collections.Counter(e.request_id for e in entries)
    if [e.seq for e in entries] != list(range(1, head + 1)):
        raise AssertionError("the log has a gap")
    if logged != expected or max(logged.values(), default=1) != 1:
        raise AssertionError(f"the log does not hold every commit once: {len(logged)} ids logged, "
                             f"{len(expected)} committed")
    if len(table.snapshot().files) != len(entries):
        raise AssertionError("a committed file is not live")
    return {"entries": len(entries), "every_commit_once": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1000,10000", help="commits of the tables opened (default 1000,10000)")
    parser.add_argument("--tail", type=int, default=10, help="entries after the last checkpoint (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per open (default 3)")
    parser.add_argument("--commits", type=int, default=20, help="commits measured per kind (default 20)")
    parser.add_argument("--writers", type=int, default=16, help="racing writers (default 16)")
    parser.add_argument("--rounds", type=int, default=20, help="commits per racing writer (default 20) ...")
    parser.add_argument("--seconds", type=float, default=60, help="... or until this many seconds (default 60)")
    parser.add_argument("--spark-rows", type=int, default=1_000_000, help="rows per Spark append (default 1M)")
    parser.add_argument("--spark-rounds", type=int, default=5,
                        help="Spark appends measured per side, alternating (default 5, after 1 warm-up)")
    parser.add_argument("--parts", default="open,commits,race,spark",
                        help="which parts to run: open,commits,race,spark (default all; spark: Spark's S3 connector "
                             "in the loop, needs `airflow-lake jars s3`)")
    parser.add_argument("--before", default=None, help="a directory holding an older airflow_lake to compare with")
    parser.add_argument("--json-out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.child is not None:
        child(json.loads(args.child))
        return 0

    sys.path.insert(0, str(BENCH_DIR))
    from common import REPO, machine_info, median, print_table, scratch_dir, write_result

    sys.path.insert(0, str(REPO))
    from bench_log_open import build

    from airflow_lake.lake import LakeTable
    from tests.s3_server import serve
    from tests.store_spark import fetched, s3a_conf

    parts = {p for p in args.parts.split(",") if p}
    if parts - {"open", "commits", "race", "spark"}:
        parser.error(f"--parts: unknown {sorted(parts - {'open', 'commits', 'race', 'spark'})}")
    jars = ""
    if "spark" in parts:
        found, why = fetched("s3")
        if found is None:
            raise SystemExit(f"the Spark part needs S3's connector jars (`airflow-lake jars s3`): {why}")
        jars = found
    trees = {"after": REPO, **({"before": Path(args.before).resolve()} if args.before else {})}
    machine = machine_info()
    print(f"store commits benchmark: {machine['nproc']} cores, load {machine['load_average']}, codes {list(trees)}, "
          f"parts {sorted(parts)}")
    results: dict[str, Any] = {"open": [], "commits": [], "race": []}
    schema = {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]}
    with serve() as server, scratch_dir("bench-store-commits-") as scratch:
        # (a) open + latest snapshot, fresh process
        for size in [int(s) for s in args.sizes.split(",") if s and "open" in parts]:
            started = time.perf_counter()
            local = scratch / f"open-{size}"
            facts = build(local, size + args.tail)
            prefix = f"open-{size}"
            keys = upload(server, local, prefix)
            print(f"built and uploaded a table of {size + args.tail:,} commits ({keys:,} keys) in "
                  f"{time.perf_counter() - started:.0f} s")
            url = f"{server.url}/{prefix}"
            for name, tree in trees.items():
                runs = [run_child(tree, {"mode": "open", "url": url}, server) for _ in range(args.repeats)]
                for result, _ in runs:
                    if result["seq"] != size + args.tail or result["files"] != facts["live_files"]:
                        raise AssertionError(f"{name} resolved {result}, not {size + args.tail}")
                counts = runs[-1][1]
                results["open"].append({"commits": size + args.tail, "code": name, "requests": total(counts),
                                        "by_kind": counts, "seconds": median([r["seconds"] for r, _ in runs]),
                                        "every_run": [c for _, c in runs]})
        # (b) requests per commit
        for kind in ("append", "replace") if "commits" in parts else ():
            for name, tree in trees.items():
                url = f"{server.url}/commits-{kind}-{name}"
                LakeTable.create(url, schema)
                result, counts = run_child(tree, {"mode": "commits", "url": url, "kind": kind, "n": args.commits,
                                                  "warm": 3}, server)
                each = per_commit(counts, args.commits)
                results["commits"].append({"kind": kind, "code": name, "requests": total(each), "lists": lists(each),
                                           "by_kind": each, "commit_ms": 1000 * result["seconds"] / args.commits})
        # (c) racing writers, S3 vs local disk
        for store in ("s3", "local") if "race" in parts else ():
            for name, tree in trees.items():
                url = f"{server.url}/race-{name}" if store == "s3" else str(scratch / f"race-{name}")
                LakeTable.create(url, schema)
                result, counts = run_child(tree, {"mode": "race", "url": url, "writers": args.writers,
                                                  "rounds": args.rounds, "seconds": args.seconds}, server)
                checked = verify_race(url, result)
                commits = sum(len(ids) for ids in result["committed"])
                row: dict[str, Any] = {"store": store, "code": name, "writers": args.writers, "commits": commits,
                                       "seconds": round(result["seconds"], 2),
                                       "commits_per_second": round(commits / result["seconds"], 2), **checked}
                if store == "s3":
                    row["requests_per_commit"] = round(sum(counts.values()) / commits, 1)
                    row["by_kind"] = per_commit(counts, commits)
                results["race"].append(row)
        # (d) Spark's S3A connector in the loop (the code under test only: `--before` is for the parts above)
        if "spark" in parts:
            from spark_on_s3 import summarize

            spec = {"mode": "spark", "url": f"{server.url}/spark-lake", "plain": f"s3a://{server.bucket}/spark-plain",
                    "rows": args.spark_rows, "files": 2, "rounds": args.spark_rounds, "warmup": 1,
                    "jars": jars, "conf": s3a_conf(server), "scratch": str(scratch / "spark")}
            started = time.perf_counter()
            steps = run_steps(REPO, spec, server)
            fresh, counts = run_child(REPO, {"mode": "open", "url": spec["url"]}, server)
            results["spark"] = summarize(steps, spec, {"seconds": round(fresh["seconds"], 3),
                                                       "files": fresh["files"], "by_kind": counts})
            results["spark"]["wall_s"] = round(time.perf_counter() - started, 1)
            results["spark"]["steps"] = [{**s, "counts": {f"{m} {k}": n for (m, k), n in sorted(s["counts"].items())},
                                          "clients": {" ".join(key): n for key, n in sorted(s["clients"].items())}}
                                         for s in steps]

    if results["open"]:
        print("\n(a) open + latest snapshot in a fresh process (requests on S3)")
        print_table(["commits", "code", "requests", "ms", "per kind"],
                    [[r["commits"], r["code"], r["requests"], round(r["seconds"] * 1000), _kinds(r["by_kind"])]
                     for r in results["open"]])
    if results["commits"]:
        print(f"\n(b) requests per commit on S3 (mean of {args.commits})")
        print_table(["commit", "code", "requests", "LISTs", "ms", "per kind"],
                    [[r["kind"], r["code"], r["requests"], r["lists"], round(r["commit_ms"]), _kinds(r["by_kind"])]
                     for r in results["commits"]])
    if results["race"]:
        print(f"\n(c) {args.writers} racing writers, {args.rounds} commits each or {args.seconds:g} s")
        print_table(["store", "code", "commits", "seconds", "commits/s", "requests/commit", "log checked"],
                    [[r["store"], r["code"], r["commits"], r["seconds"], r["commits_per_second"],
                      r.get("requests_per_commit", "-"), "every commit once"] for r in results["race"]])
    if "spark" in results:
        from spark_on_s3 import print_results

        print_results(results["spark"])
    write_result(args.json_out, {"benchmark": "store_commits", "machine": machine, "args": vars(args),
                                 "results": results, "load_average_end": [round(x, 2) for x in os.getloadavg()]})
    return 0


def _kinds(counts: Mapping[str, float]) -> str:
    return ", ".join(f"{key} {value:g}" for key, value in counts.items())


if __name__ == "__main__":
    sys.exit(main())
