"""Writing a DataFrame as the data files of one instant, with Spark's own Parquet writer.

1. Spark writes the rows (`DataFrameWriter.partitionBy`, no Python per row) into a staging directory
   private to the instant, `_lake/staging/<instant>/<write id>/`. Spark's commit protocol leaves there
   exactly the output of the task attempts that succeeded: a failed and retried attempt leaves nothing.
2. The instant lists its staging directory (its own files; what is *live* is still decided by the log
   alone), reads the footers (rows, per-column min/max/null counts, in parallel) and checks the data
   against the table: partition values, NOT NULL columns, the partitions an overwrite may touch.
3. It names the final paths in a manifest (so a rollback finds them), then moves each file to
   `<partition dir>/part-<instant>-<write id>-<n>[_<bucket>].parquet` and deletes the staging directory.

Files follow the Hive convention: partition values live only in the directory names, as Hive, Trino and
Spark catalog tables expect (files of tables written before hold the partition columns too; readers take
the value from the path for both). A bucketed table gets one file per (partition, bucket), sorted by the
bucket's sort columns, with Spark's bucket id in its name: the bucket is written as one more
`partitionBy` level and becomes the name's suffix when the file is placed.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeError, LakeSchemaError, LakeShuffleError
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.parquet_footers import read_footers
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark.bucket_assign import assign_buckets, varying_counts
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from airflow_lake.lake.spark.schema import to_files
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.spec.partitions import (
    NULL_PARTITION,
    check_partition_value,
    null_name_problem,
    parse_partition_dir,
    partition_dir,
)
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
BUCKET_COLUMN = "__lake_bucket"
COUNT_COLUMN = "__lake_buckets"
# Spark writes timestamps as INT96 by default, which gets no footer stats; TIMESTAMP_MICROS does. A
# bucketed scan feeding a bucketed write stays bucketed (Spark would otherwise turn it into a plain scan,
# since nothing above it asks for the distribution once the write needs no shuffle: `assign_buckets`).
WRITE_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
              "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false"}
DATA_ERROR = "AIRFLOW_LAKE_DATA_ERROR"
_DATA_ERROR_TEXT = re.compile(DATA_ERROR + r": ([^\n]*?)(?:\s*SQLSTATE|\n|$)")


def write_dataframe(df: DataFrame, storage: Storage, spec: TableSpec, instant: str, *,
                    allowed_partitions: Sequence[Mapping[str, str | None]] | None = None,
                    metrics: dict[str, Any] | None = None, sort_within: Sequence[str] | None = None,
                    drop_columns: Sequence[str] = (), bucket_shuffle: bool = True,
                    max_exchanges: int | None = None) -> list[DataFile]:
    """Write `df` (already conformed to `spec`) as files of `instant`; return them with their stats.

    A bucketed table's rows go to the bucketing of their partition (`buckets.assign.bucket_count`, decided in
    the Spark job); `metrics` (if given) gets `query_exchanges`, the shuffles in the plan of `df`, and
    `write_exchanges`, the shuffles the write adds to it.

    `sort_within` orders the rows of each task (each file) — within a bucket instead of the bucket sort
    columns — (clustering's keys); `drop_columns` are helper columns dropped once the rows are in order.
    `bucket_shuffle=False` writes each task's rows as one file per bucket it holds, without an Exchange
    (`buckets.assign.assign_buckets`). With `max_exchanges`, more shuffles than that (query + write) raise
    `LakeShuffleError` before anything is written.

    Raises `LakeSchemaError` / `LakeSpecError` for data the table refuses; nothing is placed then.
    """
    if not storage.local:
        # Metadata on a store is done (commits by conditional writes); placing Spark's files there is not yet:
        # `_place` renames, which object stores do not have. Refuse before Spark writes anything.
        raise LakeError(f"{storage.url}: writing data files to an object store is not supported yet (its metadata "
                        "is: create, commits, clean, planning, the sensor, the Lake page and the CLI work there). "
                        "Fix: keep tables that Spark writes on a local or mounted path for now.")
    keys = list(spec.partition_columns)
    write_id = uuid.uuid4().hex[:8]
    stage = f"{instants.staging_dir(instant)}/{write_id}"
    with session_conf(df.sparkSession, WRITE_CONF):  # (plans below are made with these settings too)
        df = _refuse_bad_partition_strings(df, spec)
        exchanges_before = shuffles(plan_text(df)) if metrics is not None or max_exchanges is not None else 0
        if spec.bucket is not None:
            df = assign_buckets(df, spec, COUNT_COLUMN, BUCKET_COLUMN, sort_within, shuffle=bucket_shuffle)
            keys += [COUNT_COLUMN, BUCKET_COLUMN] if varying_counts(spec) else [BUCKET_COLUMN]
        elif sort_within:  # after the checks above: they project the partition columns anew, and a sort by
            # the old ones would not satisfy the write, which would then re-sort by partition only
            df = df.sortWithinPartitions(*[f"`{c}`" for c in [*keys, *sort_within]])
        if drop_columns:
            df = df.drop(*drop_columns)  # (the order they made stays: the write only needs its prefix)
        df = to_files(df, spec)  # renamed columns go into the files under their physical names
        if metrics is not None or max_exchanges is not None:  # shuffles of the query, and those the write added
            final_plan = plan_text(df)
            added = shuffles(final_plan) - exchanges_before
            if metrics is not None:
                metrics["query_exchanges"] = exchanges_before
                metrics["write_exchanges"] = added
            if max_exchanges is not None and exchanges_before + added > max_exchanges:
                raise LakeShuffleError(exchanges_before, added, max_exchanges, final_plan)
        faults.reach("before_write")
        writer = df.write.mode("error").format("parquet")  # "errorifexists" is unknown to Spark Connect
        if keys:
            writer = writer.partitionBy(*keys)
        if spec.bucket is not None:
            writer = writer.option("maxRecordsPerFile", 0)  # one file per bucket, whatever the session says
        try:
            writer.save(storage.uri(stage))
        except Exception as err:
            raise data_error(err) or err from err
    staged = _staged_files(storage, stage, spec)
    _check_partitions(staged, spec, allowed_partitions)
    # Stats are kept by physical name: a rename leaves every file's stats right.
    types = {c.physical: c.type for c in spec.columns if c.name not in spec.partition_columns}
    facts = read_footers([storage.path(s.path) for s in staged], types, df.sparkSession)
    moves: list[tuple[str, DataFile]] = []
    for number, item in enumerate(staged):
        fact = facts[storage.path(item.path)]
        if fact.rows == 0:
            continue  # Spark writes a file with no rows for an empty unpartitioned write
        directory = partition_dir(spec.partition_columns, item.partition)
        suffix = f"_{item.bucket:05d}" if item.bucket is not None else ""
        name = f"part-{instant}-{write_id}-{number:05d}{suffix}.parquet"
        bucketing = spec.bucket.bucketing(item.count).key() if spec.bucket and item.count else None
        moves.append((item.path, DataFile(path=f"{directory}/{name}" if directory else name,
                                          partition=item.partition, rows=fact.rows, bytes=fact.bytes,
                                          bucket=item.bucket, instant=instant, stats=fact.stats,
                                          bucketing=bucketing)))
    files = [f for _, f in moves]
    _check_not_null(files, spec)
    _place(storage, instant, stage, moves)
    log.info("instant %s wrote %d file(s), %d rows", instant, len(files), sum(f.rows for f in files))
    return files


class _Staged:
    """A file Spark wrote into the staging directory."""

    __slots__ = ("bucket", "count", "partition", "path")

    def __init__(self, path: str, partition: dict[str, str | None], bucket: int | None, count: int | None) -> None:
        self.path = path
        self.partition = partition
        self.bucket = bucket
        self.count = count


def _staged_files(storage: Storage, stage: str, spec: TableSpec) -> list[_Staged]:
    """The data files in the staging directory (Spark's `_SUCCESS` and `.crc` files are hidden)."""
    out = []
    for rel in storage.walk_files(stage):
        inner = rel[len(stage) + 1:]
        segments = inner.split("/")
        if segments[-1].startswith(("_", ".")) or "_temporary" in segments or not inner.endswith(".parquet"):
            continue
        values = parse_partition_dir(inner.rsplit("/", 1)[0] if "/" in inner else "")
        bucket_text = values.pop(BUCKET_COLUMN, None)
        count_text = values.pop(COUNT_COLUMN, None)
        partition = {c: values.get(c) for c in spec.partition_columns}
        bucket = None if bucket_text is None else int(bucket_text)
        if count_text is not None:
            count: int | None = int(count_text)
        else:  # one count for the whole table: not written as a directory level
            count = spec.bucket.count if spec.bucket is not None and bucket is not None else None
        out.append(_Staged(rel, partition, bucket, count))
    return sorted(out, key=lambda s: s.path)


def _check_partitions(staged: list[_Staged], spec: TableSpec,
                      allowed: Sequence[Mapping[str, str | None]] | None) -> None:
    allowed_keys = None if allowed is None else {tuple(sorted(p.items())) for p in allowed}
    for item in staged:
        for column, value in item.partition.items():
            check_partition_value(column, value, "source")
            if value is None and not spec.column(column).nullable:
                raise LakeSchemaError(_not_null_message(column))
        if allowed_keys is not None and tuple(sorted(item.partition.items())) not in allowed_keys:
            raise LakeSchemaError(
                f"the source has rows in partition {item.partition}, which is not among the partitions being "
                "overwritten; nothing was committed. Fix: filter the source to those partitions or list "
                "this one in `partitions`.")


def _check_not_null(files: list[DataFile], spec: TableSpec) -> None:
    for column in spec.columns:
        if column.nullable or column.name in spec.partition_columns:
            continue
        if any((stats := f.stats.get(column.physical)) is not None and stats.null_count > 0 for f in files):
            raise LakeSchemaError(_not_null_message(column.name))


def _not_null_message(column: str) -> str:
    return (f"column {column!r} is NOT NULL in the table, but the source has nulls in it; nothing was "
            "committed. Fix: filter or fill the nulls in the source.")


def _place(storage: Storage, instant: str, stage: str, moves: list[tuple[str, DataFile]]) -> None:
    """Move the staged files to their final names; the manifest first, so a rollback finds them."""
    instants.write_manifest(storage, instant, [f.path for _, f in moves])
    for source, target in moves:
        storage.rename(source, target.path)
        faults.reach("during_place")
    storage.delete_tree(stage)  # what is left: Spark's _SUCCESS and .crc files, files with no rows


# A path segment `col=<escaped value>` must fit in a file name (255 bytes on common file systems).
MAX_SEGMENT_BYTES = 255
_ESCAPED_CLASS = "[\\x00-\\x1F\"#%'*/:=?\\\\\\x7F{\\[\\]^]"  # what `partitions.escape` turns into %XX


def _refuse_bad_partition_strings(df: DataFrame, spec: TableSpec) -> DataFrame:
    """Refuse, in the Spark job itself, string partition values Spark would write wrongly or not at all:
    an empty string or `__HIVE_DEFAULT_PARTITION__` (both written as NULL) and a value whose directory
    name would be too long."""
    from pyspark.sql import functions as F

    for name in spec.partition_columns:
        if spec.column(name).type != "string":
            continue
        col = F.col(f"`{name}`")
        escaped = F.length(col) - F.length(F.regexp_replace(col, _ESCAPED_CLASS, ""))
        segment = F.lit(len(name) + 1) + F.octet_length(col) + F.lit(2) * escaped
        empty = (f"{DATA_ERROR}: partition column {name!r} has an empty string value, which Spark would "
                 "write as NULL; nothing was committed. Fix: map empty strings to a value or to NULL in "
                 "the source.")
        too_long = (f"{DATA_ERROR}: partition column {name!r} has a value too long for a directory name "
                    f"(`{name}=<value>` must fit in {MAX_SEGMENT_BYTES} bytes once escaped); nothing was "
                    "committed. Fix: shorten the values (e.g. a hash or a prefix) or partition by another column.")
        null_name = f"{DATA_ERROR}: {null_name_problem(name)}"
        df = df.withColumn(name, F.when(col == F.lit(""), F.raise_error(F.lit(empty)))
                           .when(col == F.lit(NULL_PARTITION), F.raise_error(F.lit(null_name)))
                           .when(segment > F.lit(MAX_SEGMENT_BYTES), F.raise_error(F.lit(too_long)))
                           .otherwise(col))
    return df


def data_error(err: Exception) -> LakeError | None:
    """Our own data error raised in a Spark task, unwrapped from Spark's exception."""
    text = str(err)
    match = _DATA_ERROR_TEXT.search(text)
    if match:
        return LakeSchemaError(match.group(1).strip())
    legacy = re.search(r"airflow_lake\.lake\.errors\.(LakeSchemaError|LakeSpecError): ([^\n]*)", text)
    return LakeSchemaError(legacy.group(2)) if legacy else None
