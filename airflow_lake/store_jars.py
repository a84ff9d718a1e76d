"""`airflow-lake jars STORE`: the jars Spark needs to write and read tables on an object store, fetched from Maven
Central with `mvn` into the user's cache once, and printed as one comma-separated list for `--jars` / `spark.jars`.

    airflow-lake jars s3                      # hadoop-aws (+ the AWS SDK bundle) and spark-hadoop-cloud
    airflow-lake jars gcs | azure [--json]    # the GCS connector / hadoop-azure; --json adds the Spark settings
    airflow-lake jars s3 --class-path         # joined by ':' for spark.driver/executor.extraClassPath

Put them on the class path (or in `$SPARK_HOME/jars`) rather than `--jars`: `--jars` copies them (690 MB for S3)
into every application's temporary directory and to every executor, and a killed driver leaves its copy behind.

The pip package of pyspark has Hadoop's client but none of its store connectors. Each connector must be built for
the Hadoop version of the Spark that loads it, so the versions are read from the installed pyspark (its
`jars/hadoop-client-api-<version>.jar`) unless given. `spark-hadoop-cloud` holds Spark's binding to Hadoop's
"magic" S3A committer, which writes a task's files in place (multipart uploads completed at job commit) instead of
renaming them: S3 has no rename (S3A copies each file). Dependencies Spark already ships (any version) are left
out, so nothing on Spark's class path is shadowed.

The cache is `$XDG_CACHE_HOME/airflow-lake/jars` (else `~/.cache/...`), made 0700 and checked to be the user's:
never a predictable shared path. Fetches run under a lock; a complete fetch leaves a stamp listing its jars, so a
second call prints them at once.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# spark-hadoop-cloud by Spark's minor version: Maven Central has no 4.2.0 yet (checked 2026-11-29); the committer
# binding of 4.1.1 (two small classes over Hadoop's committer API) is tested with Spark 4.2.0's S3A writes.
CLOUD_COMMITTER = {"4.0": "4.0.1", "4.1": "4.1.1", "4.2": "4.1.1"}
GCS_CONNECTOR = "hadoop3-2.2.28"  # com.google.cloud.bigdataoss:gcs-connector, shaded (one jar)
# Spark settings of the committer that writes without renames (spark-hadoop-cloud + Hadoop's magic committer)
NO_RENAME_CONF = {
    "spark.sql.sources.commitProtocolClass": "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
    "spark.sql.parquet.output.committer.class": "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter",
    "spark.hadoop.fs.s3a.committer.name": "magic",
    "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
}


@dataclass(frozen=True)
class Artifact:
    coordinates: str  # group:artifact:version[:type:classifier], {hadoop} and {cloud} filled in
    transitive: bool  # with its runtime dependencies (less those Spark ships)


STORES: Mapping[str, tuple[Artifact, ...]] = {
    "s3": (Artifact("org.apache.hadoop:hadoop-aws:{hadoop}", True),
           Artifact("org.apache.spark:spark-hadoop-cloud_2.13:{cloud}", False)),
    "gcs": (Artifact(f"com.google.cloud.bigdataoss:gcs-connector:{GCS_CONNECTOR}:jar:shaded", False),),
    "azure": (Artifact("org.apache.hadoop:hadoop-azure:{hadoop}", True),),
}


class JarsError(Exception):
    """The jars could not be fetched; the message says why and what to do."""


def cache_root() -> Path:
    """The user's cache directory for jars (0700, the user's own; refused otherwise)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-lake" / "jars"
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = base.stat()
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o022:
        raise JarsError(f"{base} is not this user's private directory (owner {info.st_uid}, mode "
                        f"{stat.S_IMODE(info.st_mode):o}). Fix: remove it, or set XDG_CACHE_HOME to a directory of "
                        "your own.")
    return base


def spark_jars_dir(spark_home: str | None = None) -> Path:
    """The jars directory of `spark_home`, else of $SPARK_HOME, else of the installed pyspark (not imported)."""
    home = spark_home or os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or not spec.submodule_search_locations:
            raise JarsError("pyspark is not installed and SPARK_HOME is not set. Fix: pip install pyspark, or give "
                            "--spark-home.")
        home = next(iter(spec.submodule_search_locations))
    jars = Path(home) / "jars"
    if not jars.is_dir():
        raise JarsError(f"{jars} is not a directory: {home} is not a Spark installation. Fix: give --spark-home.")
    return jars


def versions(jars: Path) -> tuple[str, str]:
    """(Hadoop's version, Spark's version) of the Spark whose jars are in `jars`."""
    def found(pattern: str, what: str) -> str:
        for name in sorted(os.listdir(jars)):
            match = re.fullmatch(pattern, name)
            if match:
                return match.group(1)
        raise JarsError(f"no {what} jar in {jars}. Fix: give --hadoop-version and --spark-version.")
    return (found(r"hadoop-client-api-(\d[\w.-]*)\.jar", "hadoop-client-api"),
            found(r"spark-core_2\.13-(\d[\w.-]*)\.jar", "spark-core_2.13"))


def cloud_version(spark_version: str) -> str:
    """The spark-hadoop-cloud version for a Spark version (its minor version's entry in CLOUD_COMMITTER)."""
    minor = ".".join(spark_version.split(".")[:2])
    if minor not in CLOUD_COMMITTER:
        raise JarsError(f"no spark-hadoop-cloud known for Spark {spark_version} (known: "
                        f"{', '.join(sorted(CLOUD_COMMITTER))}). Fix: give --cloud-version.")
    return CLOUD_COMMITTER[minor]


