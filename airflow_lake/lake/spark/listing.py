"""What a classic Spark file read listed: when it is exactly a scan's files, no row needs the file filter.

`scan.exactly` restricts a directory read to the snapshot's files with a filter on `_metadata.file_path`. Spark
prunes the listing by it, but it also keeps it as a row-level filter: every row builds the metadata struct and
looks its file path up in the set. On a 4M-row clustering group that was 10 % of the whole job over a plain read
(docs/benchmarks.md 17.3e). A classic DataFrame's file index is listed once, when the read is made, and every query
built on it reads that listing: if it holds exactly the scan's files, the filter can only keep every row.

Spark Connect re-resolves a plan's read (and lists again) per request, so there the filter always stays.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark.file_uris import table_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


def listed_files(df: DataFrame) -> list[str] | None:
    """The file URIs the file index of the classic read `df` holds (`Dataset.inputFiles`), in two py4j calls
    (pyspark's `inputFiles()` fetches the array element by element: a call per file); None over Spark Connect,
    or when Spark does not tell."""
    if not hasattr(df, "_jdf") or getattr(df, "_explain_string", None) is not None:
        return None
    try:
        jvm = df.sparkSession.sparkContext._jvm
        assert jvm is not None
        # The array as one Scala sequence (an `Array[T]` parameter is an Object to py4j), joined in the JVM.
        # URIs quote control characters (`file_uris`): a newline never occurs inside one.
        joined = str(jvm.scala.runtime.ScalaRunTime.genericWrapArray(df._jdf.inputFiles()).mkString("\n"))
    except Exception:  # an optimisation: the caller keeps the filter
        log.debug("the read's file listing is not available; the file filter stays", exc_info=True)
        return None
    return joined.split("\n") if joined else []


def listed_exactly(df: DataFrame, storage: Storage, files: Sequence[DataFile]) -> bool:
    """Whether the classic read `df` (of the directories of `files`) listed exactly `files`: then every row it reads
    is a row of them. False over Spark Connect, or when anything else was listed (debris, a file a clean has not
    deleted yet, a name repeated in another partition directory) or a file is missing."""
    listed = listed_files(df)
    if listed is None or len(listed) != len(files):
        return False
    return {table_path(storage, uri) for uri in listed} == {f.path for f in files}


__all__ = ["listed_exactly", "listed_files"]
