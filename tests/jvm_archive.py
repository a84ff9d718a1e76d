"""A class-data sharing (CDS) archive for the Spark JVMs the tests start as processes.

Most of a tiny spark-submit job's CPU goes to the JVM loading and verifying Spark's classes. A dynamic CDS
archive (Java 13+: `-XX:ArchiveClassesAtExit` once, `-XX:SharedArchiveFile` after) maps them ready-made:
measured on a 2-core CI machine, a one-file `write` through spark-submit 8.9-10.5 CPU-s -> 5.9-6.5.

The archive is built once per machine by one training job (below) into the user's cache directory
(`$XDG_CACHE_HOME/airflow-lake/jvm`, else `~/.cache/airflow-lake/jvm`, mode 0700 and checked to be the user's:
never a predictable shared path), named by a key of the JDK, the Spark jars (versions and their directory:
the archive records the class path) and the JVM flags. `.ci/setup` builds it (`python -m tests.jvm_archive`);
otherwise the first pytest process does, under a lock, while the others wait. A JVM whose class path does not
start with the archive's (spark-class's launcher, other tools) ignores the archive: `-Xlog:cds=off` keeps its
warning off stdout, where spark-class would pass it on as output.

    python -m tests.jvm_archive            # build (if missing) and print the archive's path
    AIRFLOW_LAKE_TEST_CDS=0 pytest ...     # run the tests without it
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Spark JVMs the tests start as processes (spark-submit jobs, Airflow tasks, cluster daemons, the Connect server)
# live for seconds on small data: compiling with C1 only and a serial GC starts them ~25% faster. The suite's own
# session keeps the JVM defaults (tests/conftest.py). Not set for users: long jobs want the optimising compiler.
SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# A JVM whose class path does not start with the archive's says so on stdout: spark-class passes its launcher's
# stdout on, so the message would land in the job's output.
ARCHIVE_LOGGING = "-Xlog:cds=off,cds+dynamic=off"
TRAIN_TIMEOUT = 900


def spark_jars() -> Path | None:
    """pyspark's jars directory (without importing pyspark)."""
    found = importlib.util.find_spec("pyspark")
    if found is None or not found.submodule_search_locations:
        return None
    jars = Path(next(iter(found.submodule_search_locations))) / "jars"
    return jars if jars.is_dir() else None


def java_home() -> Path | None:
    """The JDK spark-class runs: $JAVA_HOME, else the `java` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def archive_key(jvm_flags: str) -> str | None:
    """What the archive depends on: the JDK build, the jars (names, sizes, times, their directory), the flags."""
    jars, home = spark_jars(), java_home()
    if jars is None or home is None:
        return None
    release = home / "release"
    libjvm = next(iter(home.glob("lib/server/libjvm.so")), None)
    parts = {
        "jdk": str(home), "release": release.read_text(errors="replace") if release.exists() else "",
        "libjvm": [libjvm.stat().st_size, libjvm.stat().st_mtime_ns] if libjvm else None,
        "jars_dir": str(jars.resolve()),
        "jars": sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in jars.glob("*.jar")),
        "flags": jvm_flags,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def cache_dir() -> Path | None:
    """The user's own cache directory for archives (created 0700); None when it is not safely ours."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "airflow-lake" / "jvm"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() \
            or info.st_mode & 0o022:
        return None  # not a directory only we can write: no archive (a planted one would run in every JVM)
    return path


def jvm_options(jvm_flags: str = SHORT_JVM) -> str:
    """`jvm_flags` with the archive's options when there is (or can be built) an archive for them."""
    if os.environ.get("AIRFLOW_LAKE_TEST_CDS", "1") == "0":
        return jvm_flags
    path = archive(jvm_flags)
    return f"{jvm_flags} -XX:SharedArchiveFile={path} {ARCHIVE_LOGGING}" if path else jvm_flags


