"""Partition values and their directory names (`col=value/`), escaped as Hive and Spark do.

A value that could leave the table directory (`..`, a path separator, control characters) is
rejected with an error rather than escaped, so no partition value can ever address a path outside.
So is the text `__HIVE_DEFAULT_PARTITION__`: it is the directory name of NULL, so Spark, Hive and our
reader would take such a value for NULL (and Spark fails on it beside a real NULL in one write task).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.types import INTEGER_TYPES, coerce_literal

if TYPE_CHECKING:
    from airflow_lake.lake.spec.table_spec import TableSpec

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Characters Spark's ExternalCatalogUtils.escapePathName escapes, so Spark decodes our names alike.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


def null_name_problem(column: str) -> str:
    """Why `__HIVE_DEFAULT_PARTITION__` is refused as a value of `column`, and the fix (one text for the
    user-given partitions checked here and the data checked in the Spark job, `writer.py`)."""
    return (f"partition column {column!r} has the value {NULL_PARTITION!r}, the directory name of NULL: it "
            "would be committed and read as NULL (and fails beside a real NULL in one write); nothing was "
            "committed. Fix: use NULL for a missing value, or map that text to another value in the source.")


def check_partition_value(column: str, value: Any, field: str = "partition") -> None:
    """Reject a value that could address a path outside its partition directory, or that is NULL's
    directory name."""
    if value is None:
        return
    text = str(value)
    if text == NULL_PARTITION:
        raise LakeSpecError(f"{field}.{column}", f"{NULL_PARTITION!r} is the directory name of a NULL partition "
                            "value, not a value of its own (it would be read as NULL).",
                            "Give null (JSON null, Python None) for the NULL partition, or another value.")
    if text in ("", ".", "..") or "/" in text or "\\" in text or ".." in text or \
            any(ord(ch) < 0x20 for ch in text):
        raise LakeSpecError(
            f"{field}.{column}",
            f"partition value {text!r} is not allowed: it could address a path outside the table.",
            "Use partition values without '..', '/', '\\' or control characters.",
        )


def partition_text(type_name: str, value: Any) -> str | None:
    """The canonical text of a partition value (None for null)."""
    if value is None:
        return None
    if type_name == "boolean":
        if isinstance(value, str):
            return "true" if value.lower() == "true" else "false"
        return "true" if value else "false"
    if type_name in INTEGER_TYPES:
        return str(int(value))
    if type_name == "date" and isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def escape(text: str) -> str:
    """Escape a path segment like Spark does."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)


def partition_dir(columns: Sequence[str], values: Mapping[str, str | None]) -> str:
    """Relative directory of a partition, e.g. 'dt=2024-01-01/country=NL'."""
    parts = []
    for col in columns:
        value = values.get(col)
        check_partition_value(col, value)
        parts.append(f"{col}={NULL_PARTITION if value is None else escape(value)}")
    return "/".join(parts)


def parse_partition_dir(path: str) -> dict[str, str | None]:
    """Inverse of `partition_dir` for the directory part of a relative file path."""
    out: dict[str, str | None] = {}
    for segment in path.split("/"):
        if "=" in segment:
            key, _, raw = segment.partition("=")
            out[key] = None if raw == NULL_PARTITION else unquote(raw)
    return out


def normalize_partition(spec: TableSpec, part: Any, where: str) -> dict[str, str | None]:
    """A user-given partition checked against the table: exact keys (case-insensitive, as in Spark), values
    of the columns' types, no path tricks; returned with the canonical text of each value."""
    if not isinstance(part, Mapping):
        raise LakeSpecError(where, f"{part!r} is not an object.", "Give {'column': value}.")
    by_name = {c.lower(): c for c in spec.partition_columns}
    unknown = [k for k in part if not isinstance(k, str) or k.lower() not in by_name]
    if unknown:
        raise LakeSpecError(where, f"{unknown[0]!r} is not a partition column.",
                            f"Use exactly the partition columns {list(spec.partition_columns)}.")
    resolved = [by_name[k.lower()] for k in part]
    twice = [c for c in set(resolved) if resolved.count(c) > 1]
    if twice:
        raise LakeSpecError(where, f"partition column {twice[0]!r} is given twice.", "Give each column once.")
    part = {by_name[k.lower()]: v for k, v in part.items()}
    missing = [c for c in spec.partition_columns if c not in part]
    if missing:
        raise LakeSpecError(where, f"partition column {missing[0]!r} has no value.",
                            f"Give a value for each of {list(spec.partition_columns)}.")
    values: dict[str, str | None] = {}
    for col in spec.partition_columns:
        value = part[col]
        check_partition_value(col, value, where)
        type_name = spec.column(col).type
        coerce_literal(type_name, value, f"{where}.{col}")  # raises if it is not of the column's type
        values[col] = partition_text(type_name, value)
    return values


def partition_order_key(spec: TableSpec, values: Mapping[str, str | None]) -> tuple[Any, ...] | None:
    """A key that orders partitions by their typed values (None when a value is null)."""
    key = []
    for col in spec.partition_columns:
        value = values.get(col)
        if value is None:
            return None
        key.append(coerce_literal(spec.column(col).type, value, col))
    return tuple(key)


DYNAMIC = "dynamic"  # overwrite the partitions the data holds
Partitions = Sequence[Mapping[str, Any]] | str | None


def normalize_partitions(spec: TableSpec, partitions: Partitions, field: str = "partitions"
                         ) -> list[dict[str, str | None]] | str | None:
    """Check user-given partitions against the table: exact keys, typed values, no path tricks."""
    if partitions is None or partitions == DYNAMIC:
        return partitions
    if isinstance(partitions, str) or not isinstance(partitions, Sequence):
        raise LakeSpecError(field, f"{partitions!r} is not a list of partitions.",
                            "Give [{'dt': '2024-01-01'}, ...] or 'dynamic'.")
    if not spec.partition_columns:
        raise LakeSpecError(field, "the table is not partitioned.", "Drop `partitions`.")
    out = [normalize_partition(spec, part, f"{field}[{i}]") for i, part in enumerate(partitions)]
    if not out:
        raise LakeSpecError(field, "the list is empty: an empty list never means every partition.",
                            "List at least one partition; with none to overwrite, skip the write (the operators "
                            "and the job runner treat `[]` as nothing to do). `partitions=None` overwrites the "
                            "whole table.")
    return out
