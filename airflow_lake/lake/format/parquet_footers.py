"""Facts about Parquet files from their footers: row count, size, per-column min/max/null counts.

The native writer captures a file's stats this way, before its instant commits: Spark's Parquet writer
already computed them per row group, so reading them back costs one footer read per file, not a pass
over the data. A few files are read on the driver with a thread pool; thousands are read by a Spark job
(`mapInArrow` over the list of paths, which Spark Connect supports), so the driver never reads them one
by one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.format.data_files import ColumnStats
from airflow_lake.lake.spec.types import STATS_TYPES, STRING_STATS_PREFIX, stats_value

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

# Above this many files the footers are read by a Spark job, below it by driver threads.
SPARK_JOB_MIN_FILES = 400
FILES_PER_TASK = 200
DRIVER_THREADS = 8
STORE_THREADS = 32
_RESULT_SCHEMA = "path string, rows bigint, bytes bigint, stats string"


@dataclass(frozen=True)
class FileFacts:
    """What a footer says about one file."""

    rows: int
    bytes: int
    stats: Mapping[str, ColumnStats]  # by column name, for the columns the file holds


def read_footers(paths: Sequence[str], column_types: Mapping[str, str],
                 spark: SparkSession | None = None, filesystem: Any = None) -> dict[str, FileFacts]:
    """Facts of each file (absolute local paths, or paths in the fsspec `filesystem` of a store), keyed by path;
    `column_types` maps name -> type. On a store the driver's threads read them (a Spark task would need the
    store's Python library and credentials on every executor), more at once: each read is a request away."""
    types = dict(column_types)
    if spark is not None and filesystem is None and len(paths) >= SPARK_JOB_MIN_FILES:
        raw = _read_with_spark(spark, list(paths), types)
    else:
        threads = DRIVER_THREADS if filesystem is None else STORE_THREADS
        read = partial(file_facts, column_types=types, filesystem=filesystem)
        with ThreadPoolExecutor(max_workers=min(threads, max(1, len(paths)))) as pool:
            raw = dict(zip(paths, pool.map(read, paths), strict=True))
    return {
        path: FileFacts(rows, size, {k: ColumnStats.from_list(v) for k, v in stats.items()})
        for path, (rows, size, stats) in raw.items()
    }


def file_facts(path: str, column_types: Mapping[str, str], filesystem: Any = None
               ) -> tuple[int, int, dict[str, list[Any]]]:
    """(rows, bytes, {column: [min, max, null_count]}) of one file, stats folded over its row groups.

    Min/max are None where unknown: a row group without them (Spark writes none for strings over 4 KiB, or
    for INT96 timestamps), a NaN, a type whose order nobody compares (binary, decimal). A string min is
    cut to a prefix (still a lower bound); a string max that would need cutting is dropped.
    """
    import pyarrow.parquet as pq

    if filesystem is None:
        meta, size = pq.read_metadata(path), os.path.getsize(path)
    else:
        size = int(filesystem.size(path))
        with filesystem.open(path, "rb") as handle:
            meta = pq.read_metadata(handle)
    folded: dict[str, list[Any]] = {}  # name -> [min, max, nulls, min unknown, max unknown]
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            name = chunk.path_in_schema
            type_name = column_types.get(name)
            if type_name is None:
                continue
            entry = folded.setdefault(name, [None, None, 0, False, False])
            stats = chunk.statistics
            nulls = stats.null_count if stats is not None and stats.has_null_count else 0
            entry[2] += nulls
            if nulls >= row_group.num_rows:
                continue  # all null: says nothing about min/max
            if type_name not in STATS_TYPES or stats is None or not stats.has_min_max:
                entry[3] = entry[4] = True
                continue
            _fold_bounds(entry, type_name, stats.min, stats.max)
    return meta.num_rows, size, {
        name: [None if e[3] else e[0], None if e[4] else e[1], e[2]] for name, e in folded.items()
    }


def _fold_bounds(entry: list[Any], type_name: str, low_raw: Any, high_raw: Any) -> None:
    try:
        low, high = stats_value(type_name, low_raw), stats_value(type_name, high_raw)
    except (TypeError, ValueError):
        entry[3] = entry[4] = True
        return
    if type_name == "string":
        if low is not None and len(low) > STRING_STATS_PREFIX:
            low = low[:STRING_STATS_PREFIX]  # a prefix is still a lower bound
        if high is not None and len(high) > STRING_STATS_PREFIX:
            high = None  # a truncated max would not be an upper bound
    if low is None:
        entry[3] = True
    elif entry[0] is None or low < entry[0]:
        entry[0] = low
    if high is None:
        entry[4] = True
    elif entry[1] is None or high > entry[1]:
        entry[1] = high


def _read_with_spark(spark: SparkSession, paths: list[str], types: dict[str, str]
                     ) -> dict[str, tuple[int, int, dict[str, list[Any]]]]:
    tasks = max(1, len(paths) // FILES_PER_TASK)
    listing = spark.createDataFrame([(p,) for p in paths], "path string").repartition(tasks)
    rows = listing.mapInArrow(partial(_footer_task, types), _RESULT_SCHEMA).collect()
    return {r["path"]: (r["rows"], r["bytes"], json.loads(r["stats"])) for r in rows}


def _footer_task(types: dict[str, str], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Body of one Spark task: the facts of the files named in its rows."""
    import pyarrow as pa

    out: list[dict[str, Any]] = []
    for batch in batches:
        for path in batch.column("path").to_pylist():
            rows, size, stats = file_facts(path, types)
            out.append({"path": path, "rows": rows, "bytes": size, "stats": json.dumps(stats)})
    if out:
        schema = pa.schema([("path", pa.string()), ("rows", pa.int64()), ("bytes", pa.int64()),
                            ("stats", pa.string())])
        yield pa.RecordBatch.from_pylist(out, schema=schema)
