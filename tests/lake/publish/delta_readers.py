"""Other engines reading a table's published Delta log (`_delta_log/`), each returning the same comparable form:
the column names it shows and its rows as a multiset (a Counter of tuples, in those columns' order).

Readers: delta-rs (`DeltaTable.to_pyarrow_table`, the read pandas users get through deltalake), polars
(`read_delta`), delta-rs's DataFusion `QueryBuilder`, and DuckDB's delta extension (`delta_scan`; time travel
through `ATTACH ... (TYPE delta)` and `AT (VERSION => n)`, which `delta_scan` lacks in 1.4.4), loaded from the PyPI
package `duckdb-ext-delta` (no download at run time). Ours: `LakeTable.read` through Spark.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb

    from airflow_lake.lake.table import LakeTable

_aliases = itertools.count()


@dataclass(frozen=True)
class Rows:
    """What one reader shows: column names (in the reader's order) and the rows as a multiset, each row's values
    in `sorted(columns)` order, so readers that order columns differently compare equal."""

    columns: tuple[str, ...]
    rows: Counter[tuple[Any, ...]]

    @property
    def count(self) -> int:
        """How many rows."""
        return sum(self.rows.values())


def _value(value: Any) -> Any:
    # an aware timestamp (delta-rs, DuckDB) and Spark's naive one in the session time zone (UTC) compare equal
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN equals nothing, itself included: a row holding one would never compare equal
    return value


def from_records(columns: Iterable[str], records: Iterable[Iterable[Any]]) -> Rows:
    """Rows of records whose values come in `columns`' order."""
    names = tuple(columns)
    order = sorted(range(len(names)), key=lambda i: names[i])
    counter: Counter[tuple[Any, ...]] = Counter()
    for record in records:
        values = tuple(record)
        counter[tuple(_value(values[i]) for i in order)] += 1
    return Rows(names, counter)


def from_arrow(table: Any) -> Rows:
    """Rows of an Arrow table (pyarrow's, or any object with the Arrow C stream interface: arro3's)."""
    arrow = table if isinstance(table, pa.Table) else pa.table(table)
    return from_records(arrow.column_names, zip(*(c.to_pylist() for c in arrow.columns), strict=True))


def lake(spark: Any, table: LakeTable, as_of: int | None = None) -> Rows:
    """Our read of `table` (the merged read of a primary-key table) at the head or at seq `as_of`."""
    df = table.read(spark, as_of=as_of)
    return from_records(df.columns, (tuple(r) for r in df.collect()))


def lake_arrow(table: LakeTable, as_of: int | None = None) -> Rows:
    """Our read without Spark (`LakeTable.to_arrow`: exactly the snapshot's files, a primary-key table merged)."""
    return from_arrow(table.to_arrow(as_of=as_of))


def delta_rs(path: str, version: int | None = None) -> Rows:
    """delta-rs's `DeltaTable(...).to_pyarrow_table()`, at the newest version or at `version`."""
    from deltalake import DeltaTable

    return from_arrow(DeltaTable(path, version=version).to_pyarrow_table())


def polars(path: str, version: int | None = None) -> Rows:
    """polars' `read_delta`."""
    import polars as pl

    return from_arrow(pl.read_delta(path, version=version).to_arrow())


def query_builder(path: str, version: int | None = None, where: str | None = None) -> Rows:
    """delta-rs's DataFusion `QueryBuilder` (`SELECT *` over the registered table, `WHERE where`: files are
    skipped by the published stats)."""
    from deltalake import DeltaTable, QueryBuilder

    sql = "SELECT * FROM t" + (f" WHERE {where}" if where else "")
    reader = QueryBuilder().register("t", DeltaTable(path, version=version)).execute(sql)
    return from_arrow(reader.read_all())


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the delta extension loaded from the installed PyPI package."""
    import duckdb
    import duckdb_ext

    directory = os.path.join(next(iter(duckdb_ext.__path__)), "extensions")
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{directory}'")
    con.execute("LOAD delta")
    return con


def duckdb_delta(con: duckdb.DuckDBPyConnection, path: str, version: int | None = None, where: str | None = None
                 ) -> Rows:
    """DuckDB's `delta_scan` (newest version; `WHERE where`: files are skipped by the published stats), or the table
    attached as a Delta catalog read `AT (VERSION => n)`."""
    quoted = path.replace("'", "''")
    if version is None:
        cursor = con.execute(f"SELECT * FROM delta_scan('{quoted}')" + (f" WHERE {where}" if where else ""))
        return from_records([d[0] for d in cursor.description or ()], cursor.fetchall())
    alias = f"lake_delta_{next(_aliases)}"
    con.execute(f"ATTACH '{quoted}' AS {alias} (TYPE delta)")
    try:
        cursor = con.execute(f"SELECT * FROM {alias} AT (VERSION => {int(version)})")
        return from_records([d[0] for d in cursor.description or ()], cursor.fetchall())
    finally:
        con.execute(f"DETACH {alias}")


def readers(con: duckdb.DuckDBPyConnection) -> dict[str, Callable[[str, int | None], Rows]]:
    """Every reader by name, each called as `reader(path, version)`."""
    return {"delta-rs": delta_rs, "polars": polars, "query_builder": query_builder,
            "duckdb": lambda path, version: duckdb_delta(con, path, version)}


def refusal(read: Callable[[], Rows]) -> BaseException | None:
    """The error a reader raises (None: it read)."""
    try:
        read()
    except Exception as err:  # each library raises its own types
        return err
    return None
