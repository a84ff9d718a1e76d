"""The Spark 3.5 share of bench_peers.py: Hudi, with plain Spark 3.5 beside it for its "/ plain Spark" ratios.

Hudi publishes no bundle for Spark 4 on Maven Central (hudi-spark4.0-bundle_2.13 / hudi-spark4-bundle_2.13: 404),
so it runs on Spark 3.5 with `org.apache.hudi:hudi-spark3.5-bundle_2.12` (peers_setup.sh pins it and makes the pyspark
3.5 venv). Our package needs pyspark >= 4.1 and is not in that venv: this module imports the standard library,
pyspark and `common` (standard library only) — nothing of airflow_lake, bench_clustering or bench_upsert. bench_peers
runs it as `<venv 3.5>/bin/python benchmarks/peers_spark35.py SPEC.json` with a spec of paths it prepared (the
clustering input files, the BDCI batches and their arrival order) and reads back plain JSON rows; it computes the
layout (footer boxes) itself from the live files kept here.

clustering  a COW table (no record key: Hudi's generated keys, non-partitioned) made of the same input files, one
            `bulk_insert` commit each (untimed, a fresh copy per run); timed `CALL run_clustering(op => 'execute')`
            of a plan scheduled untimed (`op => 'schedule'`), `order => 'x,y'`, `order_strategy` = linear / z-order /
            hilbert (hoodie.layout.optimize.strategy; the curves with curve.build.method direct, Hudi's default,
            and sample), one clustering group (max bytes per group 1e13), the plan's
            target file size calibrated (untimed) so it writes about `files` files (see clustering_ways). Plain
            Spark: a range sort by x (bench_clustering.run_spark's job).
upsert      the BDCI batches in the same out-of-order arrival, each written to a COW table with record key uuid and
            ordering (precombine) field `_v` = the batch's version, hoodie.record.merge.mode EVENT_TIME_ORDERING (a
            late lower version loses to the stored higher one):
              upsert       each batch first combined per uuid as for Delta/Iceberg (requests summed, name last non-
                           "null", the rest last), then `upsert`: Hudi keeps the whole row of the higher version
              upsert-raw   each batch as it is (uuids repeat within a batch): Hudi's precombine picks one row per key
            and, with the same SQL as Delta's/Iceberg's (bench_peers.merge_sets), MERGE INTO of each combined batch
            (styles version / exact). Plain Spark: the oracle (`bdci_oracle.spark_baseline`).
"""

from __future__ import annotations

import json
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bdci_oracle import VALUE_COLUMNS, digest, spark_baseline
from common import local_spark, median, progress, timed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GOOD_NAME = "(s.name IS NOT NULL AND s.name <> 'null')"
# Hudi's quick start for Spark SQL: Kryo with its registrar, its session extension and catalog
HUDI_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
}
# (key, order_strategy, hoodie.layout.optimize.curve.build.method, ours of the same kind): "direct" (the default)
# interleaves the values' bits; "sample" ranks them on sampled boundaries ("a better data layout", its docs), as
# our SAMPLE curves do
CURVES = (("hudi-linear", "linear", "direct", "linear"), ("hudi-zorder", "z-order", "direct", "zorder"),
          ("hudi-hilbert", "hilbert", "direct", "hilbert"), ("hudi-zorder-sample", "z-order", "sample", "zorder"),
          ("hudi-hilbert-sample", "hilbert", "sample", "hilbert"))


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def rotate(names: list[str], round_no: int) -> list[str]:
    shift = round_no % len(names)
    return names[shift:] + names[:shift]


def row(part: str, key: str, engine: str, label: str, *, version: str, spark: str, kind: str) -> dict[str, Any]:
    """A bench_peers.Result as plain JSON, plus `live`: the last run's live files (kept for the footers)."""
    return {"part": part, "key": key, "engine": engine, "label": label, "version": version, "spark": spark,
            "kind": kind, "seconds": [], "files": None, "box_share": None, "correct": "", "note": "", "error": "",
            "live": []}


def local_paths(paths: list[str]) -> list[str]:
    return sorted(p.removeprefix("file://").removeprefix("file:") for p in paths)


