"""The merged read of a primary-key table: one row per key, each column merged over the base and delta
files in version order (`physical.merge_aggregates`).

The files are read as one Spark bucketed table (`buckets.catalog`) bucketed by the key, so the group-by
on the partition and key columns needs no Exchange: each bucket is merged where it is read. Filters on key
and partition columns skip files and buckets before the merge; filters on value columns apply after it
(a file's stale value must not hide a key's newer one).

When a file read holds delete rows or watermarks (its `__lake_d` stats say so), each row first gets its key's
watermark from a window over the same grouping (a sort within each bucket, still no Exchange), and the
aggregates skip what the watermark removed (`physical.py`). Tables that never had a delete keep the plain
aggregate.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.format.filters import may_match, parse_filters
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.upsert.physical import (
    DELETED,
    EXISTS,
    WATERMARK,
    has_deletes,
    merge_aggregates,
    physical_spec,
    row_stamped,
    with_row_stamps,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.format.snapshots import Snapshot
    from airflow_lake.lake.format.table_metadata import AsOf, TableMetadata
    from airflow_lake.lake.spec.table_spec import TableSpec

log = logging.getLogger(__name__)


def raw_scan(table: TableMetadata, snapshot: Snapshot, files: Sequence[Any] | None = None,
             filters: Iterable[Sequence[Any]] | None = None) -> Scan:
    """A scan of the files with their stamp columns; key and partition `filters` skip files."""
    spec = snapshot.spec
    keys = {*spec.primary_key, *spec.partition_columns}
    parsed = [f for f in parse_filters(filters, spec) if f.column in keys]
    chosen = tuple(f for f in (snapshot.files if files is None else files) if may_match(f, parsed, spec))
    return Scan(table.storage, dataclasses.replace(snapshot, spec=physical_spec(spec)), tuple(parsed), chosen)


def merged(spark: SparkSession, scan: Scan, spec: TableSpec, *, keep_stamps: bool = False) -> DataFrame:
    """The rows of `scan` (from `raw_scan`) merged per partition and key of the table `spec` (a key is unique
    within a partition): the key and value columns, and with `keep_stamps` the stamps a base file holds
    (tombstones included: keys deleted with nothing newer). Without `keep_stamps`, deleted keys are left out."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from airflow_lake.lake.spark.bucketed_read import scan_df

    keys = [F.col(f"`{k}`") for k in
            [*spec.partition_columns, *[k for k in spec.primary_key if k not in spec.partition_columns]]]
    df = with_row_stamps(scan_df(spark, scan), spec, scan.files)
    shared = row_stamped(spec, scan.files)
    if not has_deletes(scan.files):
        return df.groupBy(*keys).agg(*merge_aggregates(spec, keep_stamps=keep_stamps, shared=shared))
    df = df.withColumn(WATERMARK, F.max(F.col(DELETED)).over(Window.partitionBy(*keys)))
    out = df.groupBy(*keys).agg(*merge_aggregates(spec, keep_stamps=keep_stamps, deletes=True, shared=shared))
    if keep_stamps:
        return out.drop(EXISTS)
    return out.where(F.col(EXISTS)).drop(EXISTS, DELETED)


def read_merged(table: TableMetadata, spark: SparkSession, as_of: AsOf = None,
                filters: Iterable[Sequence[Any]] | None = None, columns: Sequence[str] | None = None) -> DataFrame:
    """`LakeTable.read` of a primary-key table."""
    snapshot = table.snapshot(as_of)
    spec = snapshot.spec
    parsed = parse_filters(filters, spec)
    scan = raw_scan(table, snapshot, filters=filters)
    log.info("merged read of %s at %d: %d of %d file(s) read, %d skipped", table.url, snapshot.seq, len(scan.files),
             scan.files_total, scan.files_skipped)
    df = merged(spark, scan, spec).select(*[f"`{c}`" for c in spec.column_names])
    rest = [f for f in parsed if f not in scan.filters]
    df = Scan(table.storage, snapshot, tuple(rest), ()).apply_filters(df)
    return df.select(*[f"`{c}`" for c in columns]) if columns else df