def archive(jvm_flags: str, build: bool = True) -> Path | None:
    """The archive for `jvm_flags`, built first if missing (and `build`); None if it cannot be had."""
    key, directory = archive_key(jvm_flags), cache_dir()
    if key is None or directory is None:
        return None
    path = directory / f"spark-{key}.jsa"
    if path.exists() or not build:
        return path if path.exists() else None
    with open(directory / f"spark-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait here and find it built
        if not path.exists():
            _build(path, jvm_flags)
    return path if path.exists() else None


def _build(path: Path, jvm_flags: str) -> None:
    started = time.monotonic()
    print(f"jvm_archive: building the JVM class-data archive once: {path}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix="build-") as work:
        dump = Path(work, "archive.jsa")
        spark_submit = Path(sys.executable).with_name("spark-submit")
        command = [str(spark_submit) if spark_submit.exists() else "spark-submit", "--master", "local[2]",
                   "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
                   # the driver JVM only (JAVA_TOOL_OPTIONS would make spark-class's launcher dump too)
                   "--conf", f"spark.driver.extraJavaOptions=-XX:ArchiveClassesAtExit={dump}",
                   __file__, "--train", str(Path(work, "train"))]
        repo = str(Path(__file__).resolve().parents[1])  # this checkout's airflow_lake, from the job's own cwd
        env = {**os.environ, "JAVA_TOOL_OPTIONS": jvm_flags, "PYSPARK_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)}
        log = Path(work, "train.log")
        with open(log, "wb") as out:
            try:
                code = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=TRAIN_TIMEOUT,
                                      check=False, cwd=work).returncode  # (Spark's spark-warehouse/ lands there)
            except subprocess.TimeoutExpired:
                code = -1
        if code != 0 or not dump.exists():
            print(f"jvm_archive: the training job failed ({code}); the tests run without the archive:\n"
                  f"{log.read_text(errors='replace')[-3000:]}", file=sys.stderr, flush=True)
            return
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("jvm_archive:"):
                print(line, file=sys.stderr, flush=True)  # a training step that failed
        os.chmod(dump, 0o400)
        os.replace(dump, path)  # whole or absent: readers never see a half-written archive
    print(f"jvm_archive: built in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def _train(work: Path) -> None:
    """Under spark-submit: what the tests' jobs do, small, so their classes are loaded when the JVM dumps them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_lake.datagen import bdci
    from airflow_lake.jobs.runner import run
    from airflow_lake.jobs.session import build_session
    from airflow_lake.lake import LakeTable

    spark = build_session("airflow-lake jvm archive training")
    work.mkdir(parents=True)
    events, users, daily = str(work / "events"), str(work / "users"), str(work / "daily")
    ids = list(range(400))
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array([i % 97 for i in ids], pa.int64()),
                             "y": [float(i % 13) for i in ids], "dt": ["d1" if i % 3 else "d2" for i in ids]}),
                   work / "events.parquet")
    batches = bdci.generate(work / "bdci", 200, keys=150)
    steps: list[tuple[str, dict[str, Any]]] = [
        ("create_table", {"table": events, "schema": "id BIGINT, x BIGINT, y DOUBLE, dt STRING",
                          "partition_by": ["dt"], "bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]}}),
        ("write", {"table": events, "source": {"path": str(work / "events.parquet")}}),
        ("write", {"table": events, "mode": "overwrite", "partitions": [{"dt": "d2"}], "source": {
            "query": "SELECT id, x, y + 1 AS y, dt FROM e WHERE dt = 'd2'", "tables": {"e": events}}}),
        ("create_table", {"table": daily, "schema": "id BIGINT, total DOUBLE, n BIGINT",
                          "bucket": {"columns": ["id"], "count": 4}}),
        ("write", {"table": daily, "source": {
            "query": "SELECT id, sum(y) AS total, count(*) AS n FROM e GROUP BY id", "tables": {"e": events}}}),
        ("schedule_clustering", {"table": daily, "layout": "ZORDER", "sort_columns": ["n", "total"],
                                 "min_commits": 1, "small_file_limit_bytes": 10**12, "max_bytes_per_group": 10**12}),
        ("execute_clustering", {"table": daily}),
        ("delete", {"table": events, "where": "x = 3"}),
        ("create_table", {"table": users, **bdci.table_spec(4)}),
        *[("versioned_upsert", {"table": users, "source": {"path": str(batches[v])}, "version": v}) for v in (1, 0)],
        ("compact_upserts", {"table": users}),
        ("clean", {"table": events}),
    ]
    for operation, spec in steps:
        try:
            run(spark, operation, spec)
        except Exception as err:  # a step the next version changed: the archive is still useful without it
            print(f"jvm_archive: training step {operation} failed: {err}", file=sys.stderr)
    for table in (events, users):
        LakeTable.open(table).read(spark).collect()
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train"]:
        _train(Path(sys.argv[2]))
    else:
        built = archive(SHORT_JVM)
        print(built if built else "jvm_archive: no archive (see above)")