# -- clustering ------------------------------------------------------------------------------------------------
def hudi_prepare(spark: SparkSession, inputs: list[str], path: Path) -> int:
    """The input files as a Hudi COW table, one bulk_insert commit each (as the lake table got them); its bytes."""
    fresh(path)
    for src in inputs:
        (spark.read.parquet(src).write.format("hudi")
         .option("hoodie.table.name", "clustering").option("hoodie.datasource.write.table.type", "COPY_ON_WRITE")
         .option("hoodie.datasource.write.operation", "bulk_insert").mode("append").save(str(path)))
    live = local_paths(spark.read.format("hudi").load(str(path)).inputFiles())
    return sum(Path(p).stat().st_size for p in live)


def clustering_ways(spark: SparkSession, info: dict[str, Any], scratch: Path, version: str, engines: list[str]
                    ) -> dict[str, tuple[dict[str, Any], Callable[[Path], tuple[float, list[str]]]]]:
    """Each way: its row and a runner(keep) -> (seconds, live files), the live files copied under `keep`."""
    ways: dict[str, tuple[dict[str, Any], Callable[[Path], tuple[float, list[str]]]]] = {}
    files = int(info["files"])
    spark_version = spark.version
    if "spark" in engines:
        def plain(keep: Path) -> tuple[float, list[str]]:
            out = fresh(keep)
            seconds, _ = timed(lambda: spark.read.parquet(*info["inputs"]).repartitionByRange(files, "x")
                               .sortWithinPartitions("x").write.parquet(str(out)))
            return seconds, sorted(str(p) for p in out.glob("part-*.parquet"))

        ways["spark"] = (row("", "spark", "spark", 'plain Spark: repartitionByRange(F, "x") + sort + write',
                             version=spark_version, spark=spark_version, kind="baseline"), plain)
    if "hudi" in engines:
        template = scratch.parent / f"prepared-{info['name']}" / "hudi"
        table_bytes = hudi_prepare(spark, info["inputs"], template)

        def options(target: int, build: str) -> str:
            return ",".join([
                f"hoodie.layout.optimize.curve.build.method={build}",
                f"hoodie.clustering.plan.strategy.target.file.max.bytes={target}",
                # every file a candidate, all in one group: the whole table sorted as one, as ours and the others
                "hoodie.clustering.plan.strategy.small.file.limit=1000000000000",
                "hoodie.clustering.plan.strategy.max.bytes.per.group=10000000000000",
                "hoodie.clustering.plan.strategy.max.num.groups=1000",
            ])

        def hudi(strategy: str, keep: Path, target: int, build: str = "direct") -> tuple[float, list[str]]:
            path = fresh(keep)
            shutil.copytree(template, path)

            def call(op: str) -> str:
                return (f"CALL run_clustering(path => '{path}', order => 'x,y', order_strategy => '{strategy}', "
                        f"op => '{op}', options => '{options(target, build)}')")

            spark.sql(call("schedule")).collect()
            seconds, done = timed(lambda: spark.sql(call("execute")).collect())
            if not done or done[0]["state"] != "COMPLETED":
                raise RuntimeError(f"run_clustering did not complete: {done}")
            return seconds, local_paths(spark.read.format("hudi").load(str(path)).inputFiles())

        # The plan makes ceil(bytes / target) output groups (Spark partitions), and each group's writer rolls to a
        # new file when its size estimate (the Parquet writer's buffered size: pages before compression and the
        # column dictionaries) reaches the target: at bytes / files that is ~5x the files on 500k rows, at a few
        # groups ~1 file each. So the number of groups is searched (untimed, linear, bisection on a copy) for the
        # one whose run writes the number of files nearest `files` (fewer on a tie).
        def probe(groups: int) -> int:
            got = len(hudi("linear", scratch / "calibrate-hudi", -(-table_bytes // groups))[1])
            shutil.rmtree(scratch / "calibrate-hudi", ignore_errors=True)
            progress(f"  hudi calibration: {groups} groups -> {got} files")
            return got

        lo, hi, best = 1, files, (10**9, files)  # (2 x |files written - files| + 1 if over, groups)
        while lo <= hi:
            mid = (lo + hi) // 2
            got = probe(mid)
            best = min(best, (abs(got - files) * 2 + (got > files), mid))
            if got == files:
                break
            lo, hi = (lo, mid - 1) if got > files else (mid + 1, hi)
        target = -(-table_bytes // best[1])
        progress(f"  hudi: {best[1]} output groups of {target:,} bytes")
        for key, strategy, build, kind in CURVES:
            label = f"Hudi: run_clustering(order 'x,y', order_strategy '{strategy}')" + (
                f", curve.build.method {build}" if strategy != "linear" else "")
            ways[key] = (row("", key, "hudi", label, version=version, spark=spark_version, kind=kind),
                         lambda keep, strategy=strategy, build=build: hudi(strategy, keep, target, build))  # type: ignore[misc]
    return ways


def run_clustering(spark: SparkSession, part: str, info: dict[str, Any], scratch: Path, *, version: str,
                   engines: list[str], rounds: int) -> list[dict[str, Any]]:
    """Every way once per round, rotated; the last run's live files are kept (under scratch/keep-KEY)."""
    scratch.mkdir(parents=True, exist_ok=True)
    ways = clustering_ways(spark, info, scratch, version, engines)
    for round_no in range(rounds):
        for key in rotate(list(ways), round_no):
            result, runner = ways[key]
            if result["error"]:
                continue
            try:
                seconds, live = runner(scratch / f"keep-{key}")
            except Exception:
                result["error"] = traceback.format_exc()
                progress(f"  {part} round {round_no + 1} {key} FAILED:\n{result['error']}")
                continue
            result["seconds"].append(seconds)
            result["live"], result["files"] = live, len(live)
            progress(f"  {part} round {round_no + 1}/{rounds} {key:15s} {seconds:7.2f} s  {len(live)} files")
    for result, _ in ways.values():
        result["part"] = part
    return [r for r, _ in ways.values()]


# -- upserts ---------------------------------------------------------------------------------------------------
def combined(spark: SparkSession, path: str, version: int) -> DataFrame:
    """One batch with one row per uuid, by the BDCI rules in row order, and its version `_v`; `_nv` is the
    version of its name (-1: every name of the key in this batch is "null"). (bench_peers uses this one.)"""
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).select("*", F.col("_metadata.row_index").alias("_r"))
    good = F.coalesce(F.col("name").isNotNull() & (F.col("name") != F.lit("null")), F.lit(False))
    aggs = [F.max_by(c, F.col("_r")).alias(c) for c in VALUE_COLUMNS if c not in ("requests", "name")]
    aggs += [F.sum("requests").alias("requests"), F.max_by("name", F.struct(good, "_r")).alias("name"),
             F.max(good).alias("_good")]
    return (df.groupBy("uuid").agg(*aggs)
            .select("uuid", *VALUE_COLUMNS, F.lit(version).alias("_v"),
                    F.when(F.col("_good"), F.lit(version)).otherwise(F.lit(-1)).alias("_nv")))


def merge_sets(style: str) -> tuple[str, dict[str, str]]:
    """(the WHEN MATCHED condition, its SET column -> expression) for a MERGE of a combined batch `s` into `t`.
    (bench_peers uses this one for Delta and Iceberg.)"""
    rest = [c for c in VALUE_COLUMNS if c not in ("requests", "name")]
    if style == "version":
        return "s._v > t._v", {
            **{c: f"s.{c}" for c in rest}, "requests": "t.requests + s.requests",
            "name": f"CASE WHEN {GOOD_NAME} THEN s.name ELSE t.name END", "_v": "s._v",
            "_nv": "CASE WHEN s._nv >= 0 THEN s._nv ELSE t._nv END"}
    if style == "exact":
        return "true", {
            **{c: f"CASE WHEN s._v > t._v THEN s.{c} ELSE t.{c} END" for c in rest},
            "requests": "t.requests + s.requests",
            # a name is kept with the version it came from (_nv; -1: none was good yet, then the newest "null")
            "name": "CASE WHEN s._nv > t._nv OR (t._nv < 0 AND s._nv < 0 AND s._v > t._v) THEN s.name ELSE t.name END",
            "_nv": "GREATEST(s._nv, t._nv)", "_v": "GREATEST(s._v, t._v)"}
    raise ValueError(f"unknown MERGE style {style!r}: version or exact")


def differences(spark: SparkSession, got: Path, oracle: Path) -> dict[str, int]:
    """Per column, the keys whose value differs from the oracle's (null-safe); missing / extra / duplicate keys.
    (bench_peers uses this one.)"""
    from pyspark.sql import functions as F

    a = spark.read.parquet(str(got)).alias("a")
    b = spark.read.parquet(str(oracle)).alias("b")
    joined = a.join(b, F.col("a.uuid") == F.col("b.uuid"), "full_outer")
    aggs = [F.sum(F.when(F.col("b.uuid").isNull(), 1).otherwise(0)).alias("extra keys"),
            F.sum(F.when(F.col("a.uuid").isNull(), 1).otherwise(0)).alias("missing keys")]
    both = F.col("a.uuid").isNotNull() & F.col("b.uuid").isNotNull()
    aggs += [F.sum(F.when(both & ~F.col(f"a.{c}").eqNullSafe(F.col(f"b.{c}")), 1).otherwise(0)).alias(c)
             for c in VALUE_COLUMNS]
    dups = a.groupBy("uuid").count().where("count > 1").count()
    first = joined.agg(*aggs).first()
    assert first is not None
    out = {k: int(v or 0) for k, v in first.asDict().items() if v}
    if dups:
        out["duplicate keys"] = dups
    return out


def hudi_options(name: str) -> dict[str, str]:
    """A COW table keyed by uuid, ordered by the version `_v` with event-time ordering (Hudi's docs for late data:
    the record with the higher ordering value wins, whatever arrives last)."""
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.recordkey.field": "uuid",
        "hoodie.datasource.write.precombine.field": "_v",  # named hoodie.table.ordering.fields in the table config
        "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        "hoodie.datasource.write.partitionpath.field": "",
    }


def hudi_upsert(spark: SparkSession, way: str, files: list[str], order: list[int], *, table: Path, out: Path) -> None:
    """The batches in arrival order into one Hudi table (the first creates it), then its snapshot written."""
    from pyspark.sql import functions as F

    name = way.replace("-", "_")
    options = hudi_options(name)
    spark.sql(f"DROP TABLE IF EXISTS {name}")  # a catalog entry only (external): its files are `table`'s
    for n, version in enumerate(order):
        if way == "hudi-upsert-raw":
            batch = spark.read.parquet(files[version]).withColumn("_v", F.lit(version))
        else:
            batch = combined(spark, files[version], version)
        if n == 0 or way in ("hudi-upsert", "hudi-upsert-raw"):
            (batch.write.format("hudi").options(**options)
             # upsert from the first batch on: `insert` keeps a batch's repeated keys (no precombine by default)
             .option("hoodie.datasource.write.operation", "upsert")
             .mode("append").save(str(table)))
            if n == 0 and way.startswith("hudi-merge-"):  # MERGE INTO wants a table: Hudi's catalog over the path
                spark.sql(f"CREATE TABLE {name} USING hudi LOCATION '{table}'")
        else:
            condition, sets = merge_sets(way.removeprefix("hudi-merge-"))
            batch.createOrReplaceTempView("peer_batch")
            spark.sql(f"MERGE INTO {name} t USING peer_batch s ON t.uuid = s.uuid "
                      f"WHEN MATCHED AND {condition} THEN UPDATE SET "
                      + ", ".join(f"{c} = {e}" for c, e in sets.items()) + " WHEN NOT MATCHED THEN INSERT *")
    spark.read.format("hudi").load(str(table)).select("uuid", *VALUE_COLUMNS).write.parquet(str(out))
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def run_upserts(spark: SparkSession, files: list[str], order: list[int], scratch: Path, *, version: str,
                engines: list[str], styles: list[str], rounds: int) -> list[dict[str, Any]]:
    scratch.mkdir(parents=True, exist_ok=True)
    oracle = scratch / "oracle.parquet"
    if not oracle.exists():
        spark_baseline(spark, files, fresh(oracle))
    oracle_digest = digest(spark, oracle)
    spark_version = spark.version
    ways: dict[str, tuple[dict[str, Any], Callable[[Path], None]]] = {}
    if "spark" in engines:
        ways["spark"] = (row("upsert", "spark", "spark", "plain Spark: the 11 files read once, merged per uuid "
                             "(max_by / sum), written", version=spark_version, spark=spark_version, kind="baseline"),
                         lambda out: spark_baseline(spark, files, out))
    if "hudi" in engines:
        labels = {
            "hudi-upsert": "Hudi: upsert per batch (combined per uuid first), ordering field _v, EVENT_TIME_ORDERING",
            "hudi-upsert-raw": "Hudi: upsert per batch as it is (Hudi's precombine per uuid), ordering field _v, "
                               "EVENT_TIME_ORDERING",
            **{f"hudi-merge-{s}": "Hudi: MERGE INTO per batch, " + (
                "WHEN MATCHED AND s._v > t._v (the docs' version condition)" if s == "version"
                else "every match, newer-version CASEs, a name version column") for s in styles},
        }
        for key, label in labels.items():
            def peer(out: Path, key: str = key) -> None:
                hudi_upsert(spark, key, files, order, table=fresh(out.with_name(out.stem + "-table")), out=out)

            ways[key] = (row("upsert", key, "hudi", label, version=version, spark=spark_version, kind="upsert"), peer)
    wrong: dict[str, dict[str, int]] = {}
    for round_no in range(rounds):
        for key in rotate(list(ways), round_no):
            result, runner = ways[key]
            if result["error"]:
                continue
            out = fresh(scratch / f"{key}-r{round_no}")
            try:
                seconds, _ = timed(lambda runner=runner, out=out: runner(out))  # type: ignore[misc]
                wrong[key] = {} if digest(spark, out) == oracle_digest else differences(spark, out, oracle)
            except Exception:
                result["error"] = traceback.format_exc()
                progress(f"  upsert round {round_no + 1} {key} FAILED:\n{result['error']}")
                continue
            finally:
                for extra in (out, out.with_name(out.stem + "-table")):
                    shutil.rmtree(extra, ignore_errors=True)
            result["seconds"].append(seconds)
            progress(f"  upsert round {round_no + 1}/{rounds} {key:22s} {seconds:7.2f} s  "
                     f"{'= oracle' if not wrong[key] else 'WRONG ' + json.dumps(wrong[key])}")
    for key, (result, _) in ways.items():
        if key in wrong:
            result["correct"] = "yes (= oracle hash)" if not wrong[key] else "NO: keys differing per column " + \
                ", ".join(f"{c} {n:,}" for c, n in wrong[key].items())
    return [r for r, _ in ways.values()]


# -- the share ---------------------------------------------------------------------------------------------------
def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    work = Path(spec["work"])
    engines: list[str] = spec["engines"]
    version: str = spec["hudi_version"]
    conf = {**spec["conf"], **HUDI_CONF, "spark.jars": ",".join(spec["jars"])}
    spark = local_spark("airflow-lake bench_peers (Spark 3.5: Hudi)", conf, work / "warehouse-35")
    spark.sparkContext.setLogLevel("ERROR")
    scratch = work / f"runs-{spark.version.replace('.', '_')}"
    results: list[dict[str, Any]] = []
    try:
        clustering = spec["parts"]["clustering"]
        if clustering:
            spark.conf.set("spark.sql.shuffle.partitions", "4")  # as bench_clustering: 4 tasks on 2 cores
            if not spec.get("no_warmup"):
                progress(f"[spark {spark.version}] clustering: an untimed warm-up of every way")
                run_clustering(spark, "warm-up", spec["warmup"], scratch / "warm", version=version, engines=engines,
                               rounds=1)
            for part, info in clustering.items():
                progress(f"[spark {spark.version}] {part}: {len(info['inputs'])} input files, {info['files']} out")
                results += run_clustering(spark, part, info, scratch / part, version=version, engines=engines,
                                          rounds=int(info["rounds"]))
            spark.conf.unset("spark.sql.shuffle.partitions")
        upsert = spec["parts"]["upsert"]
        if upsert:
            spark.conf.set("spark.sql.shuffle.partitions", str(upsert["shuffle_partitions"]))
            common = {"version": version, "engines": engines, "styles": upsert["styles"]}
            if not spec.get("no_warmup"):
                progress(f"[spark {spark.version}] upsert: an untimed warm-up of every way")
                run_upserts(spark, upsert["warmup_files"], upsert["order"], scratch / "upsert-warm", rounds=1,
                            **common)
            progress(f"[spark {spark.version}] upsert: BDCI, {upsert['rows']} rows per batch")
            results += run_upserts(spark, upsert["files"], upsert["order"], scratch / "upsert",
                                   rounds=int(upsert["rounds"]), **common)
    finally:
        spark.stop()
    Path(spec["results"]).write_text(json.dumps(results))
    for r in results:
        if r["seconds"]:
            progress(f"  {r['part']} {r['key']}: median {median(r['seconds']):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
