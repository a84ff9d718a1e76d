"""The previous write path, kept to measure against: Spark does the work and pyarrow the bytes, per row in Python.

Each Spark task receives its rows as Arrow batches (`mapInArrow`, which Spark Connect supports),
writes one Parquet file per partition (and bucket) it holds, and returns one row per file with its
partition, bucket, row count, size and per-column min/max/null counts, taken from the data as it is
written. Before a file is created, a marker names it, so a rollback finds exactly this instant's files.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeSchemaError
from airflow_lake.lake.files import ColumnStats, DataFile
from airflow_lake.lake.instants import markers_dir
from airflow_lake.lake.partitions import partition_dir, partition_text
from airflow_lake.lake.spec import TableSpec
from airflow_lake.lake.storage import Storage
from airflow_lake.lake.types import STATS_TYPES, STRING_STATS_PREFIX, stats_value

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
BUCKET_COLUMN = "__lake_bucket"
# Row groups as large as Spark's (an Arrow batch per row group makes files ~12% larger), bounded in memory.
ROW_GROUP_ROWS = 1_000_000
ROW_GROUP_BYTES = 64 * 1024 * 1024
RESULT_SCHEMA = "path string, partition string, bucket int, rows bigint, bytes bigint, stats string"


@dataclass(frozen=True)
class WriteContext:
    """What a Spark task needs to write its files (pickled to executors)."""

    root: str
    instant: str
    columns: tuple[tuple[str, str, bool], ...]  # name, type, nullable
    partition_columns: tuple[str, ...]
    bucketed: bool
    allowed_partitions: tuple[tuple[tuple[str, str | None], ...], ...] | None
    compression: str = "snappy"


def write_dataframe(df: DataFrame, storage: Storage, spec: TableSpec, instant: str, *,
                    allowed_partitions: Sequence[Mapping[str, str | None]] | None = None) -> list[DataFile]:
    """Write `df` (already conformed to `spec`) as files of `instant`; return them with their stats."""
    from pyspark.sql import functions as F

    keys = list(spec.partition_columns)
    if spec.bucket is not None:
        bucket = F.pmod(F.hash(*[F.col(f"`{c}`") for c in spec.bucket.columns]), F.lit(spec.bucket.count))
        df = df.withColumn(BUCKET_COLUMN, bucket)
        # one task per (partition, bucket) key: each bucket becomes one file, sorted by the sort columns
        df = df.repartition(*[F.col(f"`{c}`") for c in keys], F.col(BUCKET_COLUMN))
        df = df.sortWithinPartitions(*keys, BUCKET_COLUMN, *spec.bucket.sort_columns)
    elif keys:
        df = df.sortWithinPartitions(*keys)
    ctx = WriteContext(
        root=storage.url,
        instant=instant,
        columns=tuple((c.name, c.type, c.nullable) for c in spec.columns),
        partition_columns=tuple(keys),
        bucketed=spec.bucket is not None,
        allowed_partitions=None if allowed_partitions is None
        else tuple(tuple(sorted(p.items())) for p in allowed_partitions),
    )
    storage.makedirs(markers_dir(instant))
    faults.reach("before_write")
    try:
        rows = df.mapInArrow(partial(write_task, ctx), RESULT_SCHEMA).collect()
    except Exception as err:
        raise _data_error(err) or err from err
    files = [
        DataFile(path=r["path"], partition=json.loads(r["partition"]), rows=r["rows"], bytes=r["bytes"],
                 bucket=r["bucket"], instant=instant,
                 stats={k: ColumnStats.from_list(v) for k, v in json.loads(r["stats"]).items()})
        for r in rows
    ]
    log.info("instant %s wrote %d file(s), %d rows", instant, len(files), sum(f.rows for f in files))
    return files


_EXECUTOR_ERROR = re.compile(r"airflow_lake\.lake\.errors\.(LakeSchemaError|LakeSpecError): ([^\n]*)")


def _data_error(err: Exception) -> LakeSchemaError | None:
    """Our own data error raised in a Spark task, unwrapped from Spark's Python exception."""
    match = _EXECUTOR_ERROR.search(str(err))
    return LakeSchemaError(match.group(2)) if match else None


