"""Reading a change window (`window.py`) with Spark: the end spec's columns plus `_change_type`, `_commit_seq` and
`_commit_time`.

Plain tables, commit by commit. A commit that only adds files (an append) inserts their rows and one that only
removes files deletes theirs: read as they are, no comparison. A commit that removes and adds (an overwrite, a
copy-on-write delete, a restore) inserts rows(added) minus rows(removed) and deletes rows(removed) minus
rows(added), as multisets: the rows a rewrite merely carried over appear in neither. All such commits are compared
in one aggregation (per commit and row, the added copies minus the removed ones; Spark's `exceptAll` does the
same per pair of inputs), and each kind of file is read in one scan whose rows learn their commit from their file
(`_metadata.file_path`, joined with a small table of the window's files), so a window of a thousand appends is one
scan, not a union of a thousand.

Primary-key tables, per key over the merged state. The keys touched are those in the files the window's data
commits added or removed (upsert deltas, delete tombstones, a restore's files); each touched key's merged row is
read at `start` and at `end` (`upsert.merge_read.merged`, over only the partitions and, where the files share a
bucketing, the buckets those files are in) and compared: present only at the end, an insert; only at the start, a
delete; at both and different, an update_preimage and an update_postimage; equal (a late lower version the merge
ignores, a delete of a key that was not there) nothing. A key's `_commit_seq` is the last data commit of the window
that touched it.

`filters` prune files as a read's do and apply to the rows as a read returns them: for a primary-key table to the
merged rows at both ends before they are compared, so a key that enters the filter is an insert.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.changes.window import FROM_EMPTY, ChangeWindow
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.filters import Filter, may_match, parse_filters
from airflow_lake.lake.format.snapshots import Snapshot, files_in_partitions
from airflow_lake.lake.spark.file_uris import spark_file_uri
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.spark.schema import to_struct
from airflow_lake.lake.upsert.merge_read import merged, raw_scan
from airflow_lake.lake.upsert.physical import physical_spec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.spec.table_spec import TableSpec

__all__ = ["CHANGE_COLUMNS", "CHANGE_TYPE", "CHANGE_TYPES", "COMMIT_SEQ", "COMMIT_TIME", "read_changes"]
log = logging.getLogger(__name__)

CHANGE_TYPE = "_change_type"
COMMIT_SEQ = "_commit_seq"
COMMIT_TIME = "_commit_time"
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_SEQ, COMMIT_TIME)
INSERT, DELETE, PREIMAGE, POSTIMAGE = "insert", "delete", "update_preimage", "update_postimage"
CHANGE_TYPES = (INSERT, DELETE, PREIMAGE, POSTIMAGE)
# helper columns while reading (`__lake_` names are the format's: no table column takes one)
_FILE, _SEQ, _SIGN, _MICROS = "__lake_chg_file", "__lake_chg_seq", "__lake_chg_sign", "__lake_chg_micros"
_COUNT, _BEFORE, _AFTER, _ROW = "__lake_chg_n", "__lake_chg_before", "__lake_chg_after", "__lake_chg_row"


@dataclasses.dataclass(frozen=True)
class _Tag:
    """A file read for a commit: +1 its rows were added, -1 removed."""

    data_file: DataFile
    seq: int
    sign: int
    micros: int  # the commit's completed_at, in microseconds (what a timestamp holds)


def read_changes(table: TableMetadata, spark: SparkSession, window: ChangeWindow,
                 filters: Iterable[Sequence[Any]] | None = None) -> DataFrame:
    """The window's changes as rows (module docstring). An empty window reads no file."""
    spec = window.spec
    clash = [c for c in spec.column_names if c.lower() in CHANGE_COLUMNS]
    if clash:
        raise LakeSpecError("columns", f"the table has a column named {clash[0]!r}, which the changes add "
                            f"({', '.join(CHANGE_COLUMNS)}).",
                            f"Rename it (alter_table [{{'rename': {clash[0]!r}, 'to': ...}}]).")
    parsed = parse_filters(filters, spec)
    log.info("%s of %s", window.describe(), table.url)
    if window.empty:
        return _no_rows(spark, spec)
    if spec.primary_key:
        return _keyed_changes(table, spark, window, parsed, filters)
    return _plain_changes(table, spark, window, parsed)


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _output(spec: TableSpec, change: Column, seq: Column, micros: Column) -> list[Column]:
    from pyspark.sql import functions as F

    return [*[F.col(_ident(c)) for c in spec.column_names], change.alias(CHANGE_TYPE),
            seq.cast("bigint").alias(COMMIT_SEQ), F.timestamp_micros(micros).alias(COMMIT_TIME)]


def _no_rows(spark: SparkSession, spec: TableSpec) -> DataFrame:
    from pyspark.sql import types as T

    schema = to_struct(spec)
    for name, kind in zip(CHANGE_COLUMNS, (T.StringType(), T.LongType(), T.TimestampType()), strict=True):
        schema = schema.add(name, kind, True)
    return spark.createDataFrame([], schema)


