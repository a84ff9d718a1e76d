"""A scan: the files of one snapshot that may hold rows passing the filters, and reading them with Spark."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.filters import Filter
from airflow_lake.lake.format.snapshots import Snapshot
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark.file_uris import spark_file_uri
from airflow_lake.lake.spark.globs import name_glob
from airflow_lake.lake.spark.listing import listed_exactly
from airflow_lake.lake.spark.schema import from_files, to_file_struct, to_struct

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# The file path of each row while a read is restricted to its files (`exactly`); `__lake_*` names are the format's.
LIVE_FILE = "__lake_file"


@dataclass(frozen=True)
class Scan:
    """Files selected from a snapshot; `files_skipped` were proven by their stats to hold no match."""

    storage: Storage
    snapshot: Snapshot
    filters: tuple[Filter, ...]
    files: tuple[DataFile, ...]

    @property
    def files_total(self) -> int:
        """Live files in the snapshot."""
        return len(self.snapshot.files)

    @property
    def files_skipped(self) -> int:
        """Live files not read."""
        return self.files_total - len(self.files)

    def to_df(self, spark: SparkSession, columns: Sequence[str] | None = None) -> DataFrame:
        """Read the selected files with Spark and apply the filters row by row."""
        spec = self.snapshot.spec
        if self.files:
            # Spark lists the directories of the selected files and keeps the files the glob names: planning
            # a list of thousands of file paths instead costs seconds per thousand (docs/benchmarks.md).
            directories = sorted({posixpath.dirname(f.path) for f in self.files})
            glob = name_glob([posixpath.basename(f.path) for f in self.files])
            # basePath makes Spark take partition values from the `col=value/` directories: files written
            # since the native writer hold only the data columns (Hive convention), older ones hold all
            # columns, and for both the value in the path is the one read. globPaths=false: a directory
            # name is a path, never a pattern.
            # Columns are read by their physical names and renamed in one projection (`schema.from_files`).
            # Files written since issue 24 lie in write directories (`data/<instant>-<write id>/<partition dirs>`),
            # which Spark would take for conflicting partition layouts: ignoreInvalidPartitionPaths lets it take
            # the values from the `col=value` segments below them (a reader option: a session conf is read lazily).
            # (Not for a table without partitions: Spark would then drop the files below `data/<...>/` as lying
            # in invalid partition paths; every directory there parses as "no partition", so nothing conflicts.)
            reader = spark.read.schema(to_file_struct(spec)).option("basePath", self.storage.uri("")) \
                .option("pathGlobFilter", glob).option("globPaths", "false")
            if spec.partition_columns:
                reader = reader.option("ignoreInvalidPartitionPaths", "true")
            df = reader.parquet(*[self.storage.uri(d) for d in directories])
            if not listed_exactly(df, self.storage, self.files):  # (a classic read that listed just them: done)
                df = exactly(df, self.storage, self.files)  # the glob narrows the listing; this decides
            df = from_files(df, spec)  # table order
        else:
            df = spark.createDataFrame([], to_struct(spec))
        df = self.apply_filters(df)
        if columns:
            df = df.select(*[f"`{c}`" for c in columns])
        return df

    def apply_filters(self, df: DataFrame) -> DataFrame:
        """`df` with the scan's filters applied row by row."""
        if self.filters:
            df = df.where(reduce(lambda a, b: a & b, (filter_column(f) for f in self.filters)))
        return df


def exactly(df: DataFrame, storage: Storage, files: Sequence[DataFile]) -> DataFrame:
    """`df`, a read of the directories of `files`, restricted to exactly the rows of `files`.

    A directory read (with a name glob or not) matches whatever lies there: files of a replace that a clean
    has forgotten but not yet deleted (its kill, a failed or slow delete, or a reader that resolved its
    snapshot in between), debris of dead writers, files dropped by hand -- and Spark repeats a file name in
    every partition directory of one write, so no glob of names is exact. What is read is decided by the
    snapshot alone: `_metadata.file_path` IN (the live files' URIs). Spark prunes files by that predicate
    when it lists them (a file not named is never opened: bucketed scans, partition pruning and in-file row
    order are unchanged), and the row-level filter left above the scan is a hash lookup of a per-file
    constant. The set is written as one SQL expression: built column by column from Python it costs a
    round trip per file (measured: ~0.6 s for 3,000 files to build and analyze, ~1 s for 10,000; docs/format.md)."""
    from pyspark.sql import functions as F

    uris = sorted({spark_file_uri(storage, f.path) for f in files})
    path = df.metadataColumn("_metadata").getField("file_path")  # Spark's, even beside a column named so
    listed = ", ".join(map(sql_string, uris))
    return df.withColumn(LIVE_FILE, path).where(F.expr(f"`{LIVE_FILE}` IN ({listed})")).drop(LIVE_FILE)


def sql_string(text: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def filter_column(flt: Filter) -> Column:
    """One filter as a Spark column: what a read keeps (and a delete removes) row by row."""
    from pyspark.sql import functions as F

    col = F.col(f"`{flt.column}`")
    if flt.op == "=":
        return col == F.lit(flt.value)
    if flt.op == "in":
        return col.isin(list(flt.value))
    if flt.op == "between":
        return col.between(F.lit(flt.value[0]), F.lit(flt.value[1]))
    ops = {"<": col.__lt__, "<=": col.__le__, ">": col.__gt__, ">=": col.__ge__}
    return ops[flt.op](F.lit(flt.value))  # type: ignore[no-any-return]
