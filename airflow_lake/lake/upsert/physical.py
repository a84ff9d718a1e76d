"""What a primary-key table's files hold beyond its columns, and the rows an upsert writes.

Every data file of a primary-key table (an upsert's delta files and compaction's base files alike) has the
table's columns and, per column merged by a last-wins operator (`merge_ops`):

- `__lake_v__<c>`: the version the value came from (NULL: the row does not set the column — a partial
  update, or a key that never had it);
- `__lake_q__<c>` (operators that rank values, `last_non_null`): whether the value qualifies;

and `__lake_seq`: the row's order within its upsert (0 in base files, whose versions are all distinct).
A value's order stamp is (qualifies, version, seq); the highest wins. Versions are unique per upsert
(`versions.py`), so the stamp a base keeps orders it against any later upsert, lower versions included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING

from airflow_lake.lake.spec import merge_ops
from airflow_lake.lake.spec.table_spec import Column as SpecColumn
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SEQ = "__lake_seq"


def version_of(column: str) -> str:
    return f"__lake_v__{column}"


def qualified_of(column: str) -> str:
    return f"__lake_q__{column}"


def value_columns(spec: TableSpec) -> list[str]:
    """The columns merged: neither key nor partition columns (a key is unique within a partition)."""
    return [c for c in spec.column_names if c not in spec.primary_key and c not in spec.partition_columns]


def operator_of(spec: TableSpec, column: str) -> merge_ops.MergeOperator:
    return merge_ops.operator(spec.merge_operators.get(column, merge_ops.DEFAULT))


def physical_spec(spec: TableSpec) -> TableSpec:
    """The spec of the files: the table's columns (key columns NOT NULL), then the stamps. It keeps the
    buckets and partitions, so the writer and the bucketed reads handle it as any table."""
    columns = [dataclasses.replace(c, nullable=False) if c.name in spec.primary_key and c.name not in
               spec.partition_columns else c for c in spec.columns]
    for name in value_columns(spec):
        op = operator_of(spec, name)
        if op.stamped:
            columns.append(SpecColumn(version_of(name), "bigint"))
            if op.qualified:
                columns.append(SpecColumn(qualified_of(name), "boolean"))
    columns.append(SpecColumn(SEQ, "bigint"))
    return TableSpec(columns=tuple(columns), partition_columns=spec.partition_columns, bucket=spec.bucket,
                     properties=spec.properties)


def delta_rows(df: DataFrame, spec: TableSpec, present: Collection[str], version: Column) -> DataFrame:
    """An upsert's rows as files hold them: `df` has the key columns and the `present` value columns
    (conformed to the table's types); `version` is each row's version."""
    from pyspark.sql import functions as F

    out: list[Column] = []
    stamps: list[Column] = []
    for col in spec.columns:
        name = col.name
        given = name in present or name in spec.primary_key or name in spec.partition_columns
        out.append(F.col(f"`{name}`") if given else F.lit(None).cast(col.type).alias(name))
        if name in spec.primary_key or name in spec.partition_columns:
            continue
        op = operator_of(spec, name)
        if not op.stamped:
            continue
        stamps.append((version if given else F.lit(None).cast("bigint")).alias(version_of(name)))
        if op.qualified:
            condition = op.qualifies(F.col(f"`{name}`"), spec.null_values.get(name, ())) if given else None
            stamps.append((condition if condition is not None else F.lit(None).cast("boolean"))
                          .alias(qualified_of(name)))
    return df.select(*out, *stamps, F.monotonically_increasing_id().alias(SEQ))


def merge_aggregates(spec: TableSpec, *, keep_stamps: bool) -> list[Column]:
    """The aggregates that merge a key's rows (group by the partition and key columns): the table's value
    columns, and with `keep_stamps` the stamps of the result (for base files)."""
    from pyspark.sql import functions as F

    out: list[Column] = []
    for name in value_columns(spec):
        op = operator_of(spec, name)
        value = F.col(f"`{name}`")
        if not op.stamped:
            out.append(op.aggregate(value).cast(spec.column(name).type).alias(name))
            continue
        fields = [F.col(qualified_of(name)).alias("q")] if op.qualified else []
        fields += [F.col(version_of(name)).alias("v"), F.col(SEQ).alias("s")]
        order = F.when(F.col(version_of(name)).isNotNull(), F.struct(*fields))  # NULL: not set, never wins
        out.append(F.max_by(value, order).alias(name))
        if keep_stamps:
            best = F.max(order)
            out.append(best["v"].alias(version_of(name)))
            if op.qualified:
                out.append(best["q"].alias(qualified_of(name)))
    return out
