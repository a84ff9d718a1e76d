"""Writing a DataFrame as the data files of one instant, with Spark's own Parquet writer, without a rename.

1. The instant names its write directory, `data/<instant>-<write id>[-b<count>|-plain]/` (one per bucketing it
   writes), in a manifest before Spark writes anything, so a rollback finds and deletes whatever lands there.
2. Spark writes the rows (`DataFrameWriter.partitionBy`, no Python per row) into that directory, under the names
   its commit protocol gives (`part-<task>-<job uuid>[_<bucket>].c000.snappy.parquet`): final and unique, never
   moved. Object stores have no rename; the log, not a move, is what makes a file live. A bucketed table's files
   are written by Spark's bucketed insert through a temporary catalog table over the directory (`CLUSTERED BY ...
   INTO n BUCKETS`, dropped after; its files stay), so each name ends in Spark's bucket id, as its bucketed scan
   needs; one insert per bucket count present (per-partition counts, plain partitions before `from_partition`).
3. The instant lists its own directories (what is *live* is still decided by the log alone), deletes Spark's
   leftovers there (`.crc`, `_SUCCESS`, a 0-row file of an empty write: deletes are allowed on a store, renames
   are not), reads the footers (rows, per-column min/max/null counts, in parallel) and checks the data against the
   table: partition values, NOT NULL columns, the partitions an overwrite may touch.

Files follow the Hive convention below their write directory: partition values live only in the `col=value`
directory names (files of tables written before hold the partition columns too, at `<root>/<partition dirs>/`;
readers take the value from the path for both, `scan.py`). Inside a bucket the rows are ordered by the bucket's
sort columns, or `sort_within`: Spark's bucketed insert sorts by (partition, bucket, SORTED BY) itself, so an
order by table columns is declared as SORTED BY, and an order by helper columns that are not written (curve
values of clustering, a delete's row index) is kept by Spark's concurrent writers, which write rows in the order
they come (`HELPER_ORDER_CONF`).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeError, LakeSchemaError, LakeShuffleError
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.parquet_footers import read_footers
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark import bucketed_read
from airflow_lake.lake.spark.bucket_assign import assign_buckets, varying_counts
from airflow_lake.lake.spark.plan_text import plan_text, query_shuffles, scan_chain, shuffles
from airflow_lake.lake.spark.schema import to_files
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.spec.partitions import (
    NULL_PARTITION,
    check_partition_value,
    null_name_problem,
    parse_partition_dir,
)
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
BUCKET_COLUMN = "__lake_bucket"
COUNT_COLUMN = "__lake_buckets"
# Spark writes timestamps as INT96 by default, which gets no footer stats; TIMESTAMP_MICROS does. A
# bucketed scan feeding a bucketed write stays bucketed (Spark would otherwise turn it into a plain scan,
# since nothing above it asks for the distribution once the write needs no shuffle: `assign_buckets`).
WRITE_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
              "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false"}
# Spark's concurrent writers (planned writes off, so Spark plans no sort of its own): each task writes its rows
# to their files in the order they come, up to this many open files, then sorts the rest (order by helper columns).
HELPER_ORDER_CONF = {"spark.sql.optimizer.plannedWrite.enabled": "false",
                     "spark.sql.maxConcurrentOutputFileWriters": "1024"}
NO_SUCCESS_FILE = "mapreduce.fileoutputcommitter.marksuccessfuljobs"
_BUCKET_ID = re.compile(r"^.*_(\d+)(?:\..*)?$")  # Spark's own pattern for the bucket id in a file name
# Hadoop's defaults name a class for s3a:// (S3AFileSystem, in hadoop-aws) and abfss:// that the pip package lacks
_MISSING_FS_CLASS = re.compile(r"ClassNotFoundException: Class org\.apache\.hadoop\.fs\.\S*FileSystem not found")
DATA_ERROR = "AIRFLOW_LAKE_DATA_ERROR"
_DATA_ERROR_TEXT = re.compile(DATA_ERROR + r": ([^\n]*?)(?:\s*SQLSTATE|\n|$)")


def write_dataframe(df: DataFrame, storage: Storage, spec: TableSpec, instant: str, *,
                    allowed_partitions: Sequence[Mapping[str, str | None]] | None = None,
                    metrics: dict[str, Any] | None = None, sort_within: Sequence[str] | None = None,
                    drop_columns: Sequence[str] = (), bucket_shuffle: bool = True,
                    max_exchanges: int | None = None, plain_columns: Sequence[str] = (),
                    sized_tasks: bool = False) -> list[DataFile]:
    """Write `df` (already conformed to `spec`) as files of `instant`; return them with their stats.

    A bucketed table's rows go to the bucketing of their partition (`buckets.assign.bucket_count`, decided in
    the Spark job); `metrics` (if given) gets `query_exchanges`, the shuffles in the plan of `df`, and
    `write_exchanges`, the shuffles the write adds to it.

    `sort_within` orders the rows of each task (each file) — within a bucket instead of the bucket sort
    columns — (clustering's keys); `drop_columns` are helper columns dropped once the rows are in order.
    `bucket_shuffle=False` writes each task's rows as one file per bucket it holds, without an Exchange
    (`buckets.assign.assign_buckets`); `sized_tasks` shuffles a bucketed write into tasks of whole buckets sized
    by adaptive execution, not one per bucket (`assign_buckets`: for small writes). With `max_exchanges`, more
    shuffles than that (query + write) raise
    `LakeShuffleError` before anything is written. `plain_columns` (physical names) are written without Parquet's
    dictionary encoding (`plain_options`).

    Raises `LakeSchemaError` / `LakeSpecError` for data the table refuses; nothing is committed then (the files
    Spark wrote stay in the write directory until the instant is rolled back).
    """
    keys = list(spec.partition_columns)
    base = write_dir(instant, uuid.uuid4().hex[:8])
    options = plain_options(plain_columns)
    spark = df.sparkSession
    with session_conf(spark, WRITE_CONF):  # (plans below are made with these settings too)
        df = _refuse_bad_partition_strings(df, spec)
        # Projections over a scan of files (an upsert's batch): no shuffle, no hash partitioning, and the one
        # shuffle `assign_buckets` puts over it stays; known from its analyzed plan, without planning the query
        # twice (an explain for the partitioning, one for the shuffles: ~0.025 s of a quiet upsert's driver time).
        chain = spec.bucket is not None and scan_chain(df)
        counted = metrics is not None or max_exchanges is not None
        exchanges_before = query_shuffles(df) if counted and not chain else 0
        # an order by helper columns, which Spark's bucketed insert cannot sort by: the rows come sorted
        helper_order = bool(sort_within) and any(c in drop_columns or not spec.has_column(c) for c in sort_within or ())
        if spec.bucket is not None:
            df = assign_buckets(df, spec, COUNT_COLUMN, BUCKET_COLUMN, sort_within, shuffle=bucket_shuffle,
                                sort=helper_order, sized_tasks=sized_tasks, hashed_like=False if chain else None)
        elif sort_within:  # after the checks above: they project the partition columns anew, and a sort by
            # the old ones would not satisfy the write, which would then re-sort by partition only
            df = df.sortWithinPartitions(*[f"`{c}`" for c in [*keys, *sort_within]])
        if drop_columns:
            df = df.drop(*drop_columns)  # (the order they made stays: the write only needs its prefix)
        df = to_files(df, spec)  # renamed columns go into the files under their physical names
        if counted:  # shuffles of the query, and those the write added
            # Only a bucketed write can add one: a plain write's steps (projections, a sort within each task)
            # never do, so its plan is not made a second time (an explain plans the whole query again). Over a
            # scan chain the bucketed write added exactly its one shuffle, if it shuffles.
            final_plan = plan_text(df) if spec.bucket is not None and not chain else None
            added = (int(bucket_shuffle) if chain else 0) if final_plan is None else \
                shuffles(final_plan) - exchanges_before
            if metrics is not None:
                metrics["query_exchanges"] = exchanges_before
                metrics["write_exchanges"] = added
            if max_exchanges is not None and exchanges_before + added > max_exchanges:
                raise LakeShuffleError(exchanges_before, added, max_exchanges,
                                       plan_text(df) if final_plan is None else final_plan)
        faults.reach("before_write")
        try:
            if spec.bucket is None:
                announce(storage, instant, base)
                targets = [_write_plain(df, storage, base, keys, options=options)]
            else:
                targets = _write_bucketed(df, storage, spec, instant, base, sort_within=sort_within,
                                          helper_order=helper_order, options=options)
        except Exception as err:
            raise data_error(err) or no_file_system(err, storage) or err from err
    files = finish_write(storage, spec, instant, targets, allowed_partitions=allowed_partitions, spark=spark)
    log.info("instant %s wrote %d file(s), %d rows under %s", instant, len(files), sum(f.rows for f in files), base)
    return files


def finish_write(storage: Storage, spec: TableSpec, instant: str, targets: Sequence[Target], *,
                 allowed_partitions: Sequence[Mapping[str, str | None]] | None = None,
                 spark: SparkSession | None = None) -> list[DataFile]:
    """After Spark wrote into `targets`: list them, check the data, read the footers, delete Spark's leftovers;
    the data files with their stats. Plain file-system calls (a listing, reads, deletes): the same on a store."""
    listed = {target.path: storage.walk_files(target.path) for target in targets}  # one listing per directory
    written = _written_files(listed, targets, spec)
    _check_partitions(written, spec, allowed_partitions)
    # Stats are kept by physical name: a rename leaves every file's stats right.
    types = {c.physical: c.type for c in spec.columns if c.name not in spec.partition_columns}
    facts = read_footers([storage.path(w.path) for w in written], types, spark, storage.filesystem)
    files = []
    for item in written:
        fact = facts[storage.path(item.path)]
        if fact.rows == 0:
            # Spark writes a file with no rows for an empty unpartitioned write: deleted with the leftovers
            continue
        bucketing = spec.bucket.bucketing(item.count).key() if spec.bucket and item.count else None
        files.append(DataFile(path=item.path, partition=item.partition, rows=fact.rows, bytes=fact.bytes,
                              bucket=item.bucket, instant=instant, stats=fact.stats, bucketing=bucketing))
    _check_not_null(files, spec)
    _delete_leftovers(storage, listed, {f.path for f in files})
    return files


def no_file_system(err: Exception, storage: Storage) -> LakeError | None:
    """Spark has no Hadoop file system for the store's scheme (no connector on its classpath), as a clear error."""
    text = str(err)
    if storage.local or not ("No FileSystem for scheme" in text or _MISSING_FS_CLASS.search(text)):
        return None
    scheme = storage.uri("").split(":", 1)[0]
    return LakeError(f"{storage.url}: Spark has no file system for {scheme}:// (its connector is not on the "
                     "classpath); nothing was committed. Fix: add the store's Hadoop connector to the Spark job, "
                     "e.g. for S3 --packages org.apache.hadoop:hadoop-aws:<Spark's Hadoop version> and the "
                     "fs.s3a settings (README, \"Tables on object stores\").")


def write_dir(instant: str, write_id: str) -> str:
    """The directory one write of `instant` puts its files in (bucketed writes add `-b<count>` / `-plain`)."""
    return f"{paths.DATA}/{instant}-{write_id}"


def announce(storage: Storage, instant: str, target: str) -> None:
    """Name a write directory in a manifest of `instant` before Spark writes into it: a rollback deletes what
    is there (a manifest entry ending in `/` stands for every file under it)."""
    instants.write_manifest(storage, instant, [target + "/"])


def plain_options(columns: Sequence[str]) -> dict[str, str]:
    """Writer options that turn Parquet's dictionary encoding off for `columns` (physical names; parquet-mr's
    per-column setting, `parquet.enable.dictionary#<column>`).

    For a column whose values are mostly distinct in each file (an upsert's keys) the writer builds a dictionary
    of every value, hashing and comparing each one, and then writes nearly every value again as its entry: in the
    BDCI upserts that was the largest single cost of the write stage (docs/benchmarks.md section 7, (d))."""
    return {f"parquet.enable.dictionary#{c}": "false" for c in columns}


def _write_plain(df: DataFrame, storage: Storage, target: str, keys: Sequence[str], *,
                 options: Mapping[str, str] | None = None) -> Target:
    """Spark's partitioned Parquet write into `target` (no `_SUCCESS`: a writer option, not a session conf)."""
    writer = df.write.mode("error").format("parquet").option(NO_SUCCESS_FILE, "false").options(**(options or {}))
    if keys:
        writer = writer.partitionBy(*keys)
    writer.save(storage.uri(target))  # "errorifexists" is unknown to Spark Connect: "error"
    return Target(target, None, bucketed=False)


def _write_bucketed(df: DataFrame, storage: Storage, spec: TableSpec, instant: str, base: str, *,
                    sort_within: Sequence[str] | None, helper_order: bool,
                    options: Mapping[str, str] | None = None) -> list[Target]:
    """One insert per bucket count present in `df` (rows carry their count and bucket from `assign_buckets`)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    bucket = spec.bucket
    assert bucket is not None
    if not varying_counts(spec):
        announce(storage, instant, f"{base}-b{bucket.count}")
        return [_insert_bucketed(df.drop(BUCKET_COLUMN), storage, spec, f"{base}-b{bucket.count}", bucket.count,
                                 sort_within=sort_within, helper_order=helper_order, options=options)]
    cached = df.persist(StorageLevel.MEMORY_AND_DISK)  # each count's insert reads it once, not the query again
    try:
        present = [row[0] for row in cached.select(COUNT_COLUMN).distinct().collect()]
        targets = []
        for count in sorted(present, key=lambda c: -1 if c is None else int(c)):
            rows = cached.where(F.col(COUNT_COLUMN).isNull() if count is None else F.col(COUNT_COLUMN) == count)
            rows = rows.drop(COUNT_COLUMN, BUCKET_COLUMN)
            announce(storage, instant, f"{base}-plain" if count is None else f"{base}-b{count}")
            if count is None:  # plain partitions before `from_partition`, each task's rows in the bucket order
                if not helper_order:
                    rows = rows.sortWithinPartitions(*[f"`{c}`" for c in _plain_order(spec, sort_within)])
                targets.append(_write_plain(rows, storage, f"{base}-plain", spec.partition_columns, options=options))
            else:
                targets.append(_insert_bucketed(rows, storage, spec, f"{base}-b{count}", int(count),
                                                sort_within=sort_within, helper_order=helper_order,
                                                options=options))
        return targets
    finally:
        cached.unpersist()


def _plain_order(spec: TableSpec, sort_within: Sequence[str] | None) -> list[str]:
    """The physical columns plain files of a bucketed table are sorted by: partition columns (the order Spark's
    partitioned write needs, so it adds no sort of its own), then the bucket's sort columns (or `sort_within`)."""
    bucket = spec.bucket
    assert bucket is not None
    keys = list(spec.partition_columns)
    return keys + [spec.physical_of(c) for c in (bucket.sort_columns if sort_within is None else sort_within)
                   if c not in keys]


def _insert_bucketed(df: DataFrame, storage: Storage, spec: TableSpec, target: str, count: int, *,
                     sort_within: Sequence[str] | None, helper_order: bool,
                     options: Mapping[str, str] | None = None) -> Target:
    """Spark's bucketed insert of `df` into `target`, through a temporary external catalog table over it.

    Spark sorts a bucketed write by (partition, bucket, SORTED BY) itself: an order by table columns is declared
    as SORTED BY; an order by helper columns (already dropped, `helper_order`) goes through the concurrent
    writers, which keep the order the rows come in."""
    bucket = spec.bucket
    assert bucket is not None
    partition = set(spec.partition_columns)
    order = list(bucket.sort_columns if sort_within is None else sort_within)
    sort_by = [] if helper_order else [spec.physical_of(c) for c in order if c not in partition]
    name = f"{bucketed_read.CATALOG_DATABASE}.lake_w_{uuid.uuid4().hex}"
    writer = df.write.mode("error").format("parquet").option("path", storage.uri(target)) \
        .option(NO_SUCCESS_FILE, "false").option("maxRecordsPerFile", 0).options(**(options or {})) \
        .bucketBy(count, *[spec.physical_of(c) for c in bucket.columns])
    if sort_by:
        writer = writer.sortBy(*sort_by)
    if spec.partition_columns:
        writer = writer.partitionBy(*spec.partition_columns)
    conf = {bucketed_read.MANAGE_PARTITIONS: "false", **(HELPER_ORDER_CONF if helper_order else {})}
    try:
        with session_conf(df.sparkSession, conf):
            writer.saveAsTable(name)
    finally:
        df.sparkSession.sql(f"DROP TABLE IF EXISTS {name}")  # an external table: its files stay
    return Target(target, count, bucketed=True)


class Target:
    """A directory one Spark write put files in, with their bucket count (None: plain files)."""

    __slots__ = ("bucketed", "count", "path")

    def __init__(self, path: str, count: int | None, *, bucketed: bool) -> None:
        self.path = path
        self.count = count
        self.bucketed = bucketed


class _Written:
    """A data file Spark wrote into a write directory."""

    __slots__ = ("bucket", "count", "partition", "path")

    def __init__(self, path: str, partition: dict[str, str | None], bucket: int | None, count: int | None) -> None:
        self.path = path
        self.partition = partition
        self.bucket = bucket
        self.count = count


def _written_files(listed: Mapping[str, list[str]], targets: Sequence[Target], spec: TableSpec) -> list[_Written]:
    """The data files in the write directories, as `listed` (Spark's `_SUCCESS`, `.crc` and `_temporary` are not)."""
    out = []
    for target in targets:
        for rel in listed[target.path]:
            if not is_data_file(rel[len(target.path) + 1:]):
                continue
            inner = rel[len(target.path) + 1:]
            values = parse_partition_dir(inner.rsplit("/", 1)[0] if "/" in inner else "")
            partition = {c: values.get(c) for c in spec.partition_columns}
            bucket = None
            if target.bucketed:
                match = _BUCKET_ID.match(inner.rsplit("/", 1)[-1])
                if match is None:
                    raise LakeError(f"Spark wrote {rel!r} without a bucket id in its name; nothing was committed.")
                bucket = int(match.group(1))
            out.append(_Written(rel, partition, bucket, target.count if target.bucketed else None))
    return sorted(out, key=lambda w: w.path)


def is_data_file(inner: str) -> bool:
    """Whether a path inside a write directory is a data file (not Spark's `_SUCCESS`, `.crc`, `_temporary`)."""
    segments = inner.split("/")
    return inner.endswith(".parquet") and not any(s.startswith(("_", ".")) for s in segments)


def _delete_leftovers(storage: Storage, listed: Mapping[str, list[str]], kept: set[str]) -> None:
    """Delete what Spark left in the write directories besides the data files kept: `.crc` and `_SUCCESS` files and
    files with no rows (deletes, which a store has; never a rename)."""
    faults.reach("during_place")  # (the name from when files were moved into place: the files are written)
    for files in listed.values():
        for rel in files:
            if rel not in kept:
                storage.delete(rel)


def _check_partitions(written: list[_Written], spec: TableSpec,
                      allowed: Sequence[Mapping[str, str | None]] | None) -> None:
    allowed_keys = None if allowed is None else {tuple(sorted(p.items())) for p in allowed}
    for item in written:
        for column, value in item.partition.items():
            check_partition_value(column, value, "source")
            if value is None and not spec.column(column).nullable:
                raise LakeSchemaError(not_null_message(column))
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
            raise LakeSchemaError(not_null_message(column.name))


def not_null_message(column: str) -> str:
    return (f"column {column!r} is NOT NULL in the table, but the source has nulls in it; nothing was "
            "committed. Fix: filter or fill the nulls in the source.")


# A path segment `col=<escaped value>` must fit in a file name (255 bytes on common file systems).
MAX_SEGMENT_BYTES = 255
_ESCAPED_CLASS = "[\\x00-\\x1F\"#%'*/:=?\\\\\\x7F{\\[\\]^]"  # what `partitions.escape` turns into %XX


def _refuse_bad_partition_strings(df: DataFrame, spec: TableSpec) -> DataFrame:
    """Refuse, in the Spark job itself, string partition values Spark would write wrongly or not at all:
    an empty string or `__HIVE_DEFAULT_PARTITION__` (both written as NULL) and a value whose directory
    name would be too long.

    Every row is checked, so the check must cost next to nothing per row: a value of at most a third of the
    room in bytes fits even if every byte were escaped (an escaped character is one ASCII byte, written as 3),
    and is taken as it is from its byte length alone; only longer values count their escaped characters (a
    regular expression on every row added ~30% to reading and sorting 3M rows of 16 values).

    The check is one SQL expression (`_partition_check_sql`), parsed by Spark in one call: built from DataFrame
    functions it took ~200 calls to the JVM per write (each function is looked up and called there), a fixed
    0.1-0.2 s on a busy driver. Its optimized plan is the same (the texts' literals are folded)."""
    from pyspark.sql import functions as F

    for name in spec.partition_columns:
        if spec.column(name).type != "string":
            continue
        df = df.withColumn(name, F.expr(_partition_check_sql(name)))
    return df


def _partition_check_sql(name: str) -> str:
    """The value of string partition column `name`, or `raise_error` of why Spark cannot write it (see
    `_refuse_bad_partition_strings`)."""
    col = "`" + name.replace("`", "``") + "`"
    room = MAX_SEGMENT_BYTES - len(name) - 1  # bytes left for the value after `name=`
    escaped = f"(length({col}) - length(regexp_replace({col}, {_sql_text(_ESCAPED_CLASS)}, '')))"
    segment = f"{len(name) + 1} + octet_length({col}) + 2 * {escaped}"
    empty = f"{DATA_ERROR}: {empty_partition_message(name)}"
    too_long = f"{DATA_ERROR}: {too_long_message(name)}"
    null_name = f"{DATA_ERROR}: {null_name_problem(name)}"
    return (f"CASE WHEN {col} = '' THEN raise_error({_sql_text(empty)}) "
            f"WHEN {col} = {_sql_text(NULL_PARTITION)} THEN raise_error({_sql_text(null_name)}) "
            f"WHEN octet_length({col}) <= {room // 3} THEN {col} "  # fits, whatever it escapes
            f"WHEN {segment} > {MAX_SEGMENT_BYTES} THEN raise_error({_sql_text(too_long)}) "
            f"ELSE {col} END")


def empty_partition_message(name: str) -> str:
    """Why an empty string is refused as a value of partition column `name`, and the fix."""
    return (f"partition column {name!r} has an empty string value, which Spark would write as NULL; nothing was "
            "committed. Fix: map empty strings to a value or to NULL in the source.")


def too_long_message(name: str) -> str:
    """Why a value of partition column `name` too long for a directory name is refused, and the fix."""
    return (f"partition column {name!r} has a value too long for a directory name (`{name}=<value>` must fit in "
            f"{MAX_SEGMENT_BYTES} bytes once escaped); nothing was committed. Fix: shorten the values (e.g. a hash "
            "or a prefix) or partition by another column.")


def _sql_text(text: str) -> str:
    """A SQL string of `text` that needs no escaping, whatever it holds and however the session parses string
    literals (`spark.sql.parser.escapedStringLiterals`): its UTF-8 bytes in hex, cast back to a string (a
    constant: Spark folds it into the literal)."""
    return f"CAST(unhex('{text.encode().hex()}') AS STRING)"


def data_error(err: Exception) -> LakeError | None:
    """Our own data error raised in a Spark task, unwrapped from Spark's exception."""
    text = str(err)
    match = _DATA_ERROR_TEXT.search(text)
    if match:
        return LakeSchemaError(match.group(1).strip())
    legacy = re.search(r"airflow_lake\.lake\.errors\.(LakeSchemaError|LakeSpecError): ([^\n]*)", text)
    return LakeSchemaError(legacy.group(2)) if legacy else None
