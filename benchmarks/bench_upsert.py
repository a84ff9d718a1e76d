"""Benchmark: versioned upserts on the BDCI shape (seed 003) — parallel vs sequential, vs delta-rs MERGE, and the
merged read vs a plain Spark union + group-by.

Data: `airflow_lake.datagen.bdci` — base-0 with 5 x `--rows` rows, base-1..10 with `--rows` each, uuids drawn from
2 x `--rows` keys (they repeat within and across files). Everything runs in one process on one local[2]
SparkSession; each measured run starts from a fresh, empty lake table (16 buckets on uuid).

(a) upserts   the 11 files as versions 0..10 in a shuffled order (fixed seed), `versioned_upsert` each:
              sequential (one after the other) vs parallel (`--threads` at once on the same session).
(b) total     ours: the parallel upserts + the merged read written to Parquet; delta-rs (`deltalake`, other
              engine): base-0 written as a Delta table, then 10 sequential MERGEs of base-1..10 (`requests`
              summed, `name` kept when the new one is "null", other columns replaced). Delta's MERGE refuses
              duplicate source keys, so each batch is first combined per uuid with pandas (timed apart). At
              every `--scales` factor of `--rows`, to show how both grow.
(a') submit   with `--submit N`: the same 11 upserts as Airflow tasks run them — one `spark-submit` of the
              `versioned_upsert` job per batch (what `VersionedUpsertOperator` does; local[2] each) — N at once
              vs one after the other (at the first scale only).
(c) read      ours: `LakeTable.read` (merge per key over the bucketed files, no Exchange) written to Parquet;
              baseline: plain Spark over the same 11 source files — union with the version and
              `_metadata.row_index`, group by uuid with max_by / sum, written to Parquet.
(d) one-shot  with `--one-shot` (only this measure runs): ours, the 11 upserts one after the other + the merged
              read written to Parquet (the whole BDCI task), vs the one-shot plain Spark job of (c) that reads
              all eleven files once, merges them by key in version order and writes the result (goal: <= 1.3x).
              The upserts go through `LakeHook.submit`, as a VersionedUpsertOperator task makes them: small
              Parquet sources are upserted in the task's own process with pyarrow (no Spark); (d') the same
              upserts on Spark (`versioned_upsert` on the warm session: a query source, or
              in_process_max_bytes=0). They alternate within each round (which one goes first too); the Spark
              jobs each upsert launches are counted (`statusTracker`).

All results are checked equal (ours sequential = parallel = the Spark baseline = delta-rs) by a hash of the rows.

    .venv/bin/python benchmarks/bench_upsert.py --out /tmp/bench_upsert.md                 # 2M + 10 x 400k rows
    .venv/bin/python benchmarks/bench_upsert.py --rows 20000 --rounds 1 --scales 1 --skip-delta   # smoke run
    .venv/bin/python benchmarks/bench_upsert.py --one-shot --rows 100000 --scales 1 --rounds 2     # (d), 1.5M rows
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from bdci_oracle import VALUE_COLUMNS, digest, spark_baseline
from common import local_spark, machine_info, median, progress, ratio, timed

from airflow_lake.datagen import bdci
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.upsert import versioned_upsert


def upsert_all(spark: Any, path: Path, files: list[Path], order: list[int], threads: int) -> LakeTable:
    table = LakeTable.create(str(path), bdci.table_spec(16))

    def one(version: int) -> None:
        versioned_upsert(table, spark.read.parquet(str(files[version])), version=version)

    if threads <= 1:
        for version in order:
            one(version)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, order))
    return table


def one_shot_round(spark: Any, files: list[Path], order: list[int], run_dir: Path, ours_first: bool
                   ) -> dict[str, float]:
    """(d): ours (sequential upserts, then the merged read -> Parquet) and the one-shot Spark baseline, in the
    order given; seconds of each part, and the Spark jobs the upserts launched (per upsert)."""
    tracker = spark.sparkContext.statusTracker()  # (a benchmark may; the core talks to Spark through SQL only)

    def last_job() -> int:
        return max(tracker.getJobIdsForGroup(), default=-1)

    out: dict[str, float] = {}

    def ours() -> None:  # the upserts as a VersionedUpsertOperator task runs them: in its process, without Spark
        jobs = last_job()
        out["upserts"], table = timed(partial(upsert_in_task, run_dir / "task", files, order))
        out["jobs"] = (last_job() - jobs) / len(order)
        out["read"], _ = timed(partial(table.read(spark).write.parquet, str(run_dir / "ours.parquet")))
        out["ours"] = out["upserts"] + out["read"]

    def on_spark() -> None:  # the same upserts on Spark (a query source, or in_process_max_bytes=0), warm session
        out["spark_upserts"], table = timed(partial(upsert_all, spark, run_dir / "seq", files, order, 1))
        out["spark_read"], _ = timed(partial(table.read(spark).write.parquet, str(run_dir / "ours-spark.parquet")))
        out["ours_spark"] = out["spark_upserts"] + out["spark_read"]

    def baseline() -> None:
        out["base"], _ = timed(partial(spark_baseline, spark, files, run_dir / "spark.parquet"))

    for step in ((ours, baseline, on_spark) if ours_first else (baseline, ours, on_spark)):
        step()
    return out


def upsert_in_task(path: Path, files: list[Path], order: list[int]) -> LakeTable:
    """The 11 upserts one after the other through `LakeHook.submit`, the call a VersionedUpsertOperator task makes:
    a small Parquet source is upserted with pyarrow in the task's own process (checked: no Spark)."""
    from airflow_lake.hooks.lake import LakeHook

    table = LakeTable.create(str(path), bdci.table_spec(16))
    hook = LakeHook()
    for version in order:
        done = hook.submit("versioned_upsert", {"table": str(path), "source": {"path": str(files[version])},
                                                "version": version})
        if done.get("spark") is not False:
            raise SystemExit(f"the upsert of version {version} ran on Spark: {done}")
    return table


