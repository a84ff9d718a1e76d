"""Trino reading our published tables: a single-node Trino server (476, on Java 25) on 127.0.0.1, started by the tests
as a process of their own and queried through its HTTP protocol (POST /v1/statement, then follow `nextUri`; the
Trino Python client is not needed for that).

`.ci/fetch_trino` puts the server (with only its Delta Lake and Iceberg connectors, and SQLite's JDBC driver) in the
user's cache (sizes, times and the reasons: docs/design/open-tables-engines.md, "Trino"). The server starts with no
catalog; a test adds them with `CREATE CATALOG` (dynamic catalogs), so one server serves every test of a module:

    with TrinoServer.start(work_dir) as trino:
        trino.add_delta_catalog("delta", metastore_dir)
        trino.execute("CALL delta.system.register_table(...)")
        columns, rows = trino.query("SELECT * FROM delta.s.t FOR VERSION AS OF 3")

Tests call `require_trino()` first: without the server it skips, and fails under CI=true (where .ci/test fetches
it), so a CI run never passes by skipping the proof. Rows come as Trino's JSON: DATE as 'YYYY-MM-DD' text.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tests.engines.fetched import require, run_fetch

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / ".ci" / "fetch_trino"
FETCH_TIMEOUT = 900  # a cold fetch is an 820 MB download (22 s here) and its unpacking
START_TIMEOUT = 180  # the server starts in 7-8 s on an idle machine; far more when the 2 cores are busy
QUERY_TIMEOUT = 120
STOP_TIMEOUT = 30
STDERR_TAIL = 4000
JAVA_HOME = os.environ.get("TRINO_JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64")  # .ci/fetch_trino's rule
# small heap, serial GC, C1 only: a server that reads a few small tables starts sooner and takes one core at most
JVM_OPTIONS = ("-Xmx1G", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
               "-Djdk.attach.allowAttachSelf=true")
USER = "airflow-lake-tests"


class TrinoError(RuntimeError):
    """The Trino server failed to start, or a statement failed (the message carries Trino's error)."""


@functools.cache
def _fetched() -> tuple[Path | None, str]:
    """(the server's directory, "") once .ci/fetch_trino succeeded; (None, why) if it could not."""
    server, why = run_fetch(FETCH, FETCH_TIMEOUT)
    java = Path(JAVA_HOME, "bin", "java")
    if server is not None and not java.exists():  # (fetched before, on a machine that had it)
        return None, f"Trino needs Java 24 or newer: no {java} (set TRINO_JAVA_HOME)"
    return server, why


def require_trino() -> Path:
    """The server's directory; else skip the test, or fail it under CI=true (CI fetches it: a skip would hide it)."""
    return require(*_fetched(), "Trino")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class TrinoServer:
    """One Trino server process on 127.0.0.1 (coordinator and worker in one), catalogs added at run time."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path, log_file: IO[bytes]) -> None:
        self.process = process
        self.port = port
        self.log = log
        self._log_file = log_file
        self.start_seconds = 0.0

    @classmethod
    @contextmanager
    def start(cls, work_dir: Path, server_dir: Path | None = None) -> Iterator[TrinoServer]:
        """A server whose configuration and data live in `work_dir`, stopped (killed if it must be) on exit."""
        install = server_dir or require_trino()
        etc, data = work_dir / "etc", work_dir / "data"
        etc.mkdir(parents=True)
        data.mkdir()
        port = _free_port()
        (etc / "config.properties").write_text("\n".join([
            "coordinator=true", "node-scheduler.include-coordinator=true",
            f"http-server.http.port={port}", f"discovery.uri=http://127.0.0.1:{port}",
            "catalog.management=dynamic",  # CREATE CATALOG: one server for every test's own catalogs
            "query.max-memory=256MB", "query.max-memory-per-node=256MB", ""]))
        properties = {"node.environment": "test", "node.id": "airflow-lake-test", "node.data-dir": str(data),
                      "node.bind-ip": "127.0.0.1", "node.internal-address": "127.0.0.1",
                      "config": str(etc / "config.properties"), "catalog.config-dir": str(etc / "catalog"),
                      "plugin.dir": str(install / "plugin")}
        (etc / "catalog").mkdir()
        command = [str(Path(JAVA_HOME, "bin", "java")), "-cp", f"{install}/lib/*", *JVM_OPTIONS,
                   *(f"-D{key}={value}" for key, value in properties.items()), "io.trino.server.TrinoServer"]
        # the tests' JVM options (tests/jvm_archive.py: a class-data archive of Java 17) are not for this JVM
        env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "CLASSPATH", "JAVA_HOME")}
        log = work_dir / "server.log"
        log_file = log.open("wb")
        began = time.monotonic()
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=work_dir, env=env, start_new_session=True)
        server = cls(process, port, log, log_file)
        try:
            server._await_started()
            server.start_seconds = time.monotonic() - began
            yield server
        finally:
            server.stop()

    def _await_started(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TrinoError(f"Trino exited ({self.process.returncode}) while starting:\n{self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/info", timeout=5) as answer:
                    if not json.load(answer).get("starting", True):
                        return
            except (OSError, ValueError):
                pass  # not listening yet
            time.sleep(0.5)  # polling a process of our own: there is no event to await
        raise TrinoError(f"Trino did not start in {START_TIMEOUT} s:\n{self._tail()}")

    def _tail(self) -> str:
        self._log_file.flush()
        return self.log.read_text(errors="replace")[-STDERR_TAIL:]

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it has not exited in STOP_TIMEOUT seconds."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)
        self._log_file.close()

    def _call(self, request: urllib.request.Request) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT) as answer:
                result: dict[str, Any] = json.load(answer)
                return result
        except urllib.error.HTTPError as err:
            raise TrinoError(f"Trino answered {err.code}: {err.read().decode(errors='replace')}") from err

    def query(self, sql: str) -> tuple[list[str], list[list[Any]]]:
        """The column names and rows of one statement; its failure raises TrinoError with Trino's message."""
        headers = {"X-Trino-User": USER}
        result = self._call(urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/statement", data=sql.encode(),
                                                   headers=headers, method="POST"))
        columns: list[str] = []
        rows: list[list[Any]] = []
        while True:
            if "error" in result:
                error = result["error"]
                raise TrinoError(f"{error.get('errorName')}: {error.get('message')} (in: {sql})")
            if not columns and "columns" in result:
                columns = [column["name"] for column in result["columns"]]
            rows.extend(result.get("data", []))
            next_uri = result.get("nextUri")
            if next_uri is None:
                return columns, rows
            result = self._call(urllib.request.Request(next_uri, headers=headers))

    def execute(self, sql: str) -> None:
        """Run one statement whose rows do not matter (DDL, CALL)."""
        self.query(sql)

    def records(self, sql: str) -> list[dict[str, Any]]:
        """The rows of one statement as dicts by column name."""
        columns, rows = self.query(sql)
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def add_catalog(self, name: str, connector: str, properties: dict[str, str]) -> None:
        """CREATE CATALOG `name` with `connector` and its `properties`."""
        settings = ", ".join(f'"{key}" = {_quote(value)}' for key, value in properties.items())
        self.execute(f'CREATE CATALOG "{name}" USING {connector} WITH ({settings})')

    def add_delta_catalog(self, name: str, metastore_dir: Path) -> None:
        """A Delta Lake catalog over local files, its table names in a file metastore in `metastore_dir`; tables
        are added with `register_delta_table`."""
        metastore_dir.mkdir(parents=True, exist_ok=True)
        self.add_catalog(name, "delta_lake", {
            "hive.metastore": "file", "hive.metastore.catalog.dir": metastore_dir.as_uri(),
            "fs.native-local.enabled": "true", "local.location": "/",
            "delta.register-table-procedure.enabled": "true"})

    def register_delta_table(self, catalog: str, schema: str, table: str, location: str) -> None:
        """Name the Delta table at `location` (its `_delta_log/` is read, nothing is written there)."""
        self.execute(f'CREATE SCHEMA IF NOT EXISTS "{catalog}"."{schema}"')
        self.execute(f"CALL \"{catalog}\".system.register_table(schema_name => {_quote(schema)}, "
                     f"table_name => {_quote(table)}, table_location => {_quote(location)})")

    def add_iceberg_jdbc_catalog(self, name: str, sqlite_file: Path, catalog_name: str, warehouse: str) -> None:
        """An Iceberg catalog reading the SQLite file that pyiceberg's `SqlCatalog(catalog_name, ...)` writes
        (Iceberg's JDBC catalog: the same tables; SQLite's driver is in the connector's directory)."""
        self.add_catalog(name, "iceberg", {
            "iceberg.catalog.type": "jdbc", "iceberg.jdbc-catalog.driver-class": "org.sqlite.JDBC",
            "iceberg.jdbc-catalog.connection-url": f"jdbc:sqlite:{sqlite_file}",
            "iceberg.jdbc-catalog.catalog-name": catalog_name,
            "iceberg.jdbc-catalog.default-warehouse-dir": warehouse,
            # our local data files are file:// URIs (`iceberg_files.file_uri`), which Trino's native local file
            # system takes (it refuses a bare path: "No factory for location")
            "fs.native-local.enabled": "true", "local.location": "/"})
