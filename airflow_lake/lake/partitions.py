"""Partition values and their directory names (`col=value/`), escaped as Hive and Spark do.

A value that could leave the table directory (`..`, a path separator, control characters) is
rejected with an error rather than escaped, so no partition value can ever address a path outside.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.types import INTEGER_TYPES

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Characters Spark's ExternalCatalogUtils.escapePathName escapes, so Spark decodes our names alike.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


def check_partition_value(column: str, value: Any, field: str = "partition") -> None:
    """Reject a value that could address a path outside its partition directory."""
    if value is None:
        return
    text = str(value)
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