def write_task(ctx: WriteContext, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Body of one Spark task: write its rows, yield one result row per file written."""
    import pyarrow as pa

    storage = Storage(ctx.root)
    task = uuid.uuid4().hex[:12]
    keys = [*ctx.partition_columns, *([BUCKET_COLUMN] if ctx.bucketed else [])]
    results: list[dict[str, Any]] = []
    current: _OpenFile | None = None
    for batch in batches:
        for key, piece in _runs(batch, keys):
            if current is None or key != current.key:
                if current is not None:
                    results.append(current.close())
                    faults.reach("during_write")
                current = _OpenFile(ctx, storage, key, f"{task}-{len(results):05d}")
            current.write(piece)
    if current is not None:
        results.append(current.close())
    if results:
        schema = pa.schema([("path", pa.string()), ("partition", pa.string()), ("bucket", pa.int32()),
                            ("rows", pa.int64()), ("bytes", pa.int64()), ("stats", pa.string())])
        yield pa.RecordBatch.from_pylist(results, schema=schema)


def _runs(batch: pa.RecordBatch, names: list[str]) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """Split a batch sorted by `names` into runs of equal key."""
    import pyarrow.compute as pc

    rows = batch.num_rows
    if rows == 0:
        return
    if not names:
        yield (), batch
        return
    change = None
    for name in names:
        column = batch.column(name)
        after, before = column.slice(1), column.slice(0, rows - 1)
        after_null, before_null = pc.is_null(after), pc.is_null(before)
        differs = pc.if_else(pc.or_(after_null, before_null), pc.xor(after_null, before_null),
                             pc.not_equal(after, before))
        change = differs if change is None else pc.or_(change, differs)
    cuts = [0, *(i + 1 for i in pc.indices_nonzero(change).to_pylist()), rows]
    for start, end in itertools.pairwise(cuts):
        piece = batch.slice(start, end - start)
        yield tuple(piece.column(name)[0].as_py() for name in names), piece


class _OpenFile:
    """One Parquet file being written, with running stats."""

    def __init__(self, ctx: WriteContext, storage: Storage, key: tuple[Any, ...], name: str) -> None:
        self.ctx = ctx
        self.storage = storage
        self.key = key
        types = {n: t for n, t, _ in ctx.columns}
        parts = key[: len(ctx.partition_columns)]
        self.partition = {c: partition_text(types[c], v) for c, v in zip(ctx.partition_columns, parts, strict=True)}
        if ctx.allowed_partitions is not None and tuple(sorted(self.partition.items())) not in ctx.allowed_partitions:
            raise LakeSchemaError(
                f"the source has rows in partition {self.partition}, which is not among the partitions being "
                "overwritten; nothing was committed. Fix: filter the source to those partitions or list "
                "this one in `partitions`.")
        self.bucket = int(key[-1]) if ctx.bucketed else None
        directory = partition_dir(ctx.partition_columns, self.partition)
        suffix = f"_{self.bucket:05d}" if self.bucket is not None else ""
        file_name = f"part-{ctx.instant}-{name}{suffix}.parquet"
        self.path = f"{directory}/{file_name}" if directory else file_name
        storage.touch(f"{markers_dir(ctx.instant)}/{self.path}")
        if directory:
            storage.makedirs(directory)
        self.rows = 0
        self.stats: dict[str, list[Any]] = {}
        self._writer: Any = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def write(self, piece: pa.RecordBatch) -> None:
        import pyarrow.parquet as pq

        if BUCKET_COLUMN in piece.schema.names:
            piece = piece.drop_columns([BUCKET_COLUMN])
        for name, type_name, nullable in self.ctx.columns:
            self._update_stats(name, type_name, nullable, piece.column(name))
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.storage.path(self.path), piece.schema,
                                            compression=self.ctx.compression)
        self._pending.append(piece)
        self._pending_rows += piece.num_rows
        self._pending_bytes += piece.nbytes
        self.rows += piece.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS or self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Write the buffered batches as one row group."""
        import pyarrow as pa

        if self._pending:
            self._writer.write_table(pa.Table.from_batches(self._pending), row_group_size=self._pending_rows)
            self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def _update_stats(self, name: str, type_name: str, nullable: bool, array: pa.Array) -> None:
        import pyarrow.compute as pc

        entry = self.stats.setdefault(name, [None, None, 0, False])  # min, max, nulls, max unknown
        nulls = array.null_count
        if nulls and not nullable:
            raise LakeSchemaError(f"column {name!r} is NOT NULL in the table, but the source has nulls in it; "
                                  "nothing was committed. Fix: filter or fill the nulls in the source.")
        entry[2] += nulls
        if type_name not in STATS_TYPES or nulls == len(array):
            return
        bounds = pc.min_max(array)
        low = stats_value(type_name, bounds["min"].as_py())
        high = stats_value(type_name, bounds["max"].as_py())
        if type_name == "string":
            if low is not None and len(low) > STRING_STATS_PREFIX:
                low = low[:STRING_STATS_PREFIX]  # a prefix is still a lower bound
            if high is not None and len(high) > STRING_STATS_PREFIX:
                high, entry[3] = None, True  # a truncated max would not be an upper bound
        if low is not None and (entry[0] is None or low < entry[0]):
            entry[0] = low
        if high is not None and (entry[1] is None or high > entry[1]):
            entry[1] = high

    def close(self) -> dict[str, Any]:
        if self._writer is not None:
            self._flush()
            self._writer.close()
        stats = {k: [v[0], None if v[3] else v[1], v[2]] for k, v in self.stats.items()}
        return {
            "path": self.path,
            "partition": json.dumps(self.partition),
            "bucket": self.bucket,
            "rows": self.rows,
            "bytes": self.storage.size(self.path),
            "stats": json.dumps(stats),
        }
