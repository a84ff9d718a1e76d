"""Other engines reading a table published as Iceberg: pyiceberg and DuckDB's iceberg extension (from its PyPI
package: no download at run time), and our own read to compare them with, as multisets of rows."""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from airflow_lake.lake import LakeTable

CATALOG = "lake-test"
# the PyPI package duckdb-ext-iceberg installs the extension next to duckdb (site-packages/duckdb_ext/extensions)
EXTENSIONS = os.path.join(os.path.dirname(os.path.dirname(duckdb.__file__)), "duckdb_ext", "extensions")


def configure(monkeypatch: Any, tmp_path: Path, name: str = CATALOG, **extra: str) -> Catalog:
    """A SQL catalog on a SQLite file in `tmp_path`, configured by pyiceberg's environment variables (as a user
    would; `extra`: more of its properties, e.g. {"s3.endpoint": ...}), and that catalog."""
    env = name.upper().replace("-", "_")
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    config = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}", **extra}
    for key, value in config.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{env}__{key.upper().replace('.', '__')}", value)
    return load_catalog(name, **config)


def properties(name: str = "db.t", catalog: str = CATALOG) -> dict[str, str]:
    """The table properties that publish to `name` in the test catalog."""
    return {"publish.iceberg.catalog": catalog, "publish.iceberg.table": name}


def rows(table: pa.Table, columns: list[str] | None = None) -> collections.Counter[tuple[Any, ...]]:
    """The rows of `table` (its columns in `columns` order) as a multiset."""
    names = columns or table.column_names
    data = table.select(names).to_pylist()
    return collections.Counter(tuple(row[c] for c in names) for row in data)


def ours(table: LakeTable, as_of: int | None = None) -> collections.Counter[tuple[Any, ...]]:
    """Our own read of the table (pyarrow, exactly the snapshot's live files; merged for a primary-key table)."""
    return rows(table.to_arrow(as_of=as_of), table.snapshot(as_of).spec.column_names)


def by_pyiceberg(published: Table, snapshot_id: int | None = None) -> pa.Table:
    """What pyiceberg reads (the current snapshot, or `snapshot_id`)."""
    return published.scan(snapshot_id=snapshot_id).to_arrow()


def by_duckdb(published: Table, snapshot_id: int | None = None) -> pa.Table:
    """What DuckDB's `iceberg_scan` reads from the table's current metadata file."""
    con = duckdb.connect()
    try:
        con.execute(f"SET extension_directory='{EXTENSIONS}'")
        con.execute("LOAD iceberg")
        options = f", snapshot_from_id={snapshot_id}" if snapshot_id is not None else ""
        return con.execute(f"SELECT * FROM iceberg_scan('{published.metadata_location}'{options})").fetch_arrow_table()
    finally:
        con.close()


def by_duckdb_where(published: Table, where: str, *parameters: Any) -> pa.Table:
    """What DuckDB's `iceberg_scan` reads of the current snapshot with a WHERE clause (its pruning by the manifests'
    partition values and bounds)."""
    con = duckdb.connect()
    try:
        con.execute(f"SET extension_directory='{EXTENSIONS}'")
        con.execute("LOAD iceberg")
        return con.execute(f"SELECT * FROM iceberg_scan('{published.metadata_location}') WHERE {where}",
                           list(parameters)).fetch_arrow_table()
    finally:
        con.close()


def snapshot_of_seq(published: Table, seq: int) -> int | None:
    """The id of the snapshot that publishes our entry `seq` (None: none)."""
    for snapshot in published.metadata.snapshots:
        if snapshot.summary is not None and snapshot.summary.get("lake.seq") == str(seq):
            return snapshot.snapshot_id
    return None


def assert_same(table: LakeTable, catalog: Catalog, name: str = "db.t") -> Table:
    """pyiceberg and DuckDB read exactly our rows (as multisets, no `__lake_*` columns); returns the table."""
    published = catalog.load_table(tuple(name.split(".")))
    columns = table.spec.column_names
    expected = ours(table)
    for reader in (by_pyiceberg, by_duckdb):
        got = reader(published)
        assert sorted(got.column_names) == sorted(columns), (reader.__name__, got.column_names)
        assert rows(got, columns) == expected, (reader.__name__, rows(got, columns), expected)
    return published