def submit_all(path: Path, files: list[Path], order: list[int], at_once: int) -> None:
    """Each upsert as its own spark-submit of the job runner, `at_once` running at a time."""
    import json
    import subprocess

    from airflow_lake.jobs import ENTRY_POINT

    LakeTable.create(str(path), bdci.table_spec(16))
    submit = str(Path(sys.executable).with_name("spark-submit"))

    def one(version: int) -> None:
        spec = {"table": str(path), "source": {"path": str(files[version])}, "version": version}
        subprocess.run([submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false", ENTRY_POINT,
                        "versioned_upsert", "--spec", json.dumps(spec)], check=True, capture_output=True)

    with ThreadPoolExecutor(at_once) as pool:
        list(pool.map(one, order))


def combine(frame: pd.DataFrame) -> pd.DataFrame:
    """A batch with one row per uuid (Delta's MERGE refuses duplicate source keys): the BDCI rules in row order."""
    last = frame.drop_duplicates("uuid", keep="last").set_index("uuid")
    last["requests"] = frame.groupby("uuid")["requests"].sum()
    good = frame[frame["name"].notna() & (frame["name"] != "null")].drop_duplicates("uuid", keep="last")
    named = good.set_index("uuid")["name"]
    last["name"] = named.reindex(last.index).fillna(last["name"])
    return last.reset_index()[["uuid", *VALUE_COLUMNS]]


