"""The bucket of every row being written, decided in the Spark job from the table's bucket spec.

Each row gets its partition's bucket count (NULL: a plain partition, before `from_partition`) and its
bucket id `pmod(hash(columns), count)`, the id Spark's bucketed insert gives it too; the rows go one task per
(partition, bucket), so each task writes one file per bucket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake.spark.plan_text import hashed_into

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from airflow_lake.lake.spec.table_spec import TableSpec


def varying_counts(spec: TableSpec) -> bool:
    """Whether partitions of the table differ in bucketing (then the count is written as a directory level)."""
    return spec.bucket is not None and bool(spec.bucket.partition_counts or spec.bucket.from_partition)


def assign_buckets(df: DataFrame, spec: TableSpec, count_column: str, bucket_column: str,
                   sort_within: Sequence[str] | None = None, *, shuffle: bool = True,
                   sort: bool = True, sized_tasks: bool = False, hashed_like: bool | None = None) -> DataFrame:
    """`df` with the bucket column (and, with `varying_counts`, the count column) added, one task per
    (partition, bucket), rows sorted within each bucket by the sort columns (or `sort_within`). Without
    `shuffle`, each task keeps its rows and writes one file per bucket it holds (no Exchange: for small
    inputs, such as an upsert's batch, where one task per bucket would only move the rows around).

    `sized_tasks`: with one bucketing and no partitions, shuffle by the bucket id and let adaptive execution size
    the tasks (several whole buckets each, as few as the data needs) rather than one task per bucket: for many
    small writes in a row (upserts), where 16 tasks of a few thousand rows each cost more than their work.

    `sort=False` leaves the sort to the writer: Spark's bucketed insert sorts by (partition, bucket id, SORTED
    BY) itself, and cannot see that a sort by our bucket column is the same order, so a sort here would be
    done twice.

    `hashed_like`: whether `df` is already hash-partitioned like the buckets, when the caller knows (None: asked of
    its plan, `plan_text.hashed_into`, which plans the query)."""
    from pyspark.sql import functions as F

    bucket = spec.bucket
    assert bucket is not None
    order = [F.col(f"`{c}`") for c in (bucket.sort_columns if sort_within is None else sort_within)]
    if order:
        df = _unfoldable(df, spec.partition_columns)
    parts = [F.col(f"`{c}`") for c in spec.partition_columns]
    hashed = F.hash(*[F.col(f"`{c}`") for c in bucket.columns])
    # A constant count column would be folded away by Spark's optimizer, and the writer's required order
    # (partition columns, count, bucket) would then no longer match ours: it would re-sort and lose the sort
    # columns' order. So the count is a column only where it varies.
    if varying_counts(spec):
        df = df.withColumn(count_column, bucket_count(spec))
        levels = [*parts, F.col(count_column)]
        df = df.withColumn(bucket_column, F.pmod(hashed, F.col(count_column)))
    else:
        levels = parts
        df = df.withColumn(bucket_column, F.pmod(hashed, F.lit(bucket.count)))
    if order:
        df = _unfoldable(df, [bucket_column])
    # LAS "write-side shuffle elimination": when every task already holds exactly one bucket (Spark's hash
    # partitioning is pmod(hash(keys), n), the bucket id), each task writes one file per partition as it is.
    if shuffle and (varying_counts(spec) or not (
            _hashed_like_buckets(df, spec) if hashed_like is None else hashed_like)):
        if not levels:
            # One bucketing, no partitions: Spark's hash partitioning of the bucket columns into `count` tasks is
            # the bucket id itself, so each of `count` tasks holds one bucket (as `repartition(n, keys)` before
            # `bucketBy` does). By the bucket column instead, the shuffle carried that column and went to the
            # default 200 partitions, which adaptive execution coalesced into a few tasks of several buckets
            # each: fewer, bigger sorts, and the last task alone on one core (bucketed appends ~1.2x Spark's).
            # `sized_tasks` (upserts): by the bucket id instead, and adaptive execution coalesces the shuffle's
            # partitions into tasks of several whole buckets: a BDCI upsert of 100k rows spent 0.86x the CPU
            # (driver JVM + Python, 11 upserts in a row) of one task per bucket (docs/benchmarks.md 17.1).
            by = [F.col(bucket_column)] if sized_tasks else [F.col(f"`{c}`") for c in bucket.columns]
            df = df.repartition(*by) if sized_tasks else df.repartition(bucket.count, *by)
        else:
            # Plain partitions (count NULL) are still spread over `count` tasks, so one big partition is not one
            # task.
            spread = F.coalesce(F.col(bucket_column), F.pmod(hashed, F.lit(bucket.count)))
            df = df.repartition(*levels, spread)
    return df.sortWithinPartitions(*levels, F.col(bucket_column), *order) if sort else df


def _unfoldable(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    """`df` with `columns` hidden from constant folding, same values.

    A column that is a constant (`SELECT ..., 'd1' AS dt`, or a bucket id of a constant key) is dropped from
    our sort by the optimizer; the writer's required order (partition columns, bucket) then no longer matches
    the plan's, and Spark's planned write re-sorts by that order alone and removes our sort: every bucket file
    would be unsorted. A nondeterministic guard (`spark_partition_id() >= 0` is always true) keeps the column
    in the sort, so the plan's order satisfies the writer and ours stays."""
    from pyspark.sql import functions as F

    for name in columns:
        df = df.withColumn(name, F.when(F.spark_partition_id() >= F.lit(0), F.col(f"`{name}`")))
    return df


def bucket_count(spec: TableSpec) -> Column:
    """The bucket count of each row's partition: the table's, a per-partition override, or NULL (plain)."""
    from pyspark.sql import functions as F

    bucket = spec.bucket
    assert bucket is not None
    count: Column = F.lit(bucket.count)
    for item in bucket.partition_counts:
        count = F.when(_is_partition(spec, item.partition), F.lit(item.count)).otherwise(count)
    if bucket.from_partition is not None:
        count = F.when(F.coalesce(_at_or_after(spec, bucket.from_partition), F.lit(False)), count)
    return count.cast("int")


def _literal(spec: TableSpec, column: str, text: str | None) -> Column:
    from pyspark.sql import functions as F

    return F.lit(text).cast(spec.column(column).type)


def _is_partition(spec: TableSpec, values: Mapping[str, str | None]) -> Column:
    from pyspark.sql import functions as F

    cond: Column = F.lit(True)
    for column in spec.partition_columns:
        cond = cond & F.col(f"`{column}`").eqNullSafe(_literal(spec, column, values.get(column)))
    return cond


def _at_or_after(spec: TableSpec, start: Mapping[str, str | None]) -> Column:
    """Partition tuple >= `start`, compared column by column on typed values (NULL if a value is null)."""
    from pyspark.sql import functions as F

    columns = list(spec.partition_columns)
    values = [start.get(c) for c in columns]
    cond: Column = F.col(f"`{columns[-1]}`") >= _literal(spec, columns[-1], values[-1])
    for column, value in zip(reversed(columns[:-1]), reversed(values[:-1]), strict=True):
        col, lit = F.col(f"`{column}`"), _literal(spec, column, value)
        cond = (col > lit) | ((col == lit) & cond)
    return cond


def _hashed_like_buckets(df: DataFrame, spec: TableSpec) -> bool:
    """Whether `df` is already hash-partitioned by exactly the bucket columns into the bucket count."""
    bucket = spec.bucket
    assert bucket is not None
    return hashed_into(df, list(bucket.columns), bucket.count)