def fetch(store: str, *, hadoop: str, cloud: str, spark_jars: Path, root: Path | None = None,
          mvn: str | None = None) -> list[Path]:
    """The jars of `store` (fetched once into the cache), in a stable order."""
    if store not in STORES:
        raise JarsError(f"unknown store {store!r}. Fix: give one of {', '.join(STORES)}.")
    artifacts = [a.coordinates.format(hadoop=hadoop, cloud=cloud) for a in STORES[store]]
    base = root or cache_root()
    target = base / f"{store}-hadoop-{hadoop}" if store != "s3" else base / f"s3-hadoop-{hadoop}-cloud-{cloud}"
    stamp = target / ".complete.json"
    with _locked(base / f".{target.name}.lock"):
        if stamp.exists():
            listed = json.loads(stamp.read_text())
            paths = [target / name for name in listed["jars"]]
            if listed.get("artifacts") == artifacts and all(p.exists() for p in paths):
                return paths
        binary = mvn or shutil.which("mvn")
        if binary is None:
            raise JarsError("Maven (mvn) is not installed. Fix: install it (Debian: apt-get install maven), or "
                            f"download {', '.join(artifacts)} from Maven Central yourself.")
        partial = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=base))
        try:
            for artifact in STORES[store]:
                _copy(binary, artifact.coordinates.format(hadoop=hadoop, cloud=cloud), artifact.transitive, partial)
            shipped = {_artifact_name(n) for n in os.listdir(spark_jars) if n.endswith(".jar")}
            for name in os.listdir(partial):
                if name.endswith(".jar") and _artifact_name(name) in shipped:
                    (partial / name).unlink()  # Spark has it already (its own version wins)
            names = sorted(n for n in os.listdir(partial) if n.endswith(".jar"))
            (partial / ".complete.json").write_text(json.dumps({"artifacts": artifacts, "jars": names}))
            if target.exists():
                shutil.rmtree(target)
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        return [target / name for name in names]


def _copy(mvn: str, coordinates: str, transitive: bool, out: Path) -> None:
    """Copy one artifact (and, `transitive`, its runtime dependencies) into `out` with Maven's dependency plugin."""
    if transitive:
        # (imported here: xml.sax.saxutils pulls in urllib.request and http.client, which `airflow-lake --help`,
        # whose parser this module helps build, does not need)
        from xml.sax.saxutils import escape

        group, artifact, version = coordinates.split(":")[:3]
        with tempfile.TemporaryDirectory() as work:
            pom = Path(work) / "pom.xml"
            pom.write_text(
                '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
                "<groupId>airflow-lake</groupId><artifactId>store-jars</artifactId><version>1</version>"
                "<packaging>pom</packaging><dependencies><dependency>"
                f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
                f"<version>{escape(version)}</version></dependency></dependencies></project>")
            _mvn([mvn, "-q", "-B", "-f", str(pom), f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
                  f"-DoutputDirectory={out}"], coordinates)
    else:
        _mvn([mvn, "-q", "-B", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={coordinates}", f"-DoutputDirectory={out}"],
             coordinates)


def _mvn(command: Sequence[str], coordinates: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 (mvn, fixed arguments)
    if done.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
        raise JarsError(f"Maven could not fetch {coordinates} (exit {done.returncode}): "
                        f"{output.strip()[-1500:]}\nFix: check that Maven Central (or your mirror in "
                        "~/.m2/settings.xml) is reachable.")


def _artifact_name(jar: str) -> str:
    """`bundle-2.35.4.jar` -> `bundle`: the name without its version (the first `-<digit>` on)."""
    return re.split(r"-\d", jar[:-4], maxsplit=1)[0]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def spark_conf(store: str) -> dict[str, str]:
    """Spark settings to go with the jars (beyond credentials and endpoint): the no-rename committer for S3."""
    return dict(NO_RENAME_CONF) if store == "s3" else {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", choices=sorted(STORES), help="the object store")
    parser.add_argument("--spark-home", help="the Spark to fetch for (default: $SPARK_HOME, else pyspark's)")
    parser.add_argument("--hadoop-version", help="Hadoop's version (default: that of the Spark's jars)")
    parser.add_argument("--cloud-version", help="spark-hadoop-cloud's version (default: by Spark's version)")
    parser.add_argument("--class-path", action="store_true", help="print them joined by ':' for a class path "
                        "(spark.driver.extraClassPath, spark.executor.extraClassPath) instead of by ','")
    parser.add_argument("--json", action="store_true", help="print the jars and the Spark settings as JSON")


def run(args: argparse.Namespace) -> dict[str, object]:
    """Fetch (or find) the jars of `args.store`; the result the CLI prints."""
    jars_dir = spark_jars_dir(args.spark_home)
    hadoop, spark = versions(jars_dir) if not (args.hadoop_version and args.cloud_version) else ("", "")
    hadoop = args.hadoop_version or hadoop
    cloud = args.cloud_version or cloud_version(spark)
    paths = fetch(args.store, hadoop=hadoop, cloud=cloud, spark_jars=jars_dir)
    return {"store": args.store, "hadoop_version": hadoop, "jars": [str(p) for p in paths],
            "spark_jars": ",".join(str(p) for p in paths), "class_path": os.pathsep.join(str(p) for p in paths),
            "spark_conf": spark_conf(args.store)}
