"""Spark without airflow-lake: read a table as another team's plain Spark would, with Delta Lake's or Iceberg's
jars, in a JVM of its own (never the test process's session, which has our package and its configuration).

Delta is read by our own pyspark (4.2) with Delta 4.4.0's jars. Iceberg publishes no Spark 4.2 runtime yet, and its
4.1 runtime does not load in Spark 4.2, so Iceberg is read by a plain pyspark 4.1 in a venv of its own, with Iceberg's
4.1 runtime and an Iceberg JDBC catalog on the SQLite file that pyiceberg's `SqlCatalog` writes (the two catalogs
share their tables' layout). `.ci/fetch_jars` fetches all of it into the user's cache (versions and the reasons:
docs/design/open-tables-engines.md).

Each call starts one JVM (5-15 s): read several tables and versions in one call where a test can (`read_deltas`,
`read_icebergs`, `run_delta`). Rows come back as dicts (JSON: dates, timestamps, decimals and bytes as text; see
foreign_spark_job.py). Tests call `require_foreign_spark()` first: without the jars it skips, and fails under CI=true
(where .ci/test fetches them), so a CI run never passes by skipping the proof.

    rows = read_delta("/tmp/t")                        # latest version
    old = read_delta("/tmp/t", version=0)              # VERSION AS OF 0
    rows = read_iceberg("sqlite:////tmp/c.db", "file:///tmp/wh", "ns.t", "lake")
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.engines.fetched import require, run_fetch

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / ".ci" / "fetch_jars"
JOB = Path(__file__).with_name("foreign_spark_job.py")
FETCH_TIMEOUT = 600  # a cold fetch takes about 2 minutes
JOB_TIMEOUT = 600
STDERR_TAIL = 4000


class ForeignSparkError(RuntimeError):
    """The foreign Spark failed: the process, or a read in it (the message carries the JVM's error)."""


@dataclass(frozen=True)
class DeltaRead:
    """`spark.read.format("delta").load(table_dir)`, at `version` (`versionAsOf`) when given."""

    table_dir: str
    version: int | None = None


@dataclass(frozen=True)
class DeltaSql:
    """A SQL statement in the Delta JVM (e.g. "DELETE FROM delta.`/t` WHERE ..."): rows, or the error it raised."""

    sql: str


@dataclass(frozen=True)
class IcebergRead:
    """A table of an Iceberg catalog that pyiceberg's `SqlCatalog(catalog_name, uri=catalog_uri, warehouse=...)`
    writes, read through Iceberg's SparkCatalog + JdbcCatalog; at `snapshot_id` when given."""

    catalog_uri: str
    warehouse: str
    identifier: str
    catalog_name: str
    snapshot_id: int | None = None


@dataclass(frozen=True)
class SqlResult:
    """What one `DeltaSql` gave: its rows, or the JVM's error line (e.g. "...Exception: [DELTA_...] ...")."""

    rows: list[dict[str, Any]] | None
    error: str | None


@functools.cache
def _fetched() -> tuple[Path | None, str]:
    """(the jars' directory, "") once .ci/fetch_jars succeeded; (None, why) if it could not."""
    return run_fetch(FETCH, FETCH_TIMEOUT)


def jars_dir() -> Path | None:
    """The directory .ci/fetch_jars filled (fetching first, once per process); None when it could not."""
    return _fetched()[0]


def jars_available() -> bool:
    """Whether the foreign Sparks can run here (the jars and the Iceberg pyspark fetched)."""
    return jars_dir() is not None


def unavailable_reason() -> str:
    """Why the foreign Sparks cannot run ("" when they can)."""
    return _fetched()[1]


def require_foreign_spark() -> Path:
    """The jars' directory; else skip the test, or fail it under CI=true (CI fetches them: a skip would hide it)."""
    return require(jars_dir(), unavailable_reason(), "Spark without airflow-lake")


def jdbc_url(catalog_uri: str) -> str:
    """The JDBC URL of the SQLite file a SQLAlchemy URL (pyiceberg's SqlCatalog `uri`) names."""
    scheme, sep, rest = catalog_uri.partition("://")
    if not sep or scheme.split("+")[0] != "sqlite" or not rest.startswith("/") or rest in ("/", "/:memory:"):
        raise ValueError(f"only a SQLite file catalog (sqlite:////absolute/path.db) is supported, not {catalog_uri!r}")
    return "jdbc:sqlite:" + rest[1:].split("?")[0]  # sqlite:////abs -> /abs, sqlite:///rel -> rel


# the timings and Spark version of the last call (session_seconds, total_seconds, spark_version): for the docs
last_run: dict[str, Any] = {}


def _run(python: str, jars: Sequence[Path], spec: dict[str, Any]) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "PYTHONPATH")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    with tempfile.TemporaryDirectory(prefix="foreign-spark-") as work:
        request = Path(work, "request.json")
        request.write_text(json.dumps({**spec, "jars": [str(jar) for jar in jars]}))
        try:
            done = subprocess.run([python, str(JOB), str(request)], capture_output=True, text=True, env=env,
                                  cwd=work, timeout=JOB_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as err:
            stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else err.stderr or ""
            raise ForeignSparkError(f"the foreign Spark took over {JOB_TIMEOUT} s:\n{stderr[-STDERR_TAIL:]}") from err
    marked = [line for line in done.stdout.splitlines() if line.startswith("FOREIGN_SPARK_RESULT ")]
    if done.returncode != 0 or not marked:
        raise ForeignSparkError(f"the foreign Spark failed ({done.returncode}):\n{done.stderr[-STDERR_TAIL:]}")
    answer = json.loads(marked[-1].split(" ", 1)[1])
    last_run.update(answer)
    results: list[dict[str, Any]] = answer["results"]
    return results


def _rows(result: dict[str, Any], what: str) -> list[dict[str, Any]]:
    if "error" in result:
        raise ForeignSparkError(f"{what}: {result['error']}")
    rows: list[dict[str, Any]] = result["rows"]
    return rows


def run_delta(requests: Sequence[DeltaRead | DeltaSql]) -> list[list[dict[str, Any]] | SqlResult]:
    """All `requests`, in order, in ONE JVM (our pyspark with Delta's jars): a DeltaRead's rows (its failure
    raises ForeignSparkError), a DeltaSql's SqlResult (its failure is returned: a refusal is what tests look for)."""
    root = require_foreign_spark()
    specs = [{"kind": "delta", "path": r.table_dir, "version": r.version} if isinstance(r, DeltaRead)
             else {"kind": "sql", "sql": r.sql} for r in requests]
    results = _run(sys.executable, sorted((root / "delta").glob("*.jar")), {"delta": True, "requests": specs})
    answers: list[list[dict[str, Any]] | SqlResult] = []
    for request, result in zip(requests, results, strict=True):
        if isinstance(request, DeltaRead):
            answers.append(_rows(result, f"reading {request}"))
        else:
            answers.append(SqlResult(rows=result.get("rows"), error=result.get("error")))
    return answers


def read_deltas(requests: Sequence[DeltaRead]) -> list[list[dict[str, Any]]]:
    """The rows of each Delta read, all in one JVM."""
    return [rows for rows in run_delta(requests) if isinstance(rows, list)]


def read_delta(table_dir: str, version: int | None = None) -> list[dict[str, Any]]:
    """The rows a plain Spark with Delta's jars reads from `table_dir` (at `version` when given)."""
    return read_deltas([DeltaRead(table_dir, version)])[0]


def read_icebergs(requests: Sequence[IcebergRead]) -> list[list[dict[str, Any]]]:
    """The rows of each Iceberg read, all in one JVM (a plain pyspark 4.1 with Iceberg's runtime)."""
    root = require_foreign_spark()
    catalogs: dict[str, dict[str, str]] = {}
    specs = []
    for request in requests:
        catalog = {"uri": jdbc_url(request.catalog_uri), "warehouse": request.warehouse}
        if catalogs.setdefault(request.catalog_name, catalog) != catalog:
            raise ValueError(f"catalog {request.catalog_name!r} is given two places in one call: {catalogs} {catalog}")
        table = ".".join(f"`{part}`" for part in (request.catalog_name, *request.identifier.split(".")))
        specs.append({"kind": "iceberg", "table": table, "snapshot_id": request.snapshot_id})
    python = root / "iceberg-pyspark" / "bin" / "python"  # (.ci/fetch_jars: ICEBERG_SPARK)
    results = _run(str(python), sorted((root / "iceberg").glob("*.jar")), {"catalogs": catalogs, "requests": specs})
    return [_rows(result, f"reading {request}") for request, result in zip(requests, results, strict=True)]


def read_iceberg(catalog_uri: str, warehouse: str, identifier: str, catalog_name: str,
                 snapshot_id: int | None = None) -> list[dict[str, Any]]:
    """The rows a plain Spark with Iceberg's runtime reads from `identifier` in the pyiceberg SQL catalog at
    `catalog_uri` (a SQLAlchemy sqlite URL) named `catalog_name`, at `snapshot_id` when given."""
    return read_icebergs([IcebergRead(catalog_uri, warehouse, identifier, catalog_name, snapshot_id)])[0]
