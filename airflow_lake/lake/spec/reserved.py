"""Column names a table may not take: the one rule, for every way a column arrives (create, alter add and rename,
schema evolution of a write or an upsert).

Two kinds of name are reserved, compared case-insensitively (Spark resolves names so):
- the format's own: every name starting with `__lake_` (the merge-on-read stamps of primary-key tables, the
  helper columns of writes, deletes and clustering: `upsert.physical`, `spark.file_writer`, ...) and with
  `_airflow_lake_` (the corrupt-record column of strict CSV and JSON reads). A new internal name takes one of
  these prefixes and is reserved with no change here.
- Spark's hidden columns: `_metadata` (the file source's metadata column, which deletes and reads use to find
  a row's file: a data column of that name hides it), the temporary row-index columns of the Parquet reader
  (`_tmp_metadata_...`) and `_corrupt_record` (the JSON and CSV readers' default corrupt-record column, which a
  JSON source read leaves out).

A table created before this rule may hold such a name; it stays readable (specs from the log are not checked
here), and the error of a change to it names the rename that fixes it.
"""

from __future__ import annotations

from airflow_lake.lake.errors import LakeSpecError

FORMAT_PREFIXES = ("__lake_", "_airflow_lake_")
SPARK_NAMES = frozenset({"_metadata", "_corrupt_record"})
SPARK_PREFIXES = ("_tmp_metadata_",)


def reserved_problem(name: str) -> str | None:
    """Why `name` cannot be a column name (None: it can)."""
    low = name.lower()
    prefix = next((p for p in FORMAT_PREFIXES if low.startswith(p)), None)
    if prefix is not None:
        return f"names starting with {prefix!r} are reserved for the table format's own columns"
    if low in SPARK_NAMES or low.startswith(SPARK_PREFIXES):
        return "it is the name of a hidden column of Spark's file sources, which the table's reads and deletes use"
    return None


def check_column_name(name: str, field: str) -> str:
    """Return `name`, or raise a spec error naming `field` if the name is reserved (case-insensitively)."""
    problem = reserved_problem(name)
    if problem is not None:
        raise LakeSpecError(field, f"column name {name!r} is reserved: {problem} (names are case-insensitive).",
                            "Give the column another name.")
    return name


def check_column_names(names: list[str], field: str) -> None:
    """Refuse the first reserved name among `names` (field `<field>[i]`)."""
    for i, name in enumerate(names):
        check_column_name(name, f"{field}[{i}]")
