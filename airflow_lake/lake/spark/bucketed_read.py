"""Reading a snapshot as a Spark bucketed table: a catalog table over exactly the files the scan selected.

Spark plans a bucketed scan (bucket pruning, joins and aggregations without a shuffle) only for a catalog
table with a bucket spec. Per read, we create one in the session's catalog (the in-memory catalog is
enough; it lives as long as the session) whose `LOCATION` is a glob of the directories of the selected files
and whose `pathGlobFilter` names their names. That narrows the listing but is not exact (a name repeats in
the partition directories of one write; anything can be dropped beside the live files): what is read is
decided by `scan.exactly`, a `_metadata.file_path` IN (the live files) predicate by which Spark prunes
files at planning, which keeps the bucketed scan (`SelectedBucketsCount`, joins without an Exchange). Two
Spark facts matter besides:

- `spark.sql.hive.manageFilesourcePartitions` is false while the table is created, so the table does not
  track partitions in the catalog (with it, Spark ignores `pathGlobFilter` on partitioned tables and lists
  every file of the partition directories). The table keeps that for its life; the setting is restored.
- Spark silently skips a file whose bucket id (from its name) is >= the registered count, so the files of
  one catalog table all share one bucketing (`Bucketing`), and an id out of range is an error here.

A read whose files do not share one bucketing (plain partitions of a table bucketed from a partition on,
partitions with their own counts) is the union of one scan per bucketing: every row, bucket pruning in
each part, but a join or group-by above the union shuffles (Spark keeps no partitioning across a union of
different bucketings).
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.spark.globs import dirs_glob, name_glob
from airflow_lake.lake.spark.scan import Scan, exactly, sql_string
from airflow_lake.lake.spark.schema import from_files
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.spec.bucketing import Bucketing

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.spec.table_spec import TableSpec

log = logging.getLogger(__name__)
MANAGE_PARTITIONS = "spark.sql.hive.manageFilesourcePartitions"
# Always the session catalog (a bucket spec needs it), whatever catalog or database the session is using.
CATALOG_DATABASE = "spark_catalog.default"
# Session settings that let Spark use the buckets fully: bucket pruning shows (and is kept) for point
# queries, joins of tables whose counts are multiples (8 x 16) coalesce instead of shuffling, and joins on
# more keys than the bucket keys (k, dt = k, dt on tables bucketed by k) keep the buckets.
READ_CONF = {
    "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
    "spark.sql.bucketing.coalesceBucketsInJoin.enabled": "true",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
}
# The catalog tables this process created for reads. Spark's in-memory catalog is shared by all sessions of
# a Spark application (a long-running Spark Connect server too): `drop_read_tables` removes them.
_CREATED: list[str] = []


@dataclass(frozen=True)
class Part:
    """Files of a read that share one bucketing (None: plain files)."""

    bucketing: Bucketing | None
    files: tuple[DataFile, ...]


def split_by_bucketing(files: Sequence[DataFile], spec: TableSpec) -> list[Part]:
    """The files grouped by bucketing, the largest group first."""
    groups: dict[Bucketing | None, list[DataFile]] = {}
    for data_file in files:
        bucketing = file_bucketing(data_file, spec)
        if bucketing is not None and not 0 <= int(data_file.bucket or 0) < bucketing.count:
            raise LakeError(f"file {data_file.path!r} has bucket id {data_file.bucket}, outside its "
                            f"{bucketing.count} buckets; Spark would skip it. The table's metadata is damaged.")
        groups.setdefault(bucketing, []).append(data_file)
    return [Part(b, tuple(fs)) for b, fs in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def scan_df(spark: SparkSession, scan: Scan) -> DataFrame:
    """The scan's rows, as a bucketed scan where its files share a bucketing; the scan's filters applied."""
    spec = scan.snapshot.spec
    parts = split_by_bucketing(scan.files, spec)
    if not any(p.bucketing for p in parts):
        return scan.to_df(spark)  # a plain read: Spark reads exactly the listed files
    frames = [_part_df(spark, scan, part) for part in parts]
    if len(frames) > 1:
        log.info("the read spans %d bucketings (%s): read as a union; joins and aggregations above it shuffle",
                 len(frames), ", ".join(p.bucketing.key() if p.bucketing else "plain" for p in parts))
    df = reduce(lambda a, b: a.unionByName(b), frames)
    return scan.apply_filters(df)


def register(spark: SparkSession, scan: Scan, name: str) -> DataFrame:
    """Register the scan's rows as the temporary view `name` (bucketed as `scan_df`); return its DataFrame."""
    df = scan_df(spark, scan)
    df.createOrReplaceTempView(name)
    return df


