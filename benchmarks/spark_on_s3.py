"""Part (d) of `bench_store_commits.py`: Spark's own S3 connector (S3A, with the no-rename magic committer) in the
loop. An append of `--rows` rows (one DataFrame read from a local Parquet source) to a lake table on the S3 server
(`LakeTable.open(url).write(df)`, as the runner's write does) vs the same Spark write of the same DataFrame without
the lake (`df.write.parquet("s3a://.../plain/rN")`, a fresh directory each round, so neither deletes anything), one
after the other (lake, plain, lake, plain, ...) in one local[2] session; then the table's open (here, and in a fresh
process: the parent's part (a) child) and reads of everything each side wrote (`count()`, and `sum(d)` which reads a
column; alternating, medians).

The server counts each request per client (`tests/s3_server.py`, `client_of` its User-Agent): `spark` is Hadoop's
S3A connector in the JVM (Spark's write and read of the data files), `python` is the lake's side (s3fs: its commit,
and the listing, footers and clean-up of the files its instant wrote). Keys are `data` (the data files, S3A's
`__magic_job-*` markers) or a metadata kind (`_lake/...`, the published `_delta_log/`).

This module holds the child's steps (run with the code under test first on the path) and the parent's summary.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

SCHEMA = "id BIGINT, k BIGINT, s STRING, d DOUBLE"
DATA_KINDS = ("data", "bucket")  # keys of the files; "bucket": requests on the bucket not told apart by key
READS = 3  # reads of everything written, per side and query (lake, plain, plain, lake, ...)
QUERIES = ("count", "sum")  # `count()`; `count(1), sum(d)` (reads a column)
Step = Callable[[Mapping[str, Any], Callable[[], Mapping[str, Any]]], None]


def child_steps(spec: Mapping[str, Any], step: Step) -> None:
    """In the child: start the session with the S3 connector's jars, write the source, then run each measured
    step through `step(label, measure)` (the parent counts the server's requests around each)."""
    from common import local_spark
    from pyspark.sql import functions as F

    from airflow_lake.lake import LakeTable

    scratch = Path(spec["scratch"])
    # the jars on the driver's class path, as users install them (README): `spark.jars` would copy 690 MB per run
    spark = local_spark("bench-store-commits-spark",
                        {"spark.driver.extraClassPath": spec["jars"].replace(",", os.pathsep), **spec["conf"]},
                        scratch / "warehouse")
    try:
        source = scratch / "source"
        (spark.range(0, int(spec["rows"]), numPartitions=int(spec["files"])).select(
            F.col("id"), (F.col("id") % 7).alias("k"),
            F.concat(F.lit("p-"), F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 24)).alias("s"),
            (F.rand(42) * 1000).alias("d"),
        ).write.mode("overwrite").parquet(str(source)))
        df = spark.read.parquet(str(source))
        url, plain = spec["url"], spec["plain"]
        LakeTable.create(url, {"schema": SCHEMA})
        plain_dirs: list[str] = []
        spark_writes = _time_spark_writes()

        def lake_write() -> dict[str, Any]:
            spark_writes.clear()
            started = time.perf_counter()
            entry = LakeTable.open(url).write(df)
            return {"seconds": time.perf_counter() - started, "rows": sum(f.rows for f in entry.added),
                    "files": len(entry.added), "seq": entry.seq,
                    "spark_write_s": sum(spark_writes) if spark_writes else None}

        def plain_write(n: int) -> Callable[[], dict[str, Any]]:
            def measure() -> dict[str, Any]:
                out = f"{plain}/r{n:03d}"
                started = time.perf_counter()
                df.write.parquet(out)  # mode "errorifexists": a new directory, nothing deleted
                seconds = time.perf_counter() - started
                plain_dirs.append(out)
                return {"seconds": seconds}
            return measure

        for n in range(int(spec["warmup"]) + int(spec["rounds"])):
            step({"who": "lake", "round": n}, lake_write)
            step({"who": "plain", "round": n}, plain_write(n))

        def open_table() -> dict[str, Any]:
            started = time.perf_counter()
            snapshot = LakeTable.open(url).snapshot()
            return {"seconds": time.perf_counter() - started, "seq": snapshot.seq, "files": len(snapshot.files)}

        def read(side: str, query: str) -> Callable[[], dict[str, Any]]:
            def measure() -> dict[str, Any]:
                started = time.perf_counter()
                frame = LakeTable.open(url).read(spark) if side == "lake" else spark.read.parquet(*plain_dirs)
                if query == "count":
                    rows = frame.count()
                else:  # a query that reads a column
                    rows = frame.agg(F.count(F.lit(1)).alias("n"), F.sum("d")).collect()[0]["n"]
                return {"seconds": time.perf_counter() - started, "rows": rows}
            return measure

        step({"who": "open"}, open_table)
        for query in QUERIES:
            for n in range(READS):  # who reads first alternates: the first reads of the session warm the JVM
                sides = ["lake", "plain"] if n % 2 == 0 else ["plain", "lake"]
                for side in sides:
                    step({"who": f"read-{side}", "query": query, "round": n}, read(side, query))
    finally:
        spark.stop()


