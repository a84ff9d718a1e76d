"""Parquet source columns without a type: an all-null column written by pyarrow or pandas as Arrow type `null`.

Parquet stores such a column as INT32 with the logical type `Null` (UNKNOWN), and Spark reads it as an `int`
column of NULLs. Taken at its word, schema evolution would add an `int` column that the data never said, where the
same column from a query (`NULL AS extra`) is refused for having no type. So a source column that every data file
stores as `Null` becomes what it is, a NULL of no type: written into an existing column it is NULL of that
column's type, and schema evolution refuses it as it refuses the query's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from airflow_lake.lake.sources.nanos import MAX_FILES, data_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_GLOB = re.compile(r"[*?\[\]{}\\]")


def null_type_columns(path: str, max_files: int = MAX_FILES) -> set[str]:
    """The top-level columns (lower-cased) that every data file of the local Parquet source at `path` stores with
    the logical type `Null`. Empty when that cannot be known for every file: a remote store, a glob, more than
    `max_files` files, an unreadable footer (Spark's own reading then decides)."""
    import pyarrow.parquet as pq

    from airflow_lake.lake.sources.strict_files import local_path

    local = local_path(path)
    if local is None or _GLOB.search(local):
        return set()
    files = data_files(local, max_files + 1)
    if not files or len(files) > max_files:
        return set()
    common: set[str] | None = None
    for file in files:
        try:
            schema = pq.read_metadata(file).schema
        except Exception:  # not Parquet, unreadable: nothing is known
            return set()
        nulls = {schema.column(i).path.lower() for i in range(len(schema))
                 if schema.column(i).logical_type.type == "UNKNOWN" and "." not in schema.column(i).path}
        common = nulls if common is None else common & nulls
        if not common:
            return set()
    return common or set()


def untyped_nulls(df: DataFrame, path: str) -> DataFrame:
    """`df` (the Parquet files at `path`) with each column of Arrow type `null` as a NULL of no type."""
    nulls = null_type_columns(path)
    if not nulls:
        return df
    from pyspark.sql import functions as F

    return df.select(*[F.lit(None).alias(f.name) if f.name.lower() in nulls else F.col(f"`{f.name}`")
                       for f in df.schema.fields])
