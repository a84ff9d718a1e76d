"""The table spec: schema, partitioning, and the layout fields later operations use.

A spec is validated when it is built, so a bad one never reaches storage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.types import PARTITION_TYPES, normalize_type

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MERGE_OPERATORS = frozenset({"last", "last_non_null", "sum", "max", "min"})
MAX_BUCKETS = 100_000
# Table properties with their defaults; writers of one table agree on them because they are stored.
DEFAULT_PROPERTIES: dict[str, str] = {
    "heartbeat.interval.seconds": "10",
    "heartbeat.timeout.seconds": "120",
    "checkpoint.interval": "100",
    "checkpoint.retain.count": "5",
    "clean.retain.hours": "168",
}

INTEGER_PROPERTIES = frozenset({"checkpoint.interval", "checkpoint.retain.count"})


def check_identifier(name: Any, field_name: str) -> str:
    """Return `name` if it is a plain SQL identifier, else raise a spec error naming the field."""
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise LakeSpecError(field_name, f"{name!r} is not a valid column name.",
                            "Use letters, digits and underscores, starting with a letter or underscore.")
    return name


@dataclass(frozen=True)
class Column:
    """One column: name, Spark SQL type name, nullability."""

    name: str
    type: str
    nullable: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"name": self.name, "type": self.type, "nullable": self.nullable}


@dataclass(frozen=True)
class BucketSpec:
    """Hive-style buckets: rows go to bucket pmod(hash(columns), count), each bucket sorted."""

    columns: tuple[str, ...]
    count: int
    sort_columns: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"columns": list(self.columns), "count": self.count, "sort_columns": list(self.sort_columns)}


@dataclass(frozen=True)
class TableSpec:
    """Schema and layout of a lake table. Build with `TableSpec.from_dict` or the constructor."""

    columns: tuple[Column, ...]
    partition_columns: tuple[str, ...] = ()
    bucket: BucketSpec | None = None
    primary_key: tuple[str, ...] = ()
    version_column: str | None = None
    merge_operators: Mapping[str, str] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._validate()

    # -- lookups -------------------------------------------------------------------------------------
    @property
    def column_names(self) -> list[str]:
        """Column names in schema order."""
        return [c.name for c in self.columns]

    @property
    def data_columns(self) -> list[str]:
        """Columns that are not partition columns."""
        parts = set(self.partition_columns)
        return [c.name for c in self.columns if c.name not in parts]

    def column(self, name: str) -> Column:
        """The column called `name` (case-insensitive, as Spark resolves names)."""
        for col in self.columns:
            if col.name.lower() == name.lower():
                return col
        raise KeyError(name)

    def has_column(self, name: str) -> bool:
        """True if the table has a column called `name` (case-insensitive)."""
        return any(c.name.lower() == name.lower() for c in self.columns)

    def property(self, key: str) -> str:
        """A table property, falling back to the default."""
        return str(self.properties.get(key, DEFAULT_PROPERTIES[key]))

    def float_property(self, key: str) -> float:
        """A numeric table property."""
        return float(self.property(key))

    # -- validation ----------------------------------------------------------------------------------
    def _validate(self) -> None:
        if not self.columns:
            raise LakeSpecError("columns", "a table needs at least one column.",
                                "Give `columns` or a `schema` such as 'id BIGINT, dt STRING'.")
        seen: set[str] = set()
        for i, col in enumerate(self.columns):
            check_identifier(col.name, f"columns[{i}].name")
            if col.name.lower() in seen:
                raise LakeSpecError(f"columns[{i}].name", f"column {col.name!r} appears twice.",
                                    "Give each column a distinct name (names are case-insensitive).")
            seen.add(col.name.lower())
        for i, name in enumerate(self.partition_columns):
            self._known(name, f"partition_by[{i}]")
            if self.column(name).type not in PARTITION_TYPES:
                raise LakeSpecError(f"partition_by[{i}]",
                                    f"column {name!r} has type {self.column(name).type}, which cannot "
                                    "be a partition column.",
                                    f"Partition by a column of type {', '.join(sorted(PARTITION_TYPES))}.")
        if len(set(self.partition_columns)) != len(self.partition_columns):
            raise LakeSpecError("partition_by", "a partition column is listed twice.", "List each once.")
        if len(self.partition_columns) >= len(self.columns):
            raise LakeSpecError("partition_by", "every column is a partition column.",
                                "Keep at least one data column.")
        if self.bucket is not None:
            self._validate_bucket(self.bucket)
        for i, name in enumerate(self.primary_key):
            self._known(name, f"primary_key[{i}]")
        if self.version_column is not None:
            self._known(self.version_column, "version_column")
            if not self.primary_key:
                raise LakeSpecError("version_column", "a version column needs a primary key.",
                                    "Set `primary_key` too.")
        for name, op in self.merge_operators.items():
            self._known(name, f"merge_operators.{name}")
            if op not in MERGE_OPERATORS:
                raise LakeSpecError(f"merge_operators.{name}", f"unknown merge operator {op!r}.",
                                    f"Use one of {', '.join(sorted(MERGE_OPERATORS))}.")
            if name in self.primary_key:
                raise LakeSpecError(f"merge_operators.{name}", "a primary-key column cannot be merged.",
                                    "Remove it from `merge_operators`.")
        if self.merge_operators and not self.primary_key:
            raise LakeSpecError("merge_operators", "merge operators need a primary key.",
                                "Set `primary_key` too.")
        for key, value in self.properties.items():
            if key in DEFAULT_PROPERTIES:
                try:
                    number = float(value)
                except (TypeError, ValueError):
                    number = -1.0
                if number <= 0:
                    raise LakeSpecError(f"properties.{key}", f"{value!r} is not a positive number.",
                                        f"Set a number > 0 (default {DEFAULT_PROPERTIES[key]}).")
                if key in INTEGER_PROPERTIES and not number.is_integer():
                    raise LakeSpecError(f"properties.{key}", f"{value!r} is not a whole number.",
                                        f"Set a whole number >= 1 (default {DEFAULT_PROPERTIES[key]}).")

    def _validate_bucket(self, bucket: BucketSpec) -> None:
        if not bucket.columns:
            raise LakeSpecError("bucket.columns", "a bucket spec needs at least one column.",
                                "Give the bucket key, e.g. ['user_id'].")
        for i, name in enumerate(bucket.columns):
            self._known(name, f"bucket.columns[{i}]")
            if name in self.partition_columns:
                raise LakeSpecError(f"bucket.columns[{i}]", f"{name!r} is a partition column.",
                                    "Bucket by a data column.")
        for i, name in enumerate(bucket.sort_columns):
            self._known(name, f"bucket.sort_columns[{i}]")
        if isinstance(bucket.count, bool) or not isinstance(bucket.count, int) or \
                not 1 <= bucket.count <= MAX_BUCKETS:
            raise LakeSpecError("bucket.count", f"{bucket.count!r} is not a valid bucket count.",
                                f"Use a whole number from 1 to {MAX_BUCKETS} (powers of two join best).")

    def _known(self, name: str, field_name: str) -> None:
        if not isinstance(name, str) or not self.has_column(name):
            raise LakeSpecError(field_name, f"unknown column {name!r}.",
                                f"Use one of the table's columns: {', '.join(self.column_names)}.")

    # -- (de)serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON form, the inverse of `from_dict`."""
        return {
            "columns": [c.to_dict() for c in self.columns],
            "partition_by": list(self.partition_columns),
            "bucket": self.bucket.to_dict() if self.bucket else None,
            "primary_key": list(self.primary_key),
            "version_column": self.version_column,
            "merge_operators": dict(self.merge_operators),
            "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableSpec:
        """Build a spec from its JSON form; `schema` (a DDL string) may stand for `columns`."""
        if not isinstance(data, Mapping):
            raise LakeSpecError("table spec", f"expected an object, got {type(data).__name__}.",
                                "Give a mapping with `columns` or `schema`.")
        known = {"columns", "schema", "partition_by", "bucket", "primary_key", "version_column",
                 "merge_operators", "properties"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise LakeSpecError(unknown[0], "unknown table spec field.",
                                f"Use only {', '.join(sorted(known))}.")
        if data.get("columns") and data.get("schema"):
            raise LakeSpecError("schema", "give either `columns` or `schema`, not both.", "Drop one.")
        if data.get("schema"):
            columns = parse_ddl(data["schema"])
        else:
            columns = tuple(_column_from(c, i) for i, c in enumerate(_list(data.get("columns"), "columns")))
        bucket = None
        raw_bucket = data.get("bucket")
        if raw_bucket:
            if not isinstance(raw_bucket, Mapping):
                raise LakeSpecError("bucket", "expected an object.",
                                    "Use {'columns': [...], 'count': N, 'sort_columns': [...]}.")
            bucket = BucketSpec(
                columns=tuple(_list(raw_bucket.get("columns"), "bucket.columns")),
                count=raw_bucket.get("count"),  # type: ignore[arg-type]  # validated in __post_init__
                sort_columns=tuple(_list(raw_bucket.get("sort_columns"), "bucket.sort_columns")),
            )
        merge_ops = data.get("merge_operators") or {}
        properties = data.get("properties") or {}
        if not isinstance(merge_ops, Mapping):
            raise LakeSpecError("merge_operators", "expected an object.", "Map column names to operators.")
        if not isinstance(properties, Mapping):
            raise LakeSpecError("properties", "expected an object.", "Map property names to values.")
        return cls(
            columns=columns,
            partition_columns=tuple(_list(data.get("partition_by"), "partition_by")),
            bucket=bucket,
            primary_key=tuple(_list(data.get("primary_key"), "primary_key")),
            version_column=data.get("version_column"),
            merge_operators={str(k): str(v) for k, v in merge_ops.items()},
            properties={str(k): str(v) for k, v in properties.items()},
        )


def _list(value: Any, field_name: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence):
        raise LakeSpecError(field_name, f"expected a list, got {type(value).__name__}.", "Give a list.")
    return list(value)


def _column_from(raw: Any, index: int) -> Column:
    field_name = f"columns[{index}]"
    if not isinstance(raw, Mapping) or "name" not in raw or "type" not in raw:
        raise LakeSpecError(field_name, f"{raw!r} is not a column.",
                            "Give {'name': ..., 'type': ..., 'nullable': true}.")
    name = check_identifier(raw["name"], f"{field_name}.name")
    return Column(name, normalize_type(raw["type"], f"{field_name}.type"), bool(raw.get("nullable", True)))


def parse_ddl(ddl: Any) -> tuple[Column, ...]:
    """Parse 'id BIGINT NOT NULL, amount DECIMAL(10,2), dt STRING' into columns."""
    if not isinstance(ddl, str) or not ddl.strip():
        raise LakeSpecError("schema", f"{ddl!r} is not a schema.", "Give a DDL string like 'id BIGINT, dt STRING'.")
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(ddl):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    columns = []
    for i, part in enumerate(parts):
        words = part.strip().split(None, 1)
        if len(words) != 2:
            raise LakeSpecError(f"schema[{i}]", f"{part.strip()!r} is not 'name TYPE'.",
                                "Write each column as 'name TYPE [NOT NULL]'.")
        name, rest = words[0].strip("`"), words[1].strip()
        nullable = True
        if re.search(r"\s+not\s+null$", rest, re.IGNORECASE):
            nullable = False
            rest = re.sub(r"\s+not\s+null$", "", rest, flags=re.IGNORECASE)
        check_identifier(name, f"schema[{i}].name")
        columns.append(Column(name, normalize_type(rest, f"schema[{i}].type"), nullable))
    return tuple(columns)