def _part_df(spark: SparkSession, scan: Scan, part: Part) -> DataFrame:
    spec = scan.snapshot.spec
    if part.bucketing is None:
        plain = type(scan)(scan.storage, scan.snapshot, (), part.files)
        return plain.to_df(spark)
    table = f"{CATALOG_DATABASE}.lake_{uuid.uuid4().hex}"
    directories = sorted({posixpath.dirname(f.path) for f in part.files})
    # One partition (a day's read, the common case): the table is that partition's directories (one per write
    # that put files in it), unpartitioned, and the partition values are constants, so Spark lists only them.
    single = bool(spec.partition_columns) and len({f.partition_key() for f in part.files}) == 1
    names = spec.data_columns if single else spec.column_names
    # The catalog table has the files' columns, by their physical names; one projection names them as the table.
    columns = ", ".join(f"{_ident(spec.physical_of(c))} {spec.column(c).type}" for c in names)
    partitioned = f"PARTITIONED BY ({', '.join(map(_ident, spec.partition_columns))}) " \
        if spec.partition_columns and not single else ""
    # LOCATION: a glob of exactly the directories read (never the root: it holds every write directory ever made,
    # replaced and uncommitted ones too). basePath and ignoreInvalidPartitionPaths make Spark take partition values
    # from the `col=value` segments below a write directory (`data/<instant>-<write id>/`).
    options = {"pathGlobFilter": name_glob([posixpath.basename(f.path) for f in part.files])}
    if "" in directories:  # files at the root (an unpartitioned table written before write directories) and maybe
        # below `data/`: LOCATION is the root, whose subdirectories a catalog table reads only this way
        options["recursiveFileLookup"] = "true"
    if spec.partition_columns and not single:  # (without partitions nothing conflicts, and the option would drop
        # the files below `data/<...>/` of a table that also has files at its root: checked)
        options.update(basePath=scan.storage.uri(""), ignoreInvalidPartitionPaths="true")
    # A file's bucketing names its columns as the spec did when it was written; alter_table never renames
    # a column that live files are bucketed by, so the spec still knows them.
    clustered = [spec.physical_of(c) if spec.has_column(c) else c for c in part.bucketing.columns]
    statement = (
        f"CREATE TABLE {table} ({columns}) USING parquet {partitioned}"
        f"CLUSTERED BY ({', '.join(map(_ident, clustered))}) INTO {part.bucketing.count} BUCKETS "
        f"LOCATION {sql_string(dirs_glob(scan.storage.uri(''), directories))} "
        f"OPTIONS ({', '.join(f'{key} {sql_string(value)}' for key, value in options.items())})"
    )
    with session_conf(spark, {MANAGE_PARTITIONS: "false"}):
        spark.sql(statement)
    _CREATED.append(table)
    df = exactly(spark.table(table), scan.storage, part.files)
    if single:
        from pyspark.sql import functions as F

        values = part.files[0].partition
        df = df.select("*", *[F.lit(values.get(c)).cast(spec.column(c).type).alias(c) for c in spec.partition_columns])
    return from_files(df, spec)


def read_tables_mark() -> int:
    """A mark to pass to `drop_read_tables` to drop only the tables created after it."""
    return len(_CREATED)


def drop_read_tables(spark: SparkSession, since: int = 0) -> int:
    """Drop the catalog tables this process created for bucketed reads (after mark `since`); their
    DataFrames then fail. They are external tables: no data file is touched. Returns how many."""
    dropped = 0
    while len(_CREATED) > since:
        spark.sql(f"DROP TABLE IF EXISTS {_CREATED.pop()}")
        dropped += 1
    return dropped


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
