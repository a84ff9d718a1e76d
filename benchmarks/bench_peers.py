"""Benchmark: the peers on the same Spark — ours vs Delta Lake, Iceberg, Hudi vs plain Spark, side by side.

Every engine runs on the same data in one run, in a local[2] session of the same Spark (one session per Spark
version, the peers' jars from `benchmarks/peers_setup.sh`, which also makes the pyspark 4.1 venv). Rounds alternate
the engines and rotate who goes first. Ratios are of medians within one Spark version: to ours (the variant of the
same kind) and to plain Spark.

clustering  `--rows` rows (x, y uniform int64 in [0, 1e6), p 20 letters; `bench_clustering.xy_chunk`) appended to
            a lake table in `--input-files` appends; every engine starts from those same input files (a fresh copy
            per run, untimed) and writes about `--files` files:
              plain Spark  read -> repartitionByRange(F, x) -> sortWithinPartitions(x) -> write (bench_clustering)
              ours         execute_clustering LINEAR(x, y) / ZORDER(x, y) / HILBERT(x, y), SAMPLE (bench_clustering)
              Delta        the files appended to a Delta table one by one; timed `DeltaTable.optimize()
                           .executeZOrderBy("x", "y")`; and a table created `CLUSTER BY (x, y)` (liquid
                           clustering: Hilbert) appended the same way, timed `optimize().executeCompaction()`
                           (OPTIMIZE), both with `spark.databricks.delta.optimize.maxFileSize` = input bytes / files
              Iceberg      the files appended to a Hadoop-catalog table one by one; timed `CALL
                           system.rewrite_data_files(strategy => 'sort', sort_order => 'x, y' | 'zorder(x, y)',
                           options => target-file-size-bytes = input bytes / files, rewrite-all)`
            Layout: the share of files a 1% box query opens, from the Parquet footers of each engine's live files
            (`bench_clustering.footer_boxes` / `opened_share`, the same 50 boxes), next to the ideal grid's.
            `--skewed` adds the same on heavily duplicated, skewed data (x lognormal, y Zipf-like), one run each.
upsert      the BDCI shape (`airflow_lake.datagen.bdci`, `--upsert-rows` rows in each of base-1..10, base-0 5x)
            arriving in bench_upsert's shuffled version order, one batch after the other; every result written as
            Parquet and compared per key with the oracle (plain Spark's one-shot merge, `bench_upsert.spark_baseline`):
              plain Spark  `bench_upsert.spark_baseline`: the 11 files read once, merged per uuid, written
              ours         `bench_upsert.upsert_all` (11 `versioned_upsert`s in sequence) + the merged read written
              Delta/Iceberg MERGE (INTO), each batch first combined per key in Spark (a MERGE refuses two source
                           rows for one target row): `requests` summed, `name` last non-"null", the rest last, plus
                           its version `_v`. Two ways to write the MERGE:
                 version   what the docs show for ordered upserts: `WHEN MATCHED AND s._v > t._v THEN UPDATE`
                           (requests t + s, name s unless "null", the rest s), `WHEN NOT MATCHED THEN INSERT`: a late
                           lower version is dropped for the keys it updates (wrong: reported per column)
                 exact     what it takes to be right out of order: `requests` always t + s, every other column
                           taken from s only if s._v > t._v, name with its own version column `_nv`
Hudi        no Spark 4 bundle on Maven Central: it runs on pyspark 3.5 (its venv from peers_setup.sh) in a process
            of `benchmarks/peers_spark35.py` (no airflow_lake there: ours needs pyspark >= 4.1), with plain Spark
            3.5 beside it: clustering = `CALL run_clustering` with order_strategy linear / z-order / hilbert over
            (x, y); upserts = Hudi upsert with ordering field = the version (EVENT_TIME_ORDERING), of each batch
            combined per key and as it is, and MERGE INTO in both styles. Details in that module's docstring.

    benchmarks/peers_setup.sh                                   # jars + the pyspark 4.1 and 3.5 venvs (once)
    .venv/bin/python benchmarks/bench_peers.py --out /tmp/bench_peers.md          # all parts, ~25 min on 2 cores
    .venv/bin/python benchmarks/bench_peers.py --part clustering --rows 200000 --rounds 1 --upsert-rows 5000  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import bench_clustering as bc
import bench_upsert as bu
import numpy as np
import pyarrow as pa
from common import REPO, local_spark, machine_info, median, progress, timed
from peers_spark35 import combined, differences, merge_sets

from airflow_lake.datagen import bdci
from airflow_lake.jobs.session import DEFAULT_CONF

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("PEERS_CACHE", HERE / ".peers"))
SPARK41_PYTHON = PEERS / "venv-spark4.1.3" / "bin" / "python"
SPARK35_PYTHON = PEERS / "venv-spark3.5.9" / "bin" / "python"  # Hudi: benchmarks/peers_spark35.py
ICEBERG_CATALOG = "ice"
VALUE_COLUMNS = bu.VALUE_COLUMNS


# -- results ---------------------------------------------------------------------------------------------------
@dataclass
class Result:
    """One engine's way, all its rounds."""

    part: str  # clustering | skewed | upsert
    key: str  # unique within the part
    engine: str  # ours | spark | delta | iceberg | hudi
    label: str
    version: str
    spark: str
    kind: str = ""  # what ours it compares with: linear | zorder | hilbert | upsert
    seconds: list[float] = field(default_factory=list)
    files: int | None = None
    box_share: float | None = None  # mean % of files a 1% box opens
    correct: str = ""
    note: str = ""
    error: str = ""


