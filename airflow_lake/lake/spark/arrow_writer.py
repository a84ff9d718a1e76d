"""Writing an Arrow table as the data files of one instant, with pyarrow, as Spark's bucketed insert writes them.

For small writes that need no Spark (`upsert.arrow_upsert`): the same write directory (`file_writer.write_dir`,
announced in the instant's manifest before anything is written), the same layout (`col=value/` directories
escaped as Spark escapes them, one file per partition and bucket named `part-<n>-<uuid>_<bucket>.c000.snappy.parquet`,
so Spark's bucketed scan reads each file as its bucket), the rows sorted within a file by the bucket's sort
columns (NULL first, strings by their UTF-8 bytes: Spark's ascending order), Snappy as Spark's default, and
timestamps as TIMESTAMP_MICROS (`file_writer.WRITE_CONF`). Then the same finish (`file_writer.finish_write`): the
footers give each file's stats, and the checks of the data against the table run on them.

The bucket of a row is `pmod(hash(bucket columns), count)` computed by `format.spark_hash`, bit for bit Spark's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import spark_hash
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.pyarrow_read import arrow_type
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark.file_writer import Target, announce, finish_write, write_dir
from airflow_lake.lake.spec.partitions import NULL_PARTITION, escape, partition_text
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

log = logging.getLogger(__name__)
COMPRESSION = "snappy"  # Spark's default Parquet codec (`spark.sql.parquet.compression.codec`)
# partition column types whose directory text Spark writes as `partitions.partition_text` does
PARTITION_TYPES = frozenset({"string", "tinyint", "smallint", "int", "bigint", "date"})
# sort column types whose ascending order in Arrow is Spark's (NULL first; no NaN, whose place differs)
SORT_TYPES = frozenset({"boolean", "tinyint", "smallint", "int", "bigint", "date", "timestamp", "timestamp_ntz",
                        "string", "binary"})


def unsupported(spec: TableSpec) -> str | None:
    """Why `write_arrow` cannot write files of `spec` as Spark would (None: it can)."""
    bucket = spec.bucket
    if bucket is None:
        return "the table has no buckets"
    if bucket.partition_counts or bucket.from_partition is not None:
        return "the table's partitions differ in bucketing"
    for name in bucket.columns:
        if not spark_hash.supported(spec.column(name).type):
            return f"bucket column {name!r} is {spec.column(name).type}"
    for name in bucket.sort_columns:
        if spec.column(name).type not in SORT_TYPES:
            return f"sort column {name!r} is {spec.column(name).type}"
    for name in spec.partition_columns:
        if spec.column(name).type not in PARTITION_TYPES:
            return f"partition column {name!r} is {spec.column(name).type}"
    return None


def write_arrow(rows: pa.Table, storage: Storage, spec: TableSpec, instant: str, *,
                plain_columns: Sequence[str] = ()) -> list[DataFile]:
    """Write `rows` (the table's columns by name, in its types; partition columns too) as files of `instant`
    bucketed by `spec` (`unsupported(spec)` is None); return them with their stats. `plain_columns` (physical
    names) are written without a dictionary, as `file_writer.plain_options` has Spark do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bucket = spec.bucket
    assert bucket is not None and unsupported(spec) is None
    parts = list(spec.partition_columns)
    ids = spark_hash.bucket_ids([rows.column(c) for c in bucket.columns],
                                [spec.column(c).type for c in bucket.columns], bucket.count)
    # one sort gives every file's rows in order: (partition values, bucket, sort columns), NULL first
    keyed = rows.append_column("__lake_bucket_id", pa.array(ids, pa.int32()))
    keyed = keyed.take(_sort_indices(keyed, [*parts, "__lake_bucket_id", *[c for c in bucket.sort_columns
                                                                          if c not in parts]]))
    stored = [c for c in spec.columns if c.name not in parts]
    schema = pa.schema([pa.field(c.physical, arrow_type(c.type), nullable=c.nullable) for c in stored])
    target = f"{write_dir(instant, uuid.uuid4().hex[:8])}-b{bucket.count}"
    job = uuid.uuid4()
    dictionary = [c.physical for c in stored if c.physical not in set(plain_columns)]
    announce(storage, instant, target)
    faults.reach("before_write")
    for start, end in _runs(keyed, [*parts, "__lake_bucket_id"]):
        piece = keyed.slice(start, end - start)
        bucket_id = int(piece.column("__lake_bucket_id")[0].as_py())
        directory = "/".join(f"{c}={_directory_text(spec, c, piece.column(c)[0].as_py())}" for c in parts)
        name = f"part-{bucket_id:05d}-{job}_{bucket_id:05d}.c000.{COMPRESSION}.parquet"
        data = pa.table([piece.column(c.name).cast(schema.field(c.physical).type) for c in stored], schema=schema)
        sink = pa.BufferOutputStream()
        pq.write_table(data, sink, compression=COMPRESSION, use_dictionary=dictionary,
                       coerce_timestamps="us", row_group_size=max(1, data.num_rows))
        storage.put_file(f"{target}/{directory}/{name}" if directory else f"{target}/{name}",
                         sink.getvalue().to_pybytes())
    files = finish_write(storage, spec, instant, [Target(target, bucket.count, bucketed=True)])
    if sum(f.rows for f in files) != rows.num_rows:
        raise LakeError(f"instant {instant} wrote {sum(f.rows for f in files)} rows of {rows.num_rows}; nothing was "
                        "committed. Report this.")
    log.info("instant %s wrote %d file(s), %d rows under %s (pyarrow, no Spark)", instant, len(files), rows.num_rows,
             target)
    return files


def _sort_indices(rows: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The order of `rows` ascending by `columns`, NULL first (Spark's ascending order), stable."""
    import pyarrow.compute as pc

    try:  # pyarrow >= 25: the NULL placement per key
        return pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_start") for c in columns])
    except (TypeError, ValueError):  # older: one placement for all keys
        return pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in columns], null_placement="at_start")


def _runs(rows: pa.Table, columns: Sequence[str]) -> list[tuple[int, int]]:
    """The [start, end) ranges of equal values of `columns` in `rows` (sorted by them)."""
    import numpy as np

    if rows.num_rows == 0:
        return []
    change = np.zeros(rows.num_rows, dtype=bool)
    change[0] = True
    for name in columns:
        change[1:] |= _differs(rows.column(name))
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], rows.num_rows)
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def _differs(column: pa.ChunkedArray) -> np.ndarray:
    """Whether each value (from the second) differs from the one before it (NULL equals NULL)."""
    import pyarrow.compute as pc

    values = column.combine_chunks()
    before, after = values.slice(0, len(values) - 1), values.slice(1)
    same = pc.fill_null(pc.equal(before, after), False)
    both_null = pc.and_(pc.is_null(before), pc.is_null(after))
    differs: np.ndarray = pc.invert(pc.or_(same, both_null)).to_numpy(zero_copy_only=False)
    return differs


def _directory_text(spec: TableSpec, column: str, value: object) -> str:
    """A partition value's directory text, as Spark writes it (checked by `finish_write` as Spark's are)."""
    text = partition_text(spec.column(column).type, value)
    return NULL_PARTITION if text is None else escape(text)
