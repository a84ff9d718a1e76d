"""The table spec: schema, partitioning, and the layout fields later operations use.

A spec is validated when it is built, so a bad one never reaches storage.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec import merge_ops
from airflow_lake.lake.spec.bucketing import HASHES, MURMUR3, Bucketing, check_multiples
from airflow_lake.lake.spec.partitions import normalize_partition, partition_order_key
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.types import PARTITION_TYPES, normalize_type

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_BUCKETS = 100_000
# Table properties with their defaults; writers of one table agree on them because they are stored.
DEFAULT_PROPERTIES: dict[str, str] = {
    "heartbeat.interval.seconds": "10",
    "heartbeat.timeout.seconds": "120",
    "checkpoint.interval": "100",
    "checkpoint.retain.count": "5",
    "clean.retain.hours": "168",
    # log entries older than this that a checkpoint covers may be expired by `clean` (Delta's logRetentionDuration,
    # 30 days); time travel reaches back this far (never less than clean.retain.hours: `checkpoints.py`)
    "log.retain.hours": "720",
    # thresholds of the table health warnings (`airflow_lake.health`, shown by `airflow-lake ls` and the Lake page)
    "health.small_file_bytes": "134217728",
    "health.small_file_share": "0.5",
    "health.bucket_skew": "5",
    "health.bucket_skew_min_rows": "10000",
    "health.pending_age_seconds": "3600",
    "health.commits_since_clustering": "8",
    # publish every commit as Delta Lake versions in `_delta_log/` for other engines (`lake/publish/`)
    "publish.delta": "true",
    # publish every commit to an Iceberg table too: a pyiceberg catalog name (configured as pyiceberg configures
    # catalogs) and `namespace.table` in it; both or neither ("": no Iceberg publishing)
    "publish.iceberg.catalog": "",
    "publish.iceberg.table": "",
}
ICEBERG_CATALOG_PROPERTY = "publish.iceberg.catalog"
ICEBERG_TABLE_PROPERTY = "publish.iceberg.table"
# String-valued properties: what a value must look like, and how to say so
STRING_PROPERTIES: dict[str, tuple[re.Pattern[str], str, str]] = {
    ICEBERG_CATALOG_PROPERTY: (re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"), "pyiceberg catalog name",
                               "Give the name of a catalog in your pyiceberg configuration (letters, digits, '-' "
                               "and '_'), e.g. 'lake'."),
    ICEBERG_TABLE_PROPERTY: (re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"),
                             "Iceberg table identifier",
                             "Give 'namespace.table' (letters, digits and underscores; parts separated by '.'), "
                             "e.g. 'analytics.orders'."),
}

BOOLEAN_PROPERTIES = frozenset({"publish.delta"})
INTEGER_PROPERTIES = frozenset({"checkpoint.interval", "checkpoint.retain.count", "health.small_file_bytes",
                                "health.bucket_skew_min_rows", "health.commits_since_clustering"})
# Free-form properties (notes, owners, tags) live under this prefix; any other unknown name is a typo.
log = logging.getLogger(__name__)
USER_PROPERTY_PREFIX = "user."


def check_property(key: Any, value: Any) -> None:
    """Refuse an unknown property name or a value that is not a finite positive number where one is needed."""
    where = f"properties.{key}"
    user = isinstance(key, str) and key.startswith(USER_PROPERTY_PREFIX) and len(key) > len(USER_PROPERTY_PREFIX)
    if not user and key not in DEFAULT_PROPERTIES:
        raise LakeSpecError(where, "unknown table property.",
                            f"Use one of {', '.join(sorted(DEFAULT_PROPERTIES))}, or a name starting with "
                            f"{USER_PROPERTY_PREFIX!r} for your own.")
    if not isinstance(value, str):
        raise LakeSpecError(where, f"expected a string, got {value!r}.", "Give property values as strings.")
    if key not in DEFAULT_PROPERTIES:
        return
    if key in STRING_PROPERTIES:
        pattern, noun, fix = STRING_PROPERTIES[key]
        if not pattern.match(value):
            raise LakeSpecError(where, f"{value!r} is not a valid {noun}.", fix)
        return
    if key in BOOLEAN_PROPERTIES:
        if value not in ("true", "false"):
            raise LakeSpecError(where, f"{value!r} is not 'true' or 'false'.",
                                f"Set 'true' or 'false' (default {DEFAULT_PROPERTIES[key]!r}).")
        return
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not math.isfinite(number) or number <= 0:
        raise LakeSpecError(where, f"{value!r} is not a finite positive number.",
                            f"Set a number > 0 (default {DEFAULT_PROPERTIES[key]}).")
    if key in INTEGER_PROPERTIES and not number.is_integer():
        raise LakeSpecError(where, f"{value!r} is not a whole number.",
                            f"Set a whole number >= 1 (default {DEFAULT_PROPERTIES[key]}).")


# A writer may miss one beat (a slow store, a busy host) and still be alive: the timeout must cover two beats,
# or another process's recovery rolls back a live writer.
HEARTBEAT_BEATS_PER_TIMEOUT = 2


def check_heartbeat(properties: Mapping[str, str]) -> None:
    """Refuse a heartbeat timeout shorter than two heartbeat intervals (defaults fill a missing one)."""
    interval_key, timeout_key = "heartbeat.interval.seconds", "heartbeat.timeout.seconds"
    interval = float(properties.get(interval_key, DEFAULT_PROPERTIES[interval_key]))
    timeout = float(properties.get(timeout_key, DEFAULT_PROPERTIES[timeout_key]))
    if timeout < HEARTBEAT_BEATS_PER_TIMEOUT * interval:
        where = f"properties.{timeout_key if timeout_key in properties else interval_key}"
        raise LakeSpecError(where, f"a heartbeat timeout of {timeout:g} s is shorter than "
                            f"{HEARTBEAT_BEATS_PER_TIMEOUT} heartbeat intervals of {interval:g} s: other processes "
                            "would take a live writer for dead and roll it back.",
                            f"Set {timeout_key} to at least {HEARTBEAT_BEATS_PER_TIMEOUT} x {interval_key} "
                            f"(e.g. {max(HEARTBEAT_BEATS_PER_TIMEOUT * interval, 1):g} or more).")


def check_iceberg(properties: Mapping[str, str]) -> None:
    """Refuse one of the two Iceberg publishing properties without the other."""
    catalog, table = properties.get(ICEBERG_CATALOG_PROPERTY), properties.get(ICEBERG_TABLE_PROPERTY)
    if bool(catalog) != bool(table):
        missing = ICEBERG_TABLE_PROPERTY if catalog else ICEBERG_CATALOG_PROPERTY
        raise LakeSpecError(f"properties.{missing}", "publishing to Iceberg needs both the catalog and the table.",
                            f"Set {missing} too, or neither.")


def check_identifier(name: Any, field_name: str) -> str:
    """Return `name` if it is a plain SQL identifier, else raise a spec error naming the field."""
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise LakeSpecError(field_name, f"{name!r} is not a valid column name.",
                            "Use letters, digits and underscores, starting with a letter or underscore.")
    return name


@dataclass(frozen=True)
class Column:
    """One column: name, Spark SQL type name, nullability, and `physical`, its name in the data files.

    `physical` defaults to `name` and stays when the column is renamed (Delta's column mapping by name):
    files written before a rename still read right, and a column added later under a dropped column's name
    gets a fresh physical name, so it never reads the dropped data (`spec.evolution`).
    """

    name: str
    type: str
    nullable: bool = True
    physical: str = ""

    def __post_init__(self) -> None:
        if not self.physical:
            object.__setattr__(self, "physical", self.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (`physical` only where it differs from the name, so specs of tables never altered stay
        as they were)."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "nullable": self.nullable}
        if self.physical != self.name:
            out["physical"] = self.physical
        return out


@dataclass(frozen=True)
class PartitionCount:
    """A bucket count for one partition that differs from the table's (a hot partition gets more)."""

    partition: Mapping[str, str | None]
    count: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"partition": dict(self.partition), "count": self.count}