# -- plain tables --------------------------------------------------------------------------------------------------
def _plain_changes(table: TableMetadata, spark: SparkSession, window: ChangeWindow,
                   parsed: list[Filter]) -> DataFrame:
    from pyspark.sql import functions as F

    spec = window.spec
    direct: list[_Tag] = []  # appends, removals without additions, the initial files: their rows as they are
    compared: list[_Tag] = []  # rewrites: added minus removed
    for commit in window.commits:
        into = compared if commit.removed and commit.added else direct
        micros = _micros(commit.completed_at)
        into += [_Tag(f, commit.seq, 1, micros) for f in commit.added]
        into += [_Tag(f, commit.seq, -1, micros) for f in commit.removed]
    direct += [_Tag(f, window.end, 1, _micros(window.end_completed_at)) for f in window.initial]
    # a file whose stats rule the filters out holds no row the changes could return
    direct = [t for t in direct if may_match(t.data_file, parsed, spec)]
    compared = [t for t in compared if may_match(t.data_file, parsed, spec)]
    frames = []
    if direct:
        df = _tagged(table, spark, window, spec, direct, parsed=parsed)
        change = F.when(F.col(_SIGN) > 0, F.lit(INSERT)).otherwise(F.lit(DELETE))
        frames.append(df.select(*_output(spec, change, F.col(_SEQ), F.col(_MICROS))))
    if compared:
        df = _tagged(table, spark, window, spec, compared, parsed=parsed)
        columns = [F.col(_ident(c)) for c in spec.column_names]
        counted = df.groupBy(F.col(_SEQ), F.col(_MICROS), *columns).agg(F.sum(_SIGN).alias(_COUNT)) \
            .where(F.col(_COUNT) != 0)
        # each surplus copy of a row is one change: `exceptAll`'s replication
        copies = counted.withColumn(_ROW, F.explode(F.sequence(F.lit(1), F.abs(F.col(_COUNT)))))
        change = F.when(F.col(_COUNT) > 0, F.lit(INSERT)).otherwise(F.lit(DELETE))
        frames.append(copies.select(*_output(spec, change, F.col(_SEQ), F.col(_MICROS))))
    if not frames:
        return _no_rows(spark, spec)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _tagged(table: TableMetadata, spark: SparkSession, window: ChangeWindow, spec: TableSpec, tags: Sequence[_Tag],
            *, parsed: Sequence[Filter] = ()) -> DataFrame:
    """The rows of the tagged files, read in `spec`'s columns as a snapshot read reads them (`Scan`), the filters
    applied, each row once per tag of its file with the tag's commit, sign and time."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files = tuple({t.data_file.path: t.data_file for t in tags}.values())
    snapshot = Snapshot(window.end, "", spec, files, window.end_completed_at)
    df = Scan(table.storage, snapshot, tuple(parsed), files).to_df(spark)
    schema = T.StructType([T.StructField(_FILE, T.StringType(), False), T.StructField(_SEQ, T.LongType(), False),
                           T.StructField(_SIGN, T.IntegerType(), False),
                           T.StructField(_MICROS, T.LongType(), False)])
    rows = [(spark_file_uri(table.storage, t.data_file.path), t.seq, t.sign, t.micros) for t in tags]
    where = spark.createDataFrame(rows, schema)
    path = df.metadataColumn("_metadata").getField("file_path")
    return df.withColumn(_FILE, path).join(F.broadcast(where), _FILE).drop(_FILE)


# -- primary-key tables -------------------------------------------------------------------------------------------
def _key_columns(spec: TableSpec) -> list[str]:
    """A key's identity: the partition columns and the primary key (a key is unique within a partition)."""
    return [*spec.partition_columns, *[k for k in spec.primary_key if k not in spec.partition_columns]]