def jar_status() -> dict[str, str]:
    """What peers_setup.sh fetched (or why not): one line per engine."""
    path = PEERS / "status.txt"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        name, _, rest = line.partition(" ")
        out[name] = rest
    return out


def jars(engine: str) -> list[str]:
    return sorted(str(p) for p in (PEERS / "jars" / engine).glob("*.jar"))


def jar_version(engine: str) -> str:
    status = jar_status().get(engine, "")
    return status.split()[1] if status.startswith("ok ") else "not available"


def peer_session(engines: list[str], warehouse: Path) -> SparkSession:
    """One local[2] session (DEFAULT_CONF, as our jobs run) with the peers' jars and the settings their docs give."""
    conf = {**DEFAULT_CONF}
    extensions, paths = [], []
    if "delta" in engines:
        paths += jars("delta")
        extensions.append("io.delta.sql.DeltaSparkSessionExtension")
        conf["spark.sql.catalog.spark_catalog"] = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    if "iceberg" in engines:
        paths += jars("iceberg")
        extensions.append("org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG}"] = "org.apache.iceberg.spark.SparkCatalog"
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG}.type"] = "hadoop"
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG}.warehouse"] = str(warehouse / "iceberg")
    if paths:
        conf["spark.jars"] = ",".join(paths)
        conf["spark.sql.extensions"] = ",".join(extensions)
        # delta-spark's Python API ships inside its jar (as `--packages` puts it on the Python path)
        sys.path[:0] = [p for p in paths if Path(p).name.startswith("delta-spark") and p not in sys.path]
    spark = local_spark("airflow-lake bench_peers", conf, warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def live_of(df: DataFrame) -> list[str]:
    """The files a peer's table reads now (its log's live files), as local paths."""
    return sorted(p.removeprefix("file://").removeprefix("file:") for p in df.inputFiles())


def iceberg_live(spark: SparkSession, table: str) -> list[str]:
    """An Iceberg table's live data files, from its `files` metadata table (a v2 scan has no inputFiles)."""
    rows = spark.sql(f"SELECT file_path FROM {ICEBERG_CATALOG}.{table}.files").collect()
    return sorted(str(r[0]).removeprefix("file://").removeprefix("file:") for r in rows)


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


@dataclass
class PeerSetup(bc.Setup):
    """bench_clustering's Setup plus what the peers need: the boxes, the third column, the peers' templates."""

    name: str = "xy"
    columns_extra: str = "p"
    boxes: list[bc.FileBox] = field(default_factory=list)
    peer_inputs: dict[str, Path] = field(default_factory=dict)
    peer_target: dict[str, int] = field(default_factory=dict)


def setup_from(info: dict[str, Any]) -> PeerSetup:
    return PeerSetup(Path(info["lake"]), info["inputs"], info["input_bytes"], info["target"], tuple(info["columns"]),
                     info["files"], name=info["name"], boxes=[tuple(b) for b in info["boxes"]])  # type: ignore[misc]


# -- clustering ------------------------------------------------------------------------------------------------
OURS_CLUSTERING = (
    bc.Variant("linear-xy", "ours LINEAR(x, y)", "LINEAR", ("x", "y"), "SAMPLE"),
    bc.Variant("zorder-sample", "ours ZORDER(x, y) SAMPLE", "ZORDER", ("x", "y"), "SAMPLE"),
    bc.Variant("hilbert-sample", "ours HILBERT(x, y) SAMPLE", "HILBERT", ("x", "y"), "SAMPLE"),
)
KIND_OF = {"linear-xy": "linear", "zorder-sample": "zorder", "hilbert-sample": "hilbert"}


Runner = Callable[[], bc.Outcome]


def clustering_ways(spark: SparkSession, setup: PeerSetup, engines: list[str], scratch: Path, spark_version: str
                    ) -> dict[str, tuple[Result, Runner]]:
    """Each way: its Result (filled by the rounds) and a runner -> Outcome (seconds, files, footer boxes)."""
    ways: dict[str, tuple[Result, Runner]] = {}

    def outcome(seconds: float, live: list[str]) -> bc.Outcome:
        return bc.Outcome(seconds, len(live), bc.footer_boxes(live, setup.columns))

    if "spark" in engines:
        ways["spark"] = (Result("", "spark", "spark", 'plain Spark: repartitionByRange(F, "x") + sort + write',
                                spark_version, spark_version, "baseline"), lambda: bc.run_spark(spark, setup, scratch))
    if "ours" in engines:
        for v in OURS_CLUSTERING:
            ways[v.key] = (Result("", v.key, "ours", v.label, "airflow-lake (this tree)", spark_version,
                                  KIND_OF[v.key]),
                           lambda v=v: bc.run_ours(spark, setup, v, scratch))  # type: ignore[misc]
    if "delta" in engines:
        from delta.tables import DeltaTable

        def delta_run(name: str) -> bc.Outcome:
            path = fresh(scratch / name)
            shutil.copytree(setup.peer_inputs[name], path)
            spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(setup.peer_target[name]))
            table = DeltaTable.forPath(spark, str(path))
            if name == "delta-liquid":
                seconds, _ = timed(lambda: table.optimize().executeCompaction())
            else:
                seconds, _ = timed(lambda: table.optimize().executeZOrderBy("x", "y"))
            try:
                return outcome(seconds, live_of(spark.read.format("delta").load(str(path))))
            finally:
                shutil.rmtree(path, ignore_errors=True)

        for name, label, kind in (("delta-zorder", "Delta: OPTIMIZE ZORDER BY (x, y)", "zorder"),
                                  ("delta-liquid", "Delta: CLUSTER BY (x, y) + OPTIMIZE (liquid, Hilbert)",
                                   "hilbert")):
            if name not in setup.peer_inputs:
                delta_prepare(spark, setup, name, scratch.parent / f"prepared-{setup.name}" / name)
            ways[name] = (Result("", name, "delta", label, jar_version("delta"), spark_version, kind),
                          lambda name=name: delta_run(name))  # type: ignore[misc]
    if "iceberg" in engines:
        if "iceberg" not in setup.peer_target:
            iceberg_prepare(spark, setup)

        def ice_run(name: str, order: str) -> bc.Outcome:
            table = iceberg_copy(spark, setup, name)
            call = (f"CALL {ICEBERG_CATALOG}.system.rewrite_data_files(table => '{table}', strategy => 'sort', "
                    f"sort_order => '{order}', options => map('target-file-size-bytes', "
                    f"'{setup.peer_target['iceberg']}', 'rewrite-all', 'true', "
                    f"'max-file-group-size-bytes', '{10**13}'))")
            seconds, _ = timed(lambda: spark.sql(call).collect())
            try:
                return outcome(seconds, iceberg_live(spark, table))
            finally:
                spark.sql(f"DROP TABLE IF EXISTS {ICEBERG_CATALOG}.{table} PURGE")

        for name, order, kind in (("iceberg-sort", "x ASC NULLS LAST, y ASC NULLS LAST", "linear"),
                                  ("iceberg-zorder", "zorder(x, y)", "zorder")):
            label = f"Iceberg: rewrite_data_files(strategy 'sort', sort_order '{order}')"
            ways[name] = (Result("", name, "iceberg", label, jar_version("iceberg"), spark_version, kind),
                          lambda name=name, order=order: ice_run(name, order))  # type: ignore[misc]
    return ways


