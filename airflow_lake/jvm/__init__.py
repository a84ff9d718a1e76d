"""Our JVM code (`CurveWords.java`: clustering's curve words as a Java UDF), built from source into a jar in the
user's cache and put on Spark's class path: the job's session (`jobs/session.py`, `spark.jars`), the hook's
spark-submit (`--jars`) and the Connect server (`airflow-lake connect-server`).

    python -m airflow_lake.jvm        # build the jar now (the set-up does), print its path

The jar is built with `javac` against the jars of the installed pyspark (or $SPARK_HOME) and named by the hash of
the source and that Spark's version, so a new release or another Spark builds its own; it is never committed.
Where no `javac` is found (a JRE only), nothing is built and clustering computes the curve words in Spark's
Python workers instead (the same words; the rows' sort columns then make a round trip to Python).
The cache is `store_jars.cache_root()` (the user's own 0700 directory, never a shared temp path); a build goes to a
private temporary directory inside it and is renamed into place, so a reader never sees half a jar.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from airflow_lake import store_jars

log = logging.getLogger(__name__)
SOURCE = Path(__file__).with_name("CurveWords.java")
DISABLE_ENV = "AIRFLOW_LAKE_JVM_CURVES"  # "0": never build nor use the jar (the curve words in Python)


class BuildError(Exception):
    """The jar could not be built; the message says why."""


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _spark_version(jars: Path) -> str:
    found = sorted(jars.glob("spark-core_*.jar"))
    return found[0].stem.split("-", 2)[-1] if found else "unknown"


def jar_path(jars: Path) -> Path:
    """Where the jar of this source for the Spark of `jars` is (or would be) in the cache."""
    digest = hashlib.sha256(SOURCE.read_bytes() + _spark_version(jars).encode()).hexdigest()[:16]
    return store_jars.cache_root() / f"airflow-lake-jvm-{digest}.jar"


def curve_jar(*, build: bool = True, spark_home: str | None = None) -> Path | None:
    """The jar's path, built first when missing and `build` (None: disabled, or it cannot be built here; the
    reason is logged once at INFO)."""
    if not enabled():
        return None
    try:
        jars = store_jars.spark_jars_dir(spark_home)
        path = jar_path(jars)
        if path.is_file() or not build:
            return path if path.is_file() else None
        return build_jar(path, jars)
    except (BuildError, store_jars.JarsError, OSError) as err:
        log.info("Clustering computes curve words in Python workers: %s", err)
        return None


def build_jar(path: Path, spark_jars: Path) -> Path:
    """Compile `CurveWords.java` against `spark_jars` into the jar at `path` (atomically)."""
    javac = shutil.which("javac")
    if javac is None:
        raise BuildError("no javac on PATH to build airflow-lake's JVM code (install a JDK 17, e.g. openjdk-17-jdk)")
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as work:
        classes = Path(work) / "classes"
        command = [javac, "--release", "17", "-nowarn", "-cp", str(spark_jars / "*"), "-d", str(classes), str(SOURCE)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
        if result.returncode != 0:
            raise BuildError(f"javac failed ({result.returncode}): {(result.stderr or result.stdout)[-2000:]}")
        staged = Path(work) / path.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: airflow-lake\n\n")
            for file in sorted(classes.rglob("*.class")):
                jar.write(file, file.relative_to(classes).as_posix())
        os.replace(staged, path)
    log.info("Built %s", path)
    return path


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # (curve_jar logs why it built nothing)
    path = curve_jar()
    if path is None:
        print("airflow-lake: the JVM code was not built (see above)")
        return 1
    print(path)
    return 0


__all__ = ["DISABLE_ENV", "BuildError", "build_jar", "curve_jar", "enabled", "jar_path"]