def _time_spark_writes() -> list[float]:
    """Time the lake's Spark write (`file_writer._write_plain`: Spark's job that writes the files of an unbucketed
    table) inside each append, so that the rest — the lake's own work, its open, footers and commit — shows apart;
    the list gets one duration per call (left empty if the function is gone)."""
    from airflow_lake.lake.spark import file_writer

    durations: list[float] = []
    inner = getattr(file_writer, "_write_plain", None)
    if inner is None:
        return durations

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            durations.append(time.perf_counter() - started)

    file_writer._write_plain = timed
    return durations


def by_client(counts: Mapping[tuple[str, str, str], int]) -> dict[str, dict[str, dict[str, int]]]:
    """{client: {"data" | "metadata": {method: n}}} of a step's per-client counts."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (client, method, kind), n in counts.items():
        group = "data" if kind in DATA_KINDS else "metadata"
        methods = out.setdefault(client, {}).setdefault(group, {})
        methods[method] = methods.get(method, 0) + n
    return out


def mean_counts(steps: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """The per-client, per-group, per-method counts of `steps`, averaged."""
    sums: dict[str, dict[str, dict[str, float]]] = {}
    for s in steps:
        for client, groups in by_client(s["clients"]).items():
            for group, methods in groups.items():
                target = sums.setdefault(client, {}).setdefault(group, {})
                for method, n in methods.items():
                    target[method] = target.get(method, 0) + n
    return {c: {g: {m: round(n / len(steps), 2) for m, n in sorted(ms.items())} for g, ms in gs.items()}
            for c, gs in sums.items()}


def summarize(steps: Sequence[Mapping[str, Any]], spec: Mapping[str, Any], fresh_open: Mapping[str, Any]
              ) -> dict[str, Any]:
    """The part's results from the child's steps (each: label, result, per-client counts) and a fresh-process
    open; checks that every append wrote its rows, the reads saw them all, and nothing was renamed."""
    from common import median, ratio

    warmup, rows = int(spec["warmup"]), int(spec["rows"])
    writes = {who: [s for s in steps if s["label"]["who"] == who and s["label"]["round"] >= warmup]
              for who in ("lake", "plain")}
    every = [s for s in steps if s["label"]["who"] in ("lake", "plain")]
    for s in every:
        if s["label"]["who"] == "lake" and s["result"]["rows"] != rows:
            raise AssertionError(f"a lake append wrote {s['result']['rows']} rows, not {rows}")
        if not any(client == "spark" for client, _, _ in s["clients"]):
            raise AssertionError(f"{s['label']}: no request counted as Spark's (S3A's User-Agent changed? "
                                 "tests/s3_server.py client_of)")
        copies = sum(n for (_, method, _), n in s["clients"].items() if method == "COPY")
        if copies:
            raise AssertionError(f"{s['label']} renamed: {copies} COPY requests")
    opened = next(s for s in steps if s["label"]["who"] == "open")
    reads = {f"{who} {query}": [s for s in steps if s["label"]["who"] == who and s["label"]["query"] == query]
             for query in QUERIES for who in ("read-lake", "read-plain")}
    rounds = warmup + int(spec["rounds"])
    for s in [s for each in reads.values() for s in each]:
        if s["result"]["rows"] != rounds * rows:
            raise AssertionError(f"{s['label']} counted {s['result']['rows']} rows, not {rounds * rows}")
    seconds = {who: [s["result"]["seconds"] for s in writes[who]] for who in writes}
    lake_s, plain_s = median(seconds["lake"]), median(seconds["plain"])
    inner = [s["result"]["spark_write_s"] for s in writes["lake"] if s["result"].get("spark_write_s") is not None]
    own = [s["result"]["seconds"] - s["result"]["spark_write_s"] for s in writes["lake"]
           if s["result"].get("spark_write_s") is not None]
    return {
        "rows": rows, "rounds": int(spec["rounds"]), "warmup": warmup,
        "append": {"lake_s": round(lake_s, 3), "plain_s": round(plain_s, 3), "ratio": ratio(lake_s, plain_s),
                   "lake_each_s": [round(x, 3) for x in seconds["lake"]],
                   "plain_each_s": [round(x, 3) for x in seconds["plain"]],
                   "lake_spark_write_s": round(median(inner), 3) if inner else None,
                   "lake_own_s": round(median(own), 3) if own else None,
                   "files_per_append": writes["lake"][0]["result"]["files"] if writes["lake"] else 0},
        "requests_per_append": {who: mean_counts(writes[who]) for who in writes},
        "requests_per_append_total": {who: round(sum(sum(s["clients"].values()) for s in writes[who])
                                                 / max(1, len(writes[who])), 2) for who in writes},
        "open": {"in_session": {"seconds": round(opened["result"]["seconds"], 3),
                                "files": opened["result"]["files"], "requests": mean_counts([opened])},
                 "fresh_process": dict(fresh_open)},
        "read": {who: {"seconds": round(median([s["result"]["seconds"] for s in reads[who]]), 3),
                       "each_s": [round(s["result"]["seconds"], 3) for s in reads[who]],
                       "rows": reads[who][0]["result"]["rows"], "requests": mean_counts(reads[who])}
                 for who in reads},
    }


def methods_text(methods: Mapping[str, float]) -> str:
    """`PUT 12, POST 4` of {method: n}; `-` if none."""
    return ", ".join(f"{m} {n:g}" for m, n in methods.items()) or "-"


def print_results(results: Mapping[str, Any]) -> None:
    """Part (d)'s tables on stdout."""
    from common import print_table

    a = results["append"]
    print(f"\n(d) Spark's S3A connector in the loop: appends of {results['rows']:,} rows, lake vs plain Spark "
          f"(medians of {results['rounds']} rounds after {results['warmup']} warm-up, alternating)")
    print(f"append: lake {a['lake_s']:.3f} s, plain {a['plain_s']:.3f} s, ratio {a['ratio']:.3f}; "
          f"lake {a['lake_each_s']}, plain {a['plain_each_s']}")
    print(f"inside the lake's append: Spark's write {a['lake_spark_write_s']} s, the rest (open, checks, footers, "
          f"commit) {a['lake_own_s']} s (medians)")
    rows = []
    for who, clients in results["requests_per_append"].items():
        for client in sorted(clients):
            for group in ("data", "metadata"):
                methods = clients[client].get(group, {})
                if methods:
                    rows.append([who, client, group, round(sum(methods.values()), 2), methods_text(methods)])
    print_table(["append", "client", "keys", "requests", "per method"], rows)
    print(f"total per append: {results['requests_per_append_total']}")
    o = results["open"]
    rows = [["open, in the session", o["in_session"]["seconds"], methods_text(
        {f"{c} {g} {m}": n for c, gs in o["in_session"]["requests"].items() for g, ms in gs.items()
         for m, n in ms.items()})],
        ["open, fresh process", o["fresh_process"]["seconds"], methods_text(o["fresh_process"]["by_kind"])]]
    for who, read in results["read"].items():
        rows.append([f"{who} ({read['rows']:,} rows)", read["seconds"], methods_text(
            {f"{c} {g} {m}": n for c, gs in read["requests"].items() for g, ms in gs.items() for m, n in ms.items()})])
    print_table(["", "seconds", "requests"], rows)