def _keyed_changes(table: TableMetadata, spark: SparkSession, window: ChangeWindow, parsed: list[Filter],
                   filters: Iterable[Sequence[Any]] | None) -> DataFrame:
    from pyspark.sql import functions as F

    spec = window.spec
    end = dataclasses.replace(table.snapshot(window.end), spec=spec)
    if window.start == FROM_EMPTY:  # the merged snapshot, every key an insert
        rows = _merged_rows(spark, table, end, window.initial, parsed=parsed, filters=filters)
        micros = F.lit(_micros(window.end_completed_at)).cast("bigint")
        return rows.select(*_output(spec, F.lit(INSERT), F.lit(window.end), micros))
    keys = _key_columns(spec)
    touched = _touched_keys(table, spark, window, parsed)
    partitions = window.partitions()
    near = [t.data_file for t in _touching(window, parsed)]
    start = dataclasses.replace(table.snapshot(window.start), spec=spec)
    before = _merged_rows(spark, table, start, _needed(files_in_partitions(start.files, partitions), near),
                          parsed=parsed, filters=filters)
    after = _merged_rows(spark, table, end, _needed(files_in_partitions(end.files, partitions), near),
                         parsed=parsed, filters=filters)
    everything = [F.col(_ident(c)) for c in spec.column_names]

    def side(df: DataFrame, prefix: str, name: str) -> DataFrame:
        return df.select(*[F.col(_ident(k)).alias(f"{prefix}{i}") for i, k in enumerate(keys)],
                         F.struct(*everything).alias(name))

    joined = touched
    for df, prefix, name in ((before, "__lake_chg_b", _BEFORE), (after, "__lake_chg_a", _AFTER)):
        other = side(df, prefix, name)
        on = [F.col(f"__lake_chg_t{i}").eqNullSafe(F.col(f"{prefix}{i}")) for i in range(len(keys))]
        joined = joined.join(other, on=_all(on), how="left")
    b, a = F.col(_BEFORE), F.col(_AFTER)

    def change(kind: str, row: Column) -> Column:
        return F.struct(F.lit(kind).alias("t"), row.alias("r"))

    changes = (F.when(b.isNull() & a.isNotNull(), F.array(change(INSERT, a)))
               .when(b.isNotNull() & a.isNull(), F.array(change(DELETE, b)))
               .when(b.isNotNull() & a.isNotNull() & ~b.eqNullSafe(a),
                     F.array(change(PREIMAGE, b), change(POSTIMAGE, a))))
    rows = joined.select(F.explode(changes).alias(_ROW), F.col(_SEQ), F.col(_MICROS))
    flat = rows.select(*[F.col(f"{_ROW}.r.{_ident(c)}").alias(c) for c in spec.column_names],
                       F.col(f"{_ROW}.t").alias(_ROW), F.col(_SEQ), F.col(_MICROS))
    return flat.select(*_output(spec, F.col(_ROW), F.col(_SEQ), F.col(_MICROS)))


def _all(conditions: list[Column]) -> Column:
    out = conditions[0]
    for condition in conditions[1:]:
        out = out & condition
    return out


def _touching(window: ChangeWindow, parsed: Sequence[Filter]) -> list[_Tag]:
    """The files of the window's data commits that may hold keys the filters keep (by their key and partition
    stats: a stale value column must not hide a key)."""
    spec = window.spec
    keyed = [f for f in parsed if f.column in spec.primary_key or f.column in spec.partition_columns]
    return [_Tag(f, c.seq, 1, _micros(c.completed_at)) for c in window.commits for f in (*c.removed, *c.added)
            if may_match(f, keyed, spec)]


def _touched_keys(table: TableMetadata, spark: SparkSession, window: ChangeWindow,
                  parsed: Sequence[Filter]) -> DataFrame:
    """Each key in the window's files, with the last data commit that touched it (`__lake_chg_t<i>` key columns,
    `_SEQ`, `_MICROS`)."""
    from pyspark.sql import functions as F

    spec = window.spec
    keys = _key_columns(spec)
    tags = _touching(window, parsed)
    if not tags:  # nothing the filters keep was touched
        schema = ", ".join([*[f"{_ident(f'__lake_chg_t{i}')} {spec.column(k).type}" for i, k in enumerate(keys)],
                            f"{_SEQ} BIGINT", f"{_MICROS} BIGINT"])
        return spark.createDataFrame([], schema)
    df = _tagged(table, spark, window, physical_spec(spec), tags)
    last = F.max(F.struct(F.col(_SEQ), F.col(_MICROS))).alias(_ROW)
    grouped = df.groupBy(*[F.col(_ident(k)).alias(f"__lake_chg_t{i}") for i, k in enumerate(keys)]).agg(last)
    return grouped.select(*[f"__lake_chg_t{i}" for i in range(len(keys))], F.col(f"{_ROW}.{_SEQ}").alias(_SEQ),
                          F.col(f"{_ROW}.{_MICROS}").alias(_MICROS))


def _needed(files: Sequence[DataFile], touching: Sequence[DataFile]) -> list[DataFile]:
    """Of a touched partition's files, those that may hold a touched key: a file bucketed like every touched file of
    its partition holds only keys of its own bucket, so it is left out when no touched file is in that bucket."""
    by_partition: dict[Any, list[DataFile]] = {}
    for data_file in touching:
        by_partition.setdefault(data_file.partition_key(), []).append(data_file)
    out = []
    for data_file in files:
        near = by_partition.get(data_file.partition_key(), [])
        if data_file.bucket is None or data_file.bucketing is None or any(
                t.bucket is None or t.bucketing != data_file.bucketing or t.bucket == data_file.bucket for t in near):
            out.append(data_file)
    return out


def _merged_rows(spark: SparkSession, table: TableMetadata, snapshot: Snapshot, files: Sequence[DataFile], *,
                 parsed: Sequence[Filter], filters: Iterable[Sequence[Any]] | None) -> DataFrame:
    """The merged rows of `files` of `snapshot` (one per key), in the snapshot spec's columns, the filters applied
    to them as a read applies them."""
    spec = snapshot.spec
    if not files:
        return spark.createDataFrame([], to_struct(spec))
    scan = raw_scan(table, snapshot, files, filters)
    df = merged(spark, scan, spec).select(*[_ident(c) for c in spec.column_names])
    return Scan(table.storage, snapshot, tuple(parsed), ()).apply_filters(df)


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