def delta_rs(files: list[Path], path: Path) -> tuple[float, float, pd.DataFrame]:
    """(seconds to combine the batches, seconds for the base write + 10 MERGEs, the final table)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    combine_seconds, batches = timed(lambda: [pa.Table.from_pandas(combine(pd.read_parquet(p)), preserve_index=False)
                                              for p in files])
    updates = {c: f"s.{c}" for c in VALUE_COLUMNS}
    updates["requests"] = "t.requests + s.requests"
    updates["name"] = "CASE WHEN s.name IS NULL OR s.name = 'null' THEN t.name ELSE s.name END"

    def run() -> None:
        write_deltalake(str(path), batches[0])
        for batch in batches[1:]:
            (DeltaTable(str(path)).merge(source=batch, predicate="t.uuid = s.uuid", source_alias="s",
                                         target_alias="t")
             .when_matched_update(updates=updates).when_not_matched_insert_all().execute())

    seconds, _ = timed(run)
    return combine_seconds, seconds, DeltaTable(str(path)).to_pandas()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400_000, help="rows of each of base-1..10 (base-0: 5x)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=11, help="parallel upserts at once (default: all 11)")
    parser.add_argument("--scales", default="0.25,1", help="factors of --rows for (b)'s growth, e.g. 0.25,1")
    parser.add_argument("--skip-delta", action="store_true")
    parser.add_argument("--submit", type=int, default=0, metavar="N",
                        help="also time the upserts as spark-submits, N at once vs in sequence (first scale)")
    parser.add_argument("--one-shot", action="store_true",
                        help="only (d): sequential upserts + merged read vs the one-shot Spark job, alternating")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lake-bench-upsert"))
    parser.add_argument("--out", default=None, help="also write the markdown report here")
    args = parser.parse_args(argv)
    scales = sorted({float(s) for s in args.scales.split(",")})
    work = Path(args.work) / f"run-{int(time.time())}"
    work.mkdir(parents=True)
    info = machine_info()
    command = " ".join(["benchmarks/bench_upsert.py", *(argv if argv is not None else sys.argv[1:])])
    spark = local_spark("bench-upsert", {**DEFAULT_CONF}, work / "warehouse")
    lines = [f"# Upsert benchmark (BDCI shape)\n\n- command: `.venv/bin/python {command}`",
             f"- date: {info['date']}; machine: {info['nproc']} cores, {info['memory']}, load {info['load_average']}",
             f"- code: git {info['git_revision']}; versions {info['versions']}", ""]
    try:
        order = list(range(bdci.FILES))
        random.Random(3).shuffle(order)
        for scale in scales:
            rows = max(100, int(args.rows * scale))
            files = bdci.generate(work / f"src-{rows}", rows)
            total_rows = rows * (bdci.BASE_FACTOR + bdci.FILES - 1)
            progress(f"scale {scale}: {total_rows} rows in 11 files, order {order}")
            results: dict[str, list[float]] = {k: [] for k in ("seq", "par", "read", "base", "delta", "combine")}
            digests: set[tuple[int, int]] = set()
            # one untimed warm-up of every Spark path on the first file
            warm = upsert_all(spark, work / "warm", files[:2], [1, 0], 1)
            warm.read(spark).write.format("noop").mode("overwrite").save()
            shutil.rmtree(work / "warm")
            if args.one_shot:
                spark_baseline(spark, files[:2], work / "warm-spark")
                shutil.rmtree(work / "warm-spark")
                lines += _one_shot(spark, files, order, work / f"s{rows}", rounds=args.rounds, total_rows=total_rows,
                                   rows=rows)
                continue
            for rnd in range(args.rounds):
                run_dir = work / f"s{rows}-r{rnd}"
                seq, _ = timed(partial(upsert_all, spark, run_dir / "seq", files, order, 1))
                par, table = timed(partial(upsert_all, spark, run_dir / "par", files, order, args.threads))
                read, _ = timed(partial(table.read(spark).write.parquet, str(run_dir / "ours.parquet")))
                base, _ = timed(partial(spark_baseline, spark, files, run_dir / "spark.parquet"))
                for name, value in (("seq", seq), ("par", par), ("read", read), ("base", base)):
                    results[name].append(value)
                digests |= {digest(spark, run_dir / "ours.parquet"), digest(spark, run_dir / "spark.parquet")}
                seq_table = LakeTable.open(str(run_dir / "seq"))
                seq_table.read(spark).write.parquet(str(run_dir / "seq.parquet"))
                digests.add(digest(spark, run_dir / "seq.parquet"))
                if not args.skip_delta:
                    comb, delta, final = delta_rs(files, run_dir / "delta")
                    results["combine"].append(comb)
                    results["delta"].append(delta)
                    spark.createDataFrame(final).write.parquet(str(run_dir / "delta.parquet"))
                    digests.add(digest(spark, run_dir / "delta.parquet"))
                progress(f"  round {rnd + 1}: sequential {seq:.2f} s, parallel {par:.2f} s, merged read {read:.2f} s, "
                         f"spark baseline {base:.2f} s" + ("" if args.skip_delta else
                                                         f", delta-rs {delta:.2f} s (+ combine {comb:.2f} s)"))
                shutil.rmtree(run_dir, ignore_errors=True)
            submits: dict[str, list[float]] = {"one": [], "many": []}
            if args.submit and scale == scales[0]:
                for rnd in range(args.rounds):
                    run_dir = work / f"submit-{rows}-r{rnd}"
                    one, _ = timed(partial(submit_all, run_dir / "one", files, order, 1))
                    many, _ = timed(partial(submit_all, run_dir / "many", files, order, args.submit))
                    submits["one"].append(one)
                    submits["many"].append(many)
                    for name in ("one", "many"):
                        LakeTable.open(str(run_dir / name)).read(spark).write.parquet(str(run_dir / f"{name}.parquet"))
                        digests.add(digest(spark, run_dir / f"{name}.parquet"))
                    progress(f"  spark-submit round {rnd + 1}: one at a time {one:.2f} s, {args.submit} at once "
                             f"{many:.2f} s")
                    shutil.rmtree(run_dir, ignore_errors=True)
            if len(digests) != 1:
                raise SystemExit(f"results differ between the ways: {digests}")
            m = {k: median(v) for k, v in results.items() if v}
            ours_total = m["par"] + m["read"]
            lines += [f"## {total_rows:,} rows (base-0 {rows * bdci.BASE_FACTOR:,} + 10 x {rows:,}), "
                      f"{args.rounds} round(s); every way gives the same {digests.pop()[0]:,} rows", "",
                      "| measure | median s | runs s | ratio | goal |", "|---|---|---|---|---|",
                      f"| (a) 11 upserts, sequential | {m['seq']:.2f} | {_runs(results['seq'])} | 1.00 | |",
                      f"| (a) 11 upserts, {args.threads} at once | {m['par']:.2f} | {_runs(results['par'])} | "
                      f"{ratio(m['par'], m['seq']):.2f} of sequential | <= 0.7 |",
                      *([f"| (a') 11 upserts as spark-submits, one at a time | {median(submits['one']):.2f} | "
                         f"{_runs(submits['one'])} | 1.00 | |",
                         f"| (a') 11 upserts as spark-submits, {args.submit} at once | {median(submits['many']):.2f} | "
                         f"{_runs(submits['many'])} | {ratio(median(submits['many']), median(submits['one'])):.2f} "
                         "of one at a time | <= 0.7 |"] if submits["one"] else []),
                      f"| (c) merged read -> Parquet | {m['read']:.2f} | {_runs(results['read'])} | "
                      f"{ratio(m['read'], m['base']):.2f} of the Spark union + group-by | |",
                      f"| (c) Spark union + group-by -> Parquet | {m['base']:.2f} | {_runs(results['base'])} "
                      "| 1.00 | |",
                      f"| (b) ours: parallel upserts + merged read | {ours_total:.2f} | | "
                      + (f"{ratio(ours_total, m['delta']):.2f} of delta-rs | <= 0.5 |" if "delta" in m else "| |")]
            if "delta" in m:
                lines += [f"| (b) delta-rs: base write + 10 MERGEs | {m['delta']:.2f} | {_runs(results['delta'])} | "
                          "1.00 | |",
                          f"| (b) delta-rs: combining the batches per key (pandas, apart) | {m['combine']:.2f} | "
                          f"{_runs(results['combine'])} | | |"]
            lines.append("")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")
        progress(f"wrote {args.out}")
    return 0


def _one_shot(spark: Any, files: list[Path], order: list[int], work: Path, *, rounds: int, total_rows: int,
              rows: int) -> list[str]:
    """(d) at one scale: `rounds` rounds, ours and the baseline alternating; the report's lines."""
    results: dict[str, list[float]] = {k: [] for k in ("upserts", "read", "ours", "base", "jobs", "spark_upserts",
                                                       "spark_read", "ours_spark")}
    digests: set[tuple[int, int]] = set()
    for rnd in range(rounds):
        run_dir = work / f"r{rnd}"
        out = one_shot_round(spark, files, order, run_dir, ours_first=rnd % 2 == 0)
        for name, value in out.items():
            results[name].append(value)
        digests |= {digest(spark, run_dir / name) for name in ("ours.parquet", "ours-spark.parquet", "spark.parquet")}
        progress(f"  round {rnd + 1}: ours {out['ours']:.2f} s (upserts {out['upserts']:.2f} s, {out['jobs']:.1f} "
                 f"Spark jobs each; merged read {out['read']:.2f} s), one-shot Spark {out['base']:.2f} s: "
                 f"{ratio(out['ours'], out['base']):.2f}x; upserts on Spark {out['ours_spark']:.2f} s: "
                 f"{ratio(out['ours_spark'], out['base']):.2f}x; load {os.getloadavg()[0]:.1f}")
        shutil.rmtree(run_dir, ignore_errors=True)
    if len(digests) != 1:
        raise SystemExit(f"results differ between the ways: {digests}")
    m = {k: median(v) for k, v in results.items()}
    ratios = [ratio(o, b) for o, b in zip(results["ours"], results["base"], strict=True)]
    return [f"## (d) {total_rows:,} rows (base-0 {rows * bdci.BASE_FACTOR:,} + 10 x {rows:,}), {rounds} round(s), "
            f"alternating; both give the same {digests.pop()[0]:,} rows", "",
            "| measure | median s | runs s | ratio | goal |", "|---|---|---|---|---|",
            f"| (d) ours: 11 upserts one after the other (as tasks run them: in-process, no Spark) + merged read "
            f"-> Parquet | {m['ours']:.2f} | {_runs(results['ours'])} | {ratio(m['ours'], m['base']):.2f} (per round: "
            f"{_runs(ratios)}) | <= 1.3 |",
            f"| (d) of which the 11 upserts ({m['jobs']:.1f} Spark jobs each) | {m['upserts']:.2f} | "
            f"{_runs(results['upserts'])} | {ratio(m['upserts'], m['base']):.2f} | |",
            f"| (d) of which the merged read -> Parquet | {m['read']:.2f} | {_runs(results['read'])} | "
            f"{ratio(m['read'], m['base']):.2f} | |",
            f"| (d') ours with the 11 upserts on Spark (warm session) + merged read | {m['ours_spark']:.2f} | "
            f"{_runs(results['ours_spark'])} | {ratio(m['ours_spark'], m['base']):.2f} | |",
            f"| (d') of which the 11 upserts on Spark | {m['spark_upserts']:.2f} | {_runs(results['spark_upserts'])} "
            f"| {ratio(m['spark_upserts'], m['base']):.2f} | |",
            f"| (d) plain Spark one-shot: read the 11 files, merge by key, write | {m['base']:.2f} | "
            f"{_runs(results['base'])} | 1.00 | |", ""]


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    raise SystemExit(main())
