"""Real commits without Spark, for the publishing tests: a small Parquet file written with pyarrow where our writer
puts its files (marker first, then the file, in the instant's write directory), its stats from its footer, and
one transaction that adds it (and removes what the caller names)."""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.lake import ColumnStats, DataFile, LakeTable
from airflow_lake.lake.format.instants import markers_dir
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.parquet_footers import file_facts

SCHEMA = "id BIGINT, v STRING, dt STRING"
_names = itertools.count()


def make_table(path: str) -> LakeTable:
    """A table of `SCHEMA` partitioned by `dt`."""
    return LakeTable.create(path, {"schema": SCHEMA, "partition_by": ["dt"]})


def write_file(table: LakeTable, instant: str, ids: Sequence[int], part: str) -> DataFile:
    """A real Parquet file of rows (id, 'v<id>') in partition dt=`part`, written as instant `instant`'s."""
    rel = f"data/{instant}-a{os.getpid()}/dt={part}/part-{next(_names):05d}-{instant}.c000.parquet"
    table.storage.touch(f"{markers_dir(instant)}/{rel}")
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])}), buffer)
    table.storage.makedirs(rel.rsplit("/", 1)[0])
    if table.storage.local:  # written once under its final name, as our writer does (no rename)
        with open(table.storage.path(rel), "xb") as handle:
            handle.write(buffer.getvalue())
    else:
        table.storage.write_bytes(rel, buffer.getvalue())
    rows, size, stats = file_facts(table.storage.path(rel), {"id": "bigint", "v": "string"},
                                   None if table.storage.local else table.storage.filesystem)
    return DataFile(path=rel, partition={"dt": part}, rows=rows, bytes=size, instant=instant,
                    stats={k: ColumnStats.from_list(v) for k, v in stats.items()})


def commit(table: LakeTable, ids: Sequence[int], part: str = "a", *, removed: Iterable[str] = ()) -> LogEntry:
    """One commit adding a file of `ids` (and removing the live files `removed`: a `replace`)."""
    gone = list(removed)
    txn = table.begin("replace" if gone else "commit", "delete" if gone else "write")
    try:
        return txn.commit(added=[write_file(table, txn.instant, ids, part)], removed=gone)
    except BaseException:
        txn.abort()
        raise


def rows(table: LakeTable, as_of: int | None = None) -> list[tuple[int, str, str]]:
    """Our read (`to_arrow`: exactly the snapshot's files), sorted."""
    arrow = table.to_arrow(as_of=as_of)
    return sorted(zip(*(arrow.column(c).to_pylist() for c in ("id", "v", "dt")), strict=True))


def delta_rows(path: str, version: int | None = None, storage_options: dict[str, str] | None = None
               ) -> list[tuple[int, str, str]]:
    """delta-rs's read of the published log, sorted."""
    from deltalake import DeltaTable

    arrow = DeltaTable(path, version=version, storage_options=storage_options).to_pyarrow_table()
    return sorted(zip(*(arrow.column(c).to_pylist() for c in ("id", "v", "dt")), strict=True))
