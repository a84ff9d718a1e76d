"""Parquet source files with nanosecond timestamps: Spark cannot read them, and says so in its own words.

pandas (`DataFrame.to_parquet`) and pyarrow (`pyarrow.parquet.write_table`) write `datetime64[ns]` columns as
Parquet `INT64 TIMESTAMP(NANOS)` by default (Parquet format 2.6). Spark reads only milli- and microsecond
timestamps: it refuses the type when it takes a file's schema (`PARQUET_TYPE_ILLEGAL`), and when another file
gave the schema it fails mid-write on the nanosecond file (`PARQUET_COLUMN_DATA_TYPE_MISMATCH ... INT64`). Both
become one error whose fix names the pyarrow options that write microseconds.
"""

from __future__ import annotations

import json
import os
import re

from airflow_lake.lake.errors import LakeSpecError

FIX = ('write the files with microsecond timestamps: `df.to_parquet(..., coerce_timestamps="us", '
       'allow_truncated_timestamps=True)` (pandas; `pyarrow.parquet.write_table` takes the same two options); '
       "digits below a microsecond are dropped.")
# After the fix a timestamp without a time zone is Parquet TIMESTAMP(MICROS, isAdjustedToUTC=false), which Spark
# reads as TIMESTAMP_NTZ: said up front, so the next write does not fail on the column's type instead.
NAIVE = (' Timestamps without a time zone are read as TIMESTAMP_NTZ: declare such a column TIMESTAMP_NTZ, or '
         'give them one first (`df["ts"] = df["ts"].dt.tz_localize("UTC")`) for a TIMESTAMP column.')
_ILLEGAL = re.compile(r"TIMESTAMP\(NANOS,\s*(true|false)\)")
_MISMATCH = re.compile(r"reading file (.+?)\. Data type mismatches when reading Parquet column \[([^\]]*)\]\. "
                       r"Expected Spark type (timestamp(?:_ntz)?), actual Parquet type INT64")
_GLOB = re.compile(r"[*?\[\]{}\\]")
# Footers read to name the columns (Spark itself names none): enough for a day's landing directory, bounded
# for a huge one.
MAX_FILES = 64


def nanosecond_columns(path: str, max_files: int = MAX_FILES) -> dict[str, bool]:
    """The columns (dotted paths) stored as nanosecond timestamps in the local Parquet files at `path` (a file
    or a directory; its first `max_files` data files), each with whether it is adjusted to UTC (has a time
    zone). Empty when unknown: a remote store, a glob, unreadable files."""
    import pyarrow.parquet as pq

    from airflow_lake.lake.sources.strict_files import local_path

    local = local_path(path)
    if local is None or _GLOB.search(local):
        return {}
    found: dict[str, bool] = {}
    for file in data_files(local, max_files):
        try:
            schema = pq.read_metadata(file).schema
        except Exception:  # not Parquet, unreadable: Spark's own error says what it is
            continue
        for i in range(len(schema)):
            column = schema.column(i)
            if column.logical_type.type != "TIMESTAMP":
                continue
            logical = json.loads(column.logical_type.to_json())
            if logical.get("timeUnit") == "nanoseconds":
                found.setdefault(column.path, bool(logical.get("isAdjustedToUTC")))
    return found


def read_error(text: str, path: str, field: str) -> LakeSpecError | None:
    """The error for Spark refusing nanosecond timestamps while it took the schema of the files at `path`,
    or None if `text` (Spark's message) is about something else."""
    illegal = _ILLEGAL.search(text)
    if illegal is None:
        return None
    columns = nanosecond_columns(path)
    naive = illegal.group(1) == "false" or not all(columns.values())
    where = f" in column(s) {', '.join(map(repr, columns))}" if columns else ""
    return LakeSpecError(f"{field}.path", f"{path!r} holds nanosecond timestamps{where} (Parquet INT64 "
                         "TIMESTAMP(NANOS), what pandas and pyarrow write by default), which Spark cannot read; "
                         f"nothing was written. Spark: {text}", FIX + (NAIVE if naive else ""))


def mismatch_error(text: str, field: str = "source") -> LakeSpecError | None:
    """The error for a source file whose timestamps Spark found stored as INT64 mid-write (another file gave
    the schema), or None if `text` is about something else."""
    match = _MISMATCH.search(text)
    if match is None:
        return None
    file, column, expected = match.group(1), ".".join(c.strip() for c in match.group(2).split(",")), match.group(3)
    columns = nanosecond_columns(file, max_files=1)
    if columns and column not in columns:
        return None  # a plain integer column where other files hold timestamps: Spark's error says so
    seen = "holds nanosecond timestamps" if columns else \
        "stores as INT64 (nanosecond timestamps, as pandas and pyarrow write by default, look like that)"
    return LakeSpecError(f"{field}.path", f"the file {file} {seen} in column {column!r}, which Spark cannot "
                         f"read as {expected.upper()} like the other files; nothing was committed.", FIX)


def data_files(local: str, limit: int) -> list[str]:
    """The first `limit` data files of a local Parquet source (a file, or a directory read as Spark reads it)."""
    if os.path.isfile(local):
        return [local]
    files: list[str] = []
    for directory, subdirs, names in os.walk(local):
        # hidden and metadata files (`_SUCCESS`, `.crc`) are not data, as Spark skips them
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(("_", ".")) or "=" in d)
        files += [os.path.join(directory, n) for n in sorted(names) if not n.startswith(("_", "."))]
        if len(files) >= limit:
            break
    return files[:limit]