@dataclass(frozen=True)
class BucketSpec:
    """Hive-style buckets: rows go to bucket pmod(hash(columns), count), each bucket one sorted file.

    `from_partition`: partitions ordered before it (by their typed values) stay plain (LAS: bucketing turned
    on for a table from a date on). `partition_counts`: per-partition counts (LAS: hot partitions), all
    counts multiples of each other.
    """

    columns: tuple[str, ...]
    count: int
    sort_columns: tuple[str, ...] = ()
    hash: str = MURMUR3
    from_partition: Mapping[str, str | None] | None = None
    partition_counts: tuple[PartitionCount, ...] = ()

    def bucketing(self, count: int | None = None) -> Bucketing:
        """The bucketing of a partition with `count` buckets (default: the table's count)."""
        return Bucketing(self.columns, self.count if count is None else count, self.hash)

    @property
    def counts(self) -> list[int]:
        """Every bucket count this spec uses."""
        return sorted({self.count, *(p.count for p in self.partition_counts)})

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out: dict[str, Any] = {"columns": list(self.columns), "count": self.count,
                               "sort_columns": list(self.sort_columns)}
        if self.hash != MURMUR3:
            out["hash"] = self.hash
        if self.from_partition is not None:
            out["from_partition"] = dict(self.from_partition)
        if self.partition_counts:
            out["partition_counts"] = [p.to_dict() for p in self.partition_counts]
        return out


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
    # last_non_null columns: strings that count as missing values (e.g. "null")
    null_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # physical names of dropped columns: old files still hold them, so no column may take them again
    retired_physical: tuple[str, ...] = ()

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

    def physical_of(self, name: str) -> str:
        """The name column `name` has in the data files (`Column.physical`)."""
        return self.column(name).physical

    @property
    def renamed(self) -> bool:
        """True if some column's name in the files differs from its name (reads and writes then map them)."""
        return any(c.physical != c.name for c in self.columns)

    @property
    def physical_names(self) -> dict[str, str]:
        """Column name -> its name in the data files, in schema order."""
        return {c.name: c.physical for c in self.columns}

    def bucket_count_for(self, partition: Mapping[str, str | None]) -> int | None:
        """The bucket count new files of `partition` get (None: plain) — what `buckets.assign.bucket_count`
        decides for its rows in the Spark job (a test keeps the two in step)."""
        bucket = self.bucket
        if bucket is None:
            return None
        if bucket.from_partition is not None and not self._at_or_after(partition, bucket.from_partition):
            return None
        for item in reversed(bucket.partition_counts):  # the Spark side lets the last listed override win
            if all(item.partition.get(c) == partition.get(c) for c in self.partition_columns):
                return item.count
        return bucket.count

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
            if not isinstance(col.nullable, bool):
                raise LakeSpecError(f"columns[{i}].nullable", f"expected true or false, got {col.nullable!r}.",
                                    "Give `nullable` as a JSON boolean.")
            if col.name.lower() in seen:
                raise LakeSpecError(f"columns[{i}].name", f"column {col.name!r} appears twice.",
                                    "Give each column a distinct name (names are case-insensitive).")
            seen.add(col.name.lower())
        self._validate_physical()
        # Every column reference resolves case-insensitively to the schema's spelling, so later
        # lookups by exact name (partition values, bucket keys, merges) can never miss.
        partition_columns = self._resolve_all(self.partition_columns, "partition_by")
        object.__setattr__(self, "partition_columns", partition_columns)
        for i, name in enumerate(partition_columns):
            if self.column(name).physical != name:  # directory names hold it, as `name=value`
                raise LakeSpecError(f"partition_by[{i}]", f"partition column {name!r} has the physical name "
                                    f"{self.column(name).physical!r}; partition directories are named by the column.",
                                    "Partition by a column whose physical name is its name.")
            if self.column(name).type not in PARTITION_TYPES:
                raise LakeSpecError(f"partition_by[{i}]",
                                    f"column {name!r} has type {self.column(name).type}, which cannot "
                                    "be a partition column.",
                                    f"Partition by a column of type {', '.join(sorted(PARTITION_TYPES))}.")
        if len(partition_columns) >= len(self.columns):
            raise LakeSpecError("partition_by", "every column is a partition column.",
                                "Keep at least one data column.")
        if self.bucket is not None:
            object.__setattr__(self, "bucket", self._validate_bucket(self.bucket))
        object.__setattr__(self, "primary_key", self._resolve_all(self.primary_key, "primary_key"))
        if self.primary_key and self.bucket is not None:
            other = [c for c in self.bucket.columns if c not in self.primary_key]
            if other:
                raise LakeSpecError("bucket.columns", f"a primary-key table is bucketed by its key, but {other[0]!r} "
                                    "is not a key column.",
                                    f"Bucket by key columns only (the key is {list(self.primary_key)}).")
        if self.version_column is not None:
            object.__setattr__(self, "version_column", self._resolve(self.version_column, "version_column"))
            if not self.primary_key:
                raise LakeSpecError("version_column", "a version column needs a primary key.",
                                    "Set `primary_key` too.")
        if not isinstance(self.merge_operators, Mapping):
            raise LakeSpecError("merge_operators", "expected an object.", "Map column names to operators.")
        merge_operators: dict[str, str] = {}
        for name, op in self.merge_operators.items():
            where = f"merge_operators.{name}"
            resolved = self._resolve(name, where)
            if resolved in merge_operators:
                raise LakeSpecError(where, f"column {resolved!r} is listed twice.",
                                    "List each column once (names are case-insensitive).")
            known = merge_ops.registry()
            if not isinstance(op, str) or op not in known:
                raise LakeSpecError(where, f"unknown merge operator {op!r}.",
                                    f"Use one of {', '.join(sorted(known))} (or install a package that adds "
                                    f"one under the entry point group {merge_ops.ENTRY_POINT_GROUP!r}).")
            if resolved in self.primary_key:
                raise LakeSpecError(where, "a primary-key column cannot be merged.",
                                    "Remove it from `merge_operators`.")
            merge_operators[resolved] = op
        object.__setattr__(self, "merge_operators", merge_operators)
        if self.merge_operators and not self.primary_key:
            raise LakeSpecError("merge_operators", "merge operators need a primary key.",
                                "Set `primary_key` too.")
        object.__setattr__(self, "null_values", self._validate_null_values())
        if self.primary_key:
            self._validate_primary_key_table()
        if not isinstance(self.properties, Mapping):
            raise LakeSpecError("properties", "expected an object.", "Map property names to values.")
        for key, value in self.properties.items():
            check_property(key, value)
        check_heartbeat(self.properties)
        check_iceberg(self.properties)

    def _validate_physical(self) -> None:
        """Physical names: valid, distinct, never a retired one (old files hold its data)."""
        if isinstance(self.retired_physical, str) or not isinstance(self.retired_physical, Sequence):
            raise LakeSpecError("retired_physical", "expected a list of names.", "Give a list of strings.")
        retired = {check_identifier(n, f"retired_physical[{i}]").lower() for i, n in enumerate(self.retired_physical)}
        object.__setattr__(self, "retired_physical", tuple(self.retired_physical))
        seen: dict[str, str] = {}
        for i, col in enumerate(self.columns):
            check_identifier(col.physical, f"columns[{i}].physical")
            low = col.physical.lower()
            if low in seen:
                raise LakeSpecError(f"columns[{i}].physical", f"columns {seen[low]!r} and {col.name!r} share the "
                                    f"physical name {col.physical!r}.", "Give each column its own physical name.")
            if low in retired:
                raise LakeSpecError(f"columns[{i}].physical", f"{col.physical!r} is the physical name of a dropped "
                                    "column: old files still hold its data.",
                                    "Give the column another physical name (alter_table picks one).")
            seen[low] = col.name

    def _validate_null_values(self) -> dict[str, tuple[str, ...]]:
        if not isinstance(self.null_values, Mapping):
            raise LakeSpecError("null_values", "expected an object.", 'Map columns to lists, e.g. {"name": ["null"]}.')
        out: dict[str, tuple[str, ...]] = {}
        for name, values in self.null_values.items():
            where = f"null_values.{name}"
            resolved = self._resolve(name, where)
            op = self.merge_operators.get(resolved, merge_ops.DEFAULT)
            if not merge_ops.registry()[op].takes_null_values:
                raise LakeSpecError(where, f"column {resolved!r} is merged by {op!r}, which takes no null values.",
                                    f'Merge it by "last_non_null" (`merge_operators.{resolved}`), or drop it here.')
            if isinstance(values, str) or not isinstance(values, Sequence) or \
                    not all(isinstance(v, str) for v in values):
                raise LakeSpecError(where, f"{values!r} is not a list of strings.", 'Give e.g. ["null", "N/A"].')
            out[resolved] = tuple(values)
        return out

    def _validate_primary_key_table(self) -> None:
        if self.bucket is None:
            raise LakeSpecError("bucket", "a primary-key table needs buckets on its key (merges then need no "
                                "shuffle).", f'Add "bucket": {{"columns": {list(self.primary_key)}, "count": 16}}.')
        if self.bucket.partition_counts or self.bucket.from_partition is not None:
            raise LakeSpecError("bucket", "a primary-key table has one bucket count in every partition.",
                                "Drop `partition_counts` and `from_partition`.")
        for name in self.primary_key:
            type_name = self.column(name).type
            if type_name.startswith(("array", "map", "struct")) or type_name in ("binary", "float", "double"):
                raise LakeSpecError("primary_key", f"key column {name!r} has type {type_name}, which cannot be a "
                                    "key.", "Use integer, string, date, timestamp or decimal key columns.")
        if self.version_column is not None:
            if self.version_column in self.primary_key:
                raise LakeSpecError("version_column", "the version column cannot be a key column.",
                                    "Use a data column (or give the version to each upsert).")
            if self.column(self.version_column).type not in ("tinyint", "smallint", "int", "bigint"):
                raise LakeSpecError("version_column", f"column {self.version_column!r} is not an integer column.",
                                    "Use an integer column (batch number, yyyymmdd, epoch millis).")

    def _validate_bucket(self, bucket: BucketSpec) -> BucketSpec:
        if not bucket.columns:
            raise LakeSpecError("bucket.columns", "a bucket spec needs at least one column.",
                                "Give the bucket key, e.g. ['user_id'].")
        columns = self._resolve_all(bucket.columns, "bucket.columns")
        for i, name in enumerate(columns):
            if name in self.partition_columns:
                raise LakeSpecError(f"bucket.columns[{i}]", f"{name!r} is a partition column.",
                                    "Bucket by a data column.")
        sort_columns = self._resolve_all(bucket.sort_columns, "bucket.sort_columns")
        _check_count(bucket.count, "bucket.count")
        if bucket.hash not in HASHES:
            raise LakeSpecError("bucket.hash", f"unknown bucket hash {bucket.hash!r}.",
                                f"Use {' or '.join(HASHES)} (Spark's hash(), read as buckets by Spark).")
        from_partition = None
        if bucket.from_partition is not None:
            if not self.partition_columns:
                raise LakeSpecError("bucket.from_partition", "the table is not partitioned.",
                                    "Drop `from_partition`.")
            from_partition = normalize_partition(self, bucket.from_partition, "bucket.from_partition")
            if partition_order_key(self, from_partition) is None:
                raise LakeSpecError("bucket.from_partition", "a null value cannot start the bucketed partitions.",
                                    "Give the first bucketed partition's values.")
        counts: list[PartitionCount] = []
        seen: set[tuple[tuple[str, str | None], ...]] = set()
        if not isinstance(bucket.partition_counts, Sequence):
            raise LakeSpecError("bucket.partition_counts", "expected a list.",
                                "Give [{'partition': {...}, 'count': 16}, ...].")
        for i, item in enumerate(bucket.partition_counts):
            where = f"bucket.partition_counts[{i}]"
            if not self.partition_columns:
                raise LakeSpecError(where, "the table is not partitioned.", "Drop `partition_counts`.")
            values = normalize_partition(self, item.partition, f"{where}.partition")
            _check_count(item.count, f"{where}.count")
            identity = tuple(sorted(values.items()))
            if identity in seen:
                raise LakeSpecError(where, f"partition {values} is listed twice.", "List each partition once.")
            seen.add(identity)
            if from_partition is not None and not self._at_or_after(values, from_partition):
                raise LakeSpecError(where, f"partition {values} is before `from_partition` and stays plain.",
                                    "Drop it or move `from_partition`.")
            counts.append(PartitionCount(values, item.count))
        check_multiples([bucket.count, *(c.count for c in counts)], "bucket.partition_counts")
        return BucketSpec(columns, bucket.count, sort_columns, bucket.hash, from_partition, tuple(counts))

    def _at_or_after(self, values: Mapping[str, str | None], start: Mapping[str, str | None]) -> bool:
        """Whether partition `values` is ordered at or after `start` (typed values; never when one is null).
        (Which partition gets which bucket count is decided in the Spark job: `buckets.assign.bucket_count`.)"""
        key = partition_order_key(self, values)
        begin = partition_order_key(self, start)
        return key is not None and begin is not None and key >= begin

    def _resolve_all(self, names: Sequence[str], field_name: str) -> tuple[str, ...]:
        """Resolve a list of column names; a name listed twice (in any case) is an error."""
        out: list[str] = []
        for i, name in enumerate(names):
            resolved = self._resolve(name, f"{field_name}[{i}]")
            if resolved in out:
                raise LakeSpecError(field_name, f"column {name!r} is listed twice (as {resolved!r}; names are "
                                    "case-insensitive).", "List each column once.")
            out.append(resolved)
        return tuple(out)

    def _resolve(self, name: Any, field_name: str) -> str:
        """The schema's spelling of column `name` (matched case-insensitively)."""
        if not isinstance(name, str) or not self.has_column(name):
            raise LakeSpecError(field_name, f"unknown column {name!r}.",
                                f"Use one of the table's columns: {', '.join(self.column_names)}.")
        return self.column(name).name

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
            **({"null_values": {k: list(v) for k, v in self.null_values.items()}} if self.null_values else {}),
            **({"retired_physical": list(self.retired_physical)} if self.retired_physical else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableSpec:
        """Build a spec from its JSON form; `schema` (a DDL string) may stand for `columns`.

        Strict at every depth: an unknown key or a value of the wrong type fails, naming its path.
        """
        if not isinstance(data, Mapping):
            raise LakeSpecError("table spec", f"expected an object, got {type(data).__name__}.",
                                "Give a mapping with `columns` or `schema`.")
        reader = SpecReader(data, "table", noun="spec")
        schema = reader.raw_value("schema")
        raw_columns = reader.objects("columns")
        if raw_columns and schema:
            raise LakeSpecError("schema", "give either `columns` or `schema`, not both.", "Drop one.")
        if schema:
            columns = parse_ddl(schema)
        else:
            columns = tuple(_column_from(reader, i, c) for i, c in enumerate(raw_columns or ()))
        bucket = None
        bucket_reader = reader.obj("bucket")
        if bucket_reader is not None:
            counts = []
            for i, raw in enumerate(bucket_reader.objects("partition_counts") or ()):
                item = bucket_reader.item("partition_counts", i, raw)
                counts.append(PartitionCount(item.raw_value("partition") or {}, item.raw_value("count")))
                item.done()
            bucket = BucketSpec(
                columns=tuple(bucket_reader.strings("columns", single=True) or ()),
                count=bucket_reader.raw_value("count"),  # validated in __post_init__
                sort_columns=tuple(bucket_reader.strings("sort_columns", single=True) or ()),
                hash=bucket_reader.string("hash") or MURMUR3,
                from_partition=bucket_reader.raw_value("from_partition"),
                partition_counts=tuple(counts),
            )
            bucket_reader.done()
        version_column = reader.string("version_column")
        merge_operators = reader.string_map("merge_operators") or {}
        properties = reader.string_map("properties", numbers=True) or {}
        null_values = reader.raw_value("null_values") or {}
        partition_by = reader.strings("partition_by", single=True) or []
        primary_key = reader.strings("primary_key", single=True) or []
        retired = reader.strings("retired_physical") or []
        reader.done()
        return cls(
            columns=columns,
            partition_columns=tuple(partition_by),
            bucket=bucket,
            primary_key=tuple(primary_key),
            version_column=version_column,
            merge_operators=merge_operators,
            properties=properties,
            null_values=null_values,
            retired_physical=tuple(retired),
        )


def stored_spec(data: Mapping[str, Any]) -> TableSpec:
    """The spec a table keeps in its log, read leniently where earlier versions were lenient.

    Versions before strict properties accepted any property name (and `inf`): a table created then must
    still open. Such properties are ignored with a warning (the defaults apply); everything else is as
    strict as `TableSpec.from_dict`.
    """
    raw = dict(data)
    properties = dict(raw.get("properties") or {}) if isinstance(raw.get("properties"), Mapping) else {}
    for key, value in list(properties.items()):
        try:
            check_property(key, value)
        except LakeSpecError as err:
            log.warning("ignoring the stored table property %r=%r (%s); its default applies", key, value,
                        err.problem)
            del properties[key]
    try:
        check_heartbeat(properties)
    except LakeSpecError as err:  # stored before the check: fall back to the defaults, which agree
        log.warning("ignoring the stored heartbeat properties (%s); their defaults apply", err.problem)
        for key in ("heartbeat.interval.seconds", "heartbeat.timeout.seconds"):
            properties.pop(key, None)
    if "properties" in raw:
        raw["properties"] = properties
    return TableSpec.from_dict(raw)


def _check_count(count: Any, field: str) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_BUCKETS:
        raise LakeSpecError(field, f"{count!r} is not a valid bucket count.",
                            f"Use a whole number from 1 to {MAX_BUCKETS} (powers of two join best).")


def _column_from(reader: SpecReader, index: int, raw: Any) -> Column:
    field_name = f"columns[{index}]"
    if not isinstance(raw, Mapping) or "name" not in raw or "type" not in raw:
        raise LakeSpecError(field_name, f"{raw!r} is not a column.",
                            "Give {'name': ..., 'type': ..., 'nullable': true}.")
    item = reader.item("columns", index, raw)
    name = check_identifier(item.raw_value("name"), f"{field_name}.name")
    type_name = item.raw_value("type")
    if not isinstance(type_name, str):
        raise LakeSpecError(f"{field_name}.type", f"expected a type name, got {type_name!r}.",
                            "Give a type such as 'bigint' or 'decimal(10,2)'.")
    physical = item.string("physical")
    if physical is not None:
        check_identifier(physical, f"{field_name}.physical")
    column = Column(name, normalize_type(type_name, f"{field_name}.type"), item.boolean("nullable", default=True),
                    physical or "")
    item.done()
    return column


def parse_ddl(ddl: Any) -> tuple[Column, ...]:
    """Parse 'id BIGINT NOT NULL, amount DECIMAL(10,2), dt STRING' into columns."""
    if not isinstance(ddl, str) or not ddl.strip():
        raise LakeSpecError("schema", f"{ddl!r} is not a schema.", "Give a DDL string like 'id BIGINT, dt STRING'.")
    parts: list[str] = []
    depth, start = 0, 0
    quoted = False
    for i, ch in enumerate(ddl):
        if ch == "`":
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    columns = []
    for i, part in enumerate(parts):
        text = part.strip()
        if text.startswith("`"):
            name_end = text.find("`", 1)
            quoted_name = text[1:name_end] if name_end > 0 else text[1:]
            if name_end < 0 or not IDENTIFIER.match(quoted_name):
                raise LakeSpecError(f"schema[{i}].name", f"column name `{quoted_name}` is not supported: "
                                    "backquoted names may not contain spaces or other special characters.",
                                    "Use letters, digits and underscores, starting with a letter or underscore.")
            words = [quoted_name, text[name_end + 1:]] if text[name_end + 1:].strip() else [quoted_name]
        else:
            words = text.split(None, 1)
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