def delta_prepare(spark: SparkSession, setup: PeerSetup, name: str, path: Path) -> None:
    """The input files appended to a Delta table one by one (a template, copied per run); the liquid one is
    created CLUSTER BY (x, y) first. maxFileSize for about `files` outputs: its input bytes / files."""
    from delta.tables import DeltaTable

    fresh(path)
    if name == "delta-liquid":
        # the builder names a path table delta.`path`: SQL on files, which our DEFAULT_CONF turns off for jobs
        spark.conf.set("spark.sql.runSQLOnFiles", "true")
        try:
            (DeltaTable.create(spark).location(str(path)).addColumn("x", "BIGINT").addColumn("y", "BIGINT")
             .addColumn(setup.columns_extra, "STRING").clusterBy("x", "y").execute())
        finally:
            spark.conf.set("spark.sql.runSQLOnFiles", DEFAULT_CONF["spark.sql.runSQLOnFiles"])
    for src in setup.inputs:
        spark.read.parquet(src).write.format("delta").mode("append").save(str(path))
    setup.peer_inputs[name] = path
    setup.peer_target[name] = max(1, -(-bytes_of(live_of(spark.read.format("delta").load(str(path)))) // setup.files))


def bytes_of(paths: list[str]) -> int:
    return sum(Path(p).stat().st_size for p in paths)


def iceberg_prepare(spark: SparkSession, setup: PeerSetup) -> None:
    """target-file-size-bytes for about `files` outputs: the input bytes of an Iceberg copy / files."""
    table = iceberg_copy(spark, setup, "prep")
    setup.peer_target["iceberg"] = max(1, -(-bytes_of(iceberg_live(spark, table))
                                            // setup.files))
    spark.sql(f"DROP TABLE IF EXISTS {ICEBERG_CATALOG}.{table} PURGE")


def iceberg_copy(spark: SparkSession, setup: PeerSetup, name: str) -> str:
    """A fresh Iceberg table (Hadoop catalog) of the same input files, appended one by one (untimed)."""
    table = f"run.{name.replace('-', '_')}_{setup.name}"
    spark.sql(f"DROP TABLE IF EXISTS {ICEBERG_CATALOG}.{table} PURGE")
    spark.sql(f"CREATE TABLE {ICEBERG_CATALOG}.{table} (x BIGINT, y BIGINT, {setup.columns_extra} STRING) "
              "USING iceberg")
    for src in setup.inputs:
        spark.read.parquet(src).writeTo(f"{ICEBERG_CATALOG}.{table}").append()
    return table


def run_clustering(spark: SparkSession, part: str, setup: PeerSetup, *, engines: list[str], rounds: int,
                   scratch: Path, spark_version: str) -> list[Result]:
    """Every way once per round, the order rotated each round; the last run's layout is reported."""
    scratch.mkdir(parents=True, exist_ok=True)
    ways = clustering_ways(spark, setup, engines, scratch, spark_version)
    last: dict[str, bc.Outcome] = {}
    for round_no in range(rounds):
        for key in bc.rotate(list(ways), round_no):
            result, runner = ways[key]
            if result.error:
                continue
            try:
                got = runner()
            except Exception:
                result.error = traceback.format_exc()
                progress(f"  {part} round {round_no + 1} {key} FAILED:\n{result.error}")
                continue
            last[key] = got
            result.seconds.append(got.seconds)
            progress(f"  {part} round {round_no + 1}/{rounds} {key:15s} {got.seconds:7.2f} s  {got.files} files")
    for key, (result, _) in ways.items():
        result.part = part
        if key in last:
            result.files = last[key].files
            result.box_share = bc.opened_share(last[key].boxes, setup.boxes)["mean"]
    return [r for r, _ in ways.values()]


# -- upserts ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PeerUpsert:
    """One peer's upsert way: engine, MERGE style, the table's place (Delta: a path; Iceberg: a name)."""

    engine: str
    style: str
    where: Path
    name: str


def upsert_peer(spark: SparkSession, way: PeerUpsert, files: list[Path], order: list[int], out: Path) -> None:
    """The batches in arrival order: the first creates the table, each next one is MERGEd; then the table is
    read and written as Parquet (what ours does with its merged read)."""
    condition, sets = merge_sets(way.style)
    target = f"{ICEBERG_CATALOG}.run.{way.name}"
    if way.engine == "iceberg":
        spark.sql(f"DROP TABLE IF EXISTS {target} PURGE")
    for n, version in enumerate(order):
        batch = combined(spark, str(files[version]), version)
        if n == 0:
            if way.engine == "delta":
                batch.write.format("delta").save(str(way.where))
            else:
                batch.writeTo(target).using("iceberg").create()
        elif way.engine == "delta":
            from delta.tables import DeltaTable

            (DeltaTable.forPath(spark, str(way.where)).alias("t").merge(batch.alias("s"), "t.uuid = s.uuid")
             .whenMatchedUpdate(condition=condition, set=sets).whenNotMatchedInsertAll().execute())
        else:
            batch.createOrReplaceTempView("peer_batch")
            spark.sql(f"MERGE INTO {target} t USING peer_batch s ON t.uuid = s.uuid "
                      f"WHEN MATCHED AND {condition} THEN UPDATE SET "
                      + ", ".join(f"{c} = {e}" for c, e in sets.items()) + " WHEN NOT MATCHED THEN INSERT *")
    final = spark.read.format("delta").load(str(way.where)) if way.engine == "delta" else spark.table(target)
    final.select("uuid", *VALUE_COLUMNS).write.parquet(str(out))
    if way.engine == "iceberg":
        spark.sql(f"DROP TABLE IF EXISTS {target} PURGE")


def run_upserts(spark: SparkSession, files: list[Path], *, engines: list[str], styles: list[str], rounds: int,
                scratch: Path, spark_version: str, threads: int) -> list[Result]:
    """Every way once per round, rotated; each result checked against the oracle (hash, then per key)."""
    scratch.mkdir(parents=True, exist_ok=True)
    order = list(range(bdci.FILES))
    random.Random(3).shuffle(order)  # bench_upsert's out-of-order arrival
    oracle = scratch / "oracle.parquet"
    if not oracle.exists():
        bu.spark_baseline(spark, files, fresh(oracle))
    oracle_digest = bu.digest(spark, oracle)
    ways: dict[str, tuple[Result, Callable[[Path], None]]] = {}
    if "spark" in engines:
        ways["spark"] = (Result("upsert", "spark", "spark", "plain Spark: the 11 files read once, merged per uuid "
                                "(max_by / sum), written", spark_version, spark_version, "baseline"),
                         lambda out: bu.spark_baseline(spark, files, out))
    if "ours" in engines:
        def ours(out: Path) -> None:
            table = bu.upsert_all(spark, out.with_name(out.stem + "-lake"), files, order, threads)
            table.read(spark).write.parquet(str(out))

        label = "ours: 11 versioned_upserts " + ("in sequence" if threads <= 1 else f"{threads} at once") \
            + " + merged read written"
        ways["ours"] = (Result("upsert", "ours", "ours", label, "airflow-lake (this tree)", spark_version, "upsert"),
                        ours)
    for engine in ("delta", "iceberg"):
        if engine not in engines:
            continue
        for style in styles:
            key = f"{engine}-merge-{style}"
            verb = "MERGE" if engine == "delta" else "MERGE INTO"
            what = ("WHEN MATCHED AND s._v > t._v (the docs' version condition)" if style == "version"
                    else "every match, newer-version CASEs, a name version column")
            label = f"{engine.capitalize()}: {verb} per batch, {what}"

            def peer(out: Path, engine: str = engine, style: str = style, key: str = key) -> None:
                way = PeerUpsert(engine, style, fresh(out.with_name(out.stem + "-table")), key.replace("-", "_"))
                upsert_peer(spark, way, files, order, out)

            ways[key] = (Result("upsert", key, engine, label, jar_version(engine), spark_version, "upsert"), peer)
    wrong: dict[str, dict[str, int]] = {}
    for round_no in range(rounds):
        for key in bc.rotate(list(ways), round_no):
            result, runner = ways[key]
            if result.error:
                continue
            out = fresh(scratch / f"{key}-r{round_no}")
            try:
                seconds, _ = timed(lambda runner=runner, out=out: runner(out))  # type: ignore[misc]
                got = bu.digest(spark, out)
                wrong[key] = {} if got == oracle_digest else differences(spark, out, oracle)
            except Exception:
                result.error = traceback.format_exc()
                progress(f"  upsert round {round_no + 1} {key} FAILED:\n{result.error}")
                continue
            finally:
                for extra in (out, out.with_name(out.stem + "-lake"), out.with_name(out.stem + "-table")):
                    shutil.rmtree(extra, ignore_errors=True)
            result.seconds.append(seconds)
            progress(f"  upsert round {round_no + 1}/{rounds} {key:22s} {seconds:7.2f} s  "
                     f"{'= oracle' if not wrong[key] else 'WRONG ' + json.dumps(wrong[key])}")
    for key, (result, _) in ways.items():
        if key in wrong:
            result.correct = "yes (= oracle hash)" if not wrong[key] else "NO: keys differing per column " + \
                ", ".join(f"{c} {n:,}" for c, n in wrong[key].items())
    return [r for r, _ in ways.values()]


# -- one Spark version's share of the run ------------------------------------------------------------------------
def run_engines(spark: SparkSession, spec: dict[str, Any]) -> list[Result]:
    """Everything one Spark version runs (in this process's session): `spec` from main or from the parent."""
    work = Path(spec["work"])
    engines: list[str] = spec["engines"]
    spark_version = spark.version
    # no dots in table paths: DeltaTableBuilder.location() parses a dotted path as a table name
    scratch = work / f"runs-{spark_version.replace('.', '_')}"
    scratch.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    try:
        if spec["parts"]["clustering"]:
            spark.conf.set("spark.sql.shuffle.partitions", "4")  # as bench_clustering: 4 tasks on 2 cores
            if not spec.get("no_warmup"):
                progress(f"[spark {spark_version}] clustering: an untimed warm-up of every way")
                run_clustering(spark, "warm-up", setup_from(spec["warmup"]), engines=engines, rounds=1,
                               scratch=scratch / "warm", spark_version=spark_version)
            for part, info in spec["parts"]["clustering"].items():
                setup = setup_from(info)
                progress(f"[spark {spark_version}] {part}: {len(setup.inputs)} input files, {setup.files} files out")
                results += run_clustering(spark, part, setup, engines=engines, rounds=info["rounds"],
                                          scratch=scratch / part, spark_version=spark_version)
            spark.conf.unset("spark.sql.shuffle.partitions")
        if spec["parts"]["upsert"]:
            info = spec["parts"]["upsert"]
            common = {"engines": engines, "styles": info["styles"], "spark_version": spark_version,
                      "threads": info["threads"]}
            # every engine alike: 200 shuffle partitions (Spark's default) make each of the peers' MERGEs run
            # hundreds of tiny tasks on 2 cores (a 75k-row smoke run: 250-390 s per Delta run)
            spark.conf.set("spark.sql.shuffle.partitions", str(info["shuffle_partitions"]))
            if not spec.get("no_warmup"):
                progress(f"[spark {spark_version}] upsert: an untimed warm-up of every way")
                run_upserts(spark, [Path(p) for p in info["warmup_files"]], rounds=1, scratch=scratch / "upsert-warm",
                            **common)
            progress(f"[spark {spark_version}] upsert: BDCI, {info['rows']} rows per batch")
            spark.conf.set("spark.sql.shuffle.partitions", str(info["shuffle_partitions"]))
            results += run_upserts(spark, [Path(p) for p in info["files"]], rounds=info["rounds"],
                                   scratch=scratch / "upsert", **common)
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")
    return results


def run_spark35(python: str, spec: dict[str, Any], engines: list[str], parts: dict[str, Any],
                unavailable: list[str]) -> list[Result]:
    """The pyspark 3.5 share (Hudi, plain Spark 3.5) in a process of that venv running peers_spark35.py, which
    imports no airflow_lake; the layout of each way is computed here from the live files it kept."""
    work = Path(spec["work"])
    child: dict[str, Any] = {
        "work": str(work), "engines": engines, "results": str(work / "results-35.json"),
        "conf": DEFAULT_CONF, "jars": jars("hudi"), "hudi_version": jar_version("hudi"),
        "no_warmup": spec["no_warmup"], "warmup": spec["warmup"],
        "parts": {"clustering": parts["clustering"], "upsert": {}}}
    if parts["upsert"]:
        order = list(range(bdci.FILES))
        random.Random(3).shuffle(order)  # bench_upsert's out-of-order arrival, as run_upserts
        child["parts"]["upsert"] = {**parts["upsert"], "order": order}
    (work / "spec-35.json").write_text(json.dumps(child))
    env = {**os.environ, "PYTHONPATH": str(HERE)}  # common.py and peers_spark35.py only: not this repo's package
    progress(f"[spark 3.5] {python} for {engines}")
    done = subprocess.run([python, str(HERE / "peers_spark35.py"), str(work / "spec-35.json")], env=env,
                          check=False)
    if done.returncode != 0:
        unavailable.append(f"the pyspark 3.5 part ({engines}) exited with {done.returncode}; see stderr")
        return []
    out = []
    for got in json.loads((work / "results-35.json").read_text()):
        live = got.pop("live")
        result = Result(**got)
        info = parts["clustering"].get(result.part)
        if info and live:
            result.box_share = bc.opened_share(bc.footer_boxes(live, info["columns"]),
                                               [tuple(b) for b in info["boxes"]])["mean"]  # type: ignore[misc]
        out.append(result)
    return out


# -- data ------------------------------------------------------------------------------------------------------
def skewed_chunk(rows: int, index: int) -> pa.Table:
    """Heavily duplicated, skewed x, y: x lognormal (rounded, long runs of equal values), y Zipf-like (a few
    values hold most rows), same value range as the uniform data."""
    rng = np.random.default_rng([bc.SEED, 3, index])
    x = np.minimum(np.round(rng.lognormal(mean=9.0, sigma=1.5, size=rows)), bc.DOMAIN - 1).astype(np.int64)
    y = np.minimum(rng.zipf(1.3, size=rows) - 1, bc.DOMAIN - 1).astype(np.int64)
    return pa.table({"x": x, "y": y, "p": bc.random_letters(rng, rows, bc.PAYLOAD_BYTES)})


def skewed_boxes(chunks: list[pa.Table]) -> list[bc.FileBox]:
    """1% boxes on skewed data: 10% of the rows' rank in x by 10% in y (bounds are actual values)."""
    xs = np.sort(np.concatenate([c.column("x").to_numpy() for c in chunks]))
    ys = np.sort(np.concatenate([c.column("y").to_numpy() for c in chunks]))
    n = len(xs)
    span = max(1, int(n * bc.BOX_SHARE))
    rng = np.random.default_rng([bc.SEED, 4])
    out: list[bc.FileBox] = []
    for _ in range(bc.BOXES):
        a, b = (int(v) for v in rng.integers(0, n - span + 1, size=2))
        out.append((int(xs[a]), int(xs[a + span - 1]), int(ys[b]), int(ys[b + span - 1])))
    return out


def prepare_clustering(spark: SparkSession, work: Path, name: str, chunks: list[pa.Table], *, files: int,
                       boxes: list[bc.FileBox], rounds: int) -> dict[str, Any]:
    lake = work / f"lake-{name}"
    bc.build_lake(spark, lake, bc.SCHEMA_XY, chunks, work / "staging")
    total = bc.live_bytes(lake)
    return {"lake": str(lake), "inputs": bc.live_files(lake), "input_bytes": total,
            "target": bc.target_bytes(total, files), "columns": ["x", "y"], "files": files, "name": name,
            "boxes": [list(b) for b in boxes], "rounds": rounds}


def ideal_share(files: int, boxes: list[bc.FileBox], chunks: list[pa.Table] | None = None) -> float:
    """The ideal grid's share on the same boxes: uniform cells, or on skewed data equal-count cells (quantiles)."""
    if chunks is None:
        return bc.opened_share(bc.ideal_grid(files), boxes)["mean"]
    nx, ny = bc.grid_shape(files)
    xs = np.sort(np.concatenate([c.column("x").to_numpy() for c in chunks]))
    ys = np.sort(np.concatenate([c.column("y").to_numpy() for c in chunks]))
    n = len(xs)
    cells: list[bc.FileBox | None] = [
        (int(xs[i * n // nx]), int(xs[(i + 1) * n // nx - 1]), int(ys[j * n // ny]), int(ys[(j + 1) * n // ny - 1]))
        for i in range(nx) for j in range(ny)]
    return bc.opened_share(cells, boxes)["mean"]


# -- report ----------------------------------------------------------------------------------------------------
def report(results: list[Result], header: list[str], ideals: dict[str, float], unavailable: list[str]) -> str:
    lines = ["# The peers on the same Spark: ours vs Delta Lake vs Iceberg vs Hudi vs plain Spark", "", *header, ""]
    titles = {"clustering": "Clustering (uniform x, y)", "skewed": "Clustering, skewed data (x lognormal, y Zipf-like)",
              "upsert": "Upserts (BDCI, out of order, checked against the oracle)"}
    for part in ("clustering", "skewed", "upsert"):
        rows = [r for r in results if r.part == part]
        if not rows:
            continue
        lines += [f"## {titles[part]}", "",
                  "| engine | way | version | Spark | median s | runs s | / ours | / plain Spark | files | "
                  "box-query share | correct? |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            same = [o for o in rows if o.spark == r.spark]
            base = next((o for o in same if o.engine == "spark" and o.seconds), None)
            ours = next((o for o in same if o.engine == "ours" and o.seconds
                         and (o.kind == r.kind or part == "upsert")), None)
            mid = median(r.seconds) if r.seconds else None
            to_ours = (f"{mid / median(ours.seconds):.2f}x ({ours.key})" if mid and ours and ours is not r
                       else ("1.00x" if ours is r else ""))
            to_base = f"{mid / median(base.seconds):.2f}x" if mid and base else ""
            if mid and base and not ours and r.engine not in ("ours", "spark"):
                # no ours on this Spark (Hudi on 3.5): ratio of ratios to plain Spark, with the first Spark's ours
                first = next((o for o in rows if o.engine == "ours" and o.seconds
                              and (o.kind == r.kind or part == "upsert")), None)
                first_base = next((o for o in rows if first and o.spark == first.spark and o.engine == "spark"
                                   and o.seconds), None)
                if first and first_base:
                    rel = median(first.seconds) / median(first_base.seconds)
                    to_ours = (f"~{mid / median(base.seconds) / rel:.2f}x ({first.key} on {first.spark}, "
                               "via plain Spark)")
            lines.append("| " + " | ".join([
                r.engine, r.label.replace("|", "\\|"), r.version, r.spark,
                f"{mid:.2f}" if mid else ("FAILED" if r.error else "not run"),
                ", ".join(f"{s:.2f}" for s in r.seconds), to_ours, to_base,
                "" if r.files is None else str(r.files),
                "" if r.box_share is None else f"{r.box_share:.2f} %", r.correct or ("" if part != "upsert" else "-"),
            ]) + " |")
        if part in ideals:
            lines.append(f"| ideal grid | computed cells | | | | | | | | {ideals[part]:.2f} % | |")
        lines.append("")
    if unavailable:
        lines += ["## Not run", "", *[f"- {u}" for u in unavailable], ""]
    failed = [r for r in results if r.error]
    if failed:
        lines += ["## Errors", ""]
        for r in failed:
            lines += [f"### {r.part} {r.key} (Spark {r.spark})", "", "```", r.error.strip()[-3000:], "```", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", choices=["clustering", "upsert", "all"], default="all")
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the clustering table (default 2M)")
    parser.add_argument("--files", type=int, default=32, help="files every clustering writes (default 32)")
    parser.add_argument("--input-files", type=int, default=8, help="appends = input files (default 8)")
    parser.add_argument("--skewed", action=argparse.BooleanOptionalAction, default=True,
                        help="also cluster skewed, duplicated data (one round)")
    parser.add_argument("--upsert-rows", type=int, default=100_000,
                        help="rows of each of base-1..10, base-0 5x (default 100000: 1.5M rows in all)")
    parser.add_argument("--styles", default="version,exact", help="MERGE styles: version, exact")
    parser.add_argument("--upsert-shuffle-partitions", type=int, default=8,
                        help="spark.sql.shuffle.partitions for every engine's upserts (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="our upserts at once (default 1: in sequence)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--engines", default="ours,spark,delta,iceberg,hudi")
    parser.add_argument("--spark41-python", default=str(SPARK41_PYTHON),
                        help="Python of the pyspark 4.1 venv (peers_setup.sh) for Iceberg")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--only-spark41", action="store_true",
                        help="run only the pyspark 4.1 share (Iceberg with ours and plain Spark beside it)")
    parser.add_argument("--spark35-python", default=str(SPARK35_PYTHON),
                        help="Python of the pyspark 3.5 venv (peers_setup.sh) for Hudi")
    parser.add_argument("--only-spark35", action="store_true",
                        help="run only the pyspark 3.5 share (Hudi with plain Spark beside it; ours cannot run there)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lake-bench-peers"))
    parser.add_argument("--out", default=None, help="also write the markdown report here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # spec JSON: run it, write results
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(Path(args.child).read_text())
        spark = peer_session(spec["engines"], Path(spec["work"]) / "warehouse-child")
        try:
            results = run_engines(spark, spec)
        finally:
            spark.stop()
        Path(spec["results"]).write_text(json.dumps([asdict(r) for r in results]))
        return 0

    import pyspark

    wanted = [e.strip() for e in args.engines.split(",") if e.strip()]
    status = jar_status()
    unavailable: list[str] = []
    here_version = pyspark.__version__
    # which Spark each peer runs on: the newest its release supports that we have
    on_here = [e for e in ("ours", "spark") if e in wanted]
    on_41: list[str] = []
    if "delta" in wanted:
        if jars("delta"):
            on_here.append("delta")
        else:
            unavailable.append(f"Delta Lake: {status.get('delta', 'run benchmarks/peers_setup.sh')}")
    if "iceberg" in wanted:
        if not jars("iceberg"):
            unavailable.append(f"Iceberg: {status.get('iceberg', 'run benchmarks/peers_setup.sh')}")
        elif not Path(args.spark41_python).exists():
            unavailable.append(f"Iceberg: no pyspark 4.1 venv at {args.spark41_python} (benchmarks/peers_setup.sh)")
        else:
            on_41 = ["iceberg", *[e for e in ("ours", "spark") if e in wanted]]
    on_35: list[str] = []
    if "hudi" in wanted:
        if not jars("hudi"):
            unavailable.append(f"Hudi: {status.get('hudi', 'run benchmarks/peers_setup.sh')}")
        elif not Path(args.spark35_python).exists():
            unavailable.append(f"Hudi: no pyspark 3.5 venv at {args.spark35_python} (benchmarks/peers_setup.sh)")
        else:
            on_35 = ["hudi", *[e for e in ("spark",) if e in wanted]]
            unavailable.append(f"Hudi on Spark {here_version}: no Spark 4 bundle on Maven Central "
                               "(hudi-spark4.0-bundle_2.13, hudi-spark4-bundle_2.13: 404), so Hudi ran on pyspark "
                               "3.5 with its Spark 3.5 bundle and plain Spark 3.5 beside it; ours needs pyspark >= "
                               "4.1, so its \"/ ours\" is ~ (Hudi / plain Spark 3.5) / (ours / plain Spark "
                               f"{here_version}), a ratio of ratios across Spark versions.")
    if args.only_spark41:
        on_here, on_35 = [], []
    if args.only_spark35:
        on_here, on_41 = [], []
    if jars("iceberg") and on_41:
        unavailable.append("Iceberg on Spark " + here_version + ": no iceberg-spark-runtime-4.2 release; the 4.1 "
                           "runtime fails on 4.2 (IncompatibleClassChangeError: SparkView implements "
                           "org.apache.spark.sql.connector.catalog.View, a class in 4.2), so Iceberg ran on pyspark "
                           "4.1 with ours and plain Spark beside it for its ratios.")

    work = Path(args.work) / f"run-{int(time.time())}"
    work.mkdir(parents=True)
    machine = machine_info()
    started = time.monotonic()
    command = shlex.join(["benchmarks/bench_peers.py", *(argv if argv is not None else sys.argv[1:])])
    parts: dict[str, Any] = {"clustering": {}, "upsert": {}}
    ideals: dict[str, float] = {}
    results: list[Result] = []
    try:
        # the data, once, with this Spark (our lake tables read the same on 4.1); one session (one JVM) for all
        # this process runs: the peers' jars must be on it from the start
        prep = peer_session(on_here, work / "warehouse")
        try:
            warm_chunks = [bc.xy_chunk(n, 1000 + i) for i, n in enumerate(bc.split(bc.WARMUP_ROWS, 2))]
            warmup = prepare_clustering(prep, work, "warm", warm_chunks, files=8, boxes=bc.xy_boxes(1),
                                        rounds=1)
            if args.part in ("clustering", "all"):
                chunks = [bc.xy_chunk(n, i) for i, n in enumerate(bc.split(args.rows, args.input_files))]
                boxes = bc.xy_boxes(1)
                parts["clustering"]["clustering"] = prepare_clustering(prep, work, "xy", chunks, files=args.files,
                                                                       boxes=boxes, rounds=args.rounds)
                ideals["clustering"] = ideal_share(args.files, boxes)
                if args.skewed:
                    chunks = [skewed_chunk(n, i) for i, n in enumerate(bc.split(args.rows, args.input_files))]
                    boxes = skewed_boxes(chunks)
                    parts["clustering"]["skewed"] = prepare_clustering(prep, work, "skew", chunks, files=args.files,
                                                                       boxes=boxes, rounds=1)
                    ideals["skewed"] = ideal_share(args.files, boxes, chunks)
                del chunks
            if args.part in ("upsert", "all"):
                files = bdci.generate(work / "bdci", args.upsert_rows)
                warm_files = bdci.generate(work / "bdci-warm", 2000, seed=4)
                parts["upsert"] = {"files": [str(p) for p in files], "rows": args.upsert_rows,
                                   "warmup_files": [str(p) for p in warm_files],
                                   "styles": [s.strip() for s in args.styles.split(",") if s.strip()],
                                   "rounds": args.rounds, "threads": args.threads,
                                   "shuffle_partitions": args.upsert_shuffle_partitions}
            spec = {"work": str(work), "parts": parts, "warmup": warmup, "no_warmup": args.no_warmup}
            if on_here:
                results += run_engines(prep, {**spec, "engines": on_here})
        finally:
            prep.stop()  # before the 4.1 JVM starts: never two on 2 cores
        if on_41:
            child = {**spec, "engines": on_41, "results": str(work / "results-41.json")}
            (work / "spec-41.json").write_text(json.dumps(child))
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
            progress(f"[spark 4.1] {args.spark41_python} for {on_41}")
            done = subprocess.run([args.spark41_python, str(Path(__file__).resolve()), "--child",
                                   str(work / "spec-41.json")], env=env, check=False)
            if done.returncode == 0:
                results += [Result(**r) for r in json.loads((work / "results-41.json").read_text())]
            else:
                unavailable.append(f"the pyspark 4.1 part ({on_41}) exited with {done.returncode}; see stderr")
        if on_35:
            results += run_spark35(args.spark35_python, spec, on_35, parts, unavailable)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    header = [
        f"- command: `.venv/bin/python {command}` (after `benchmarks/peers_setup.sh`)",
        f"- date: {machine['date']} (UTC), took {(time.monotonic() - started) / 60:.1f} min; machine: "
        f"{machine['nproc']} cores, {machine['memory']}; load average {machine['load_average']} at the start, "
        f"{[round(x, 2) for x in os.getloadavg()]} at the end",
        f"- code: git {machine['git_revision']}; pyspark {here_version} here"
        + (f", {on_41} on the pyspark 4.1 venv" if on_41 else "")
        + (f", {on_35} on the pyspark 3.5 venv" if on_35 else "") + "; peers_setup.sh: "
        + "; ".join(f"{k} {v}" for k, v in status.items()),
        *([f"- clustering: {args.rows:,} rows in {args.input_files} input files -> {args.files} files, "
           f"{args.rounds} rounds alternating after an untimed warm-up of every way"
           + ("; skewed: the same shape, 1 round" if args.skewed else "")
           + "; spark.sql.shuffle.partitions 4; box-query share = mean % of files whose footer min/max meet a "
           "1% box (50 boxes; skewed: 10% of the rows' rank in x by 10% in y)"] if parts["clustering"] else []),
        *([f"- upsert: BDCI {args.upsert_rows * (bdci.BASE_FACTOR + bdci.FILES - 1):,} rows (base-0 "
           f"{args.upsert_rows * bdci.BASE_FACTOR:,} + 10 x {args.upsert_rows:,}) arriving in bench_upsert's order "
           f"(random.Random(3)), {args.rounds} rounds alternating after an untimed warm-up; each result compared "
           "with the oracle (plain Spark's one-shot merge): the hash of all rows, and on a mismatch the keys "
           "differing per column; spark.sql.shuffle.partitions "
           f"{args.upsert_shuffle_partitions} for every engine"] if parts["upsert"] else []),
        "- / ours and / plain Spark: ratios of medians on the same Spark version (clustering: ours of the same kind "
        "— Z-order to ZORDER, Hilbert/liquid to HILBERT, sort to LINEAR(x, y))",
    ]
    text = report(results, header, ideals, unavailable)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        progress(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
