"""The Iceberg schema, partition spec and name mapping of a table spec, and the schema changes that bring a
published Iceberg table to a new spec.

- Types: integers to `int`/`long` (`tinyint`/`smallint` read as `int`), `float`/`double`, `decimal(p,s)`, `string`,
  `binary`, `boolean`, `date`, `timestamp` to `timestamptz` (an instant, as Spark's TIMESTAMP), `timestamp_ntz` to
  `timestamp`. Every field is optional: our files may hold a NOT NULL column as an optional Parquet field, and an
  Iceberg reader refuses to read an optional field into a required one.
- Field ids are Iceberg's (assigned by the catalog when the table is created or a column added). Which of our columns a
  field is, is the name mapping (`schema.name-mapping.default`): each field id -> the column's physical name, the name
  the data files hold (`Column.physical`: after a rename the files keep the old name; Iceberg readers resolve columns
  of files without field ids, as ours are, through this mapping). So a rename is an Iceberg rename of the same field,
  a drop and an add of the same name are two fields, and files never need rewriting.
- Partitions: identity partitions on the partition columns (their values live in the paths, not in the files; Iceberg
  readers take them from the manifests).
- A primary-key table's `__lake_*` columns are not in the schema, so no engine sees them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Transaction
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import is_decimal

NAME_MAPPING = "schema.name-mapping.default"
# a primary-key table's own columns in its files (upsert/physical.py: SEQ, ROW_STAMPS, version_of(column))
LAKE_COLUMNS = ("__lake_seq", "__lake_v", "__lake_v0", "__lake_d")
VERSION_PREFIX = "__lake_v__"
HIDDEN_IDS = 1_000_000_000
_TYPES: dict[str, IcebergType] = {
    "boolean": BooleanType(), "tinyint": IntegerType(), "smallint": IntegerType(), "int": IntegerType(),
    "bigint": LongType(), "float": FloatType(), "double": DoubleType(), "string": StringType(),
    "binary": BinaryType(), "date": DateType(), "timestamp": TimestamptzType(), "timestamp_ntz": TimestampType(),
}


def iceberg_type(type_name: str) -> IcebergType:
    """The Iceberg type of one of our column types."""
    if is_decimal(type_name):
        precision, scale = type_name[len("decimal("):-1].split(",")
        return DecimalType(int(precision), int(scale))
    try:
        return _TYPES[type_name]
    except KeyError:
        raise LakeError(f"column type {type_name!r} has no Iceberg type; the table cannot be published to Iceberg. "
                        "Fix: unset publish.iceberg.catalog / publish.iceberg.table.") from None


def schema(spec: TableSpec) -> Schema:
    """The Iceberg schema of `spec` (ids 1..n in column order: the catalog assigns fresh ones on create anyway)."""
    return Schema(*[NestedField(i, c.name, iceberg_type(c.type), required=False)
                    for i, c in enumerate(spec.columns, start=1)])


def partition_spec(spec: TableSpec, iceberg_schema: Schema) -> PartitionSpec:
    """Identity partitions on `spec`'s partition columns, by the fields of `iceberg_schema`."""
    fields = [PartitionField(source_id=iceberg_schema.find_field(name).field_id, field_id=1000 + i,
                             transform=IdentityTransform(), name=name)
              for i, name in enumerate(spec.partition_columns)]
    return PartitionSpec(*fields)


def read_mapping(properties: Mapping[str, str]) -> dict[str, int]:
    """Physical column name -> field id, from a published table's name mapping (empty: none)."""
    raw = properties.get(NAME_MAPPING)
    if not raw:
        return {}
    out: dict[str, int] = {}
    for item in json.loads(raw):
        for name in item.get("names", ()):
            out[name] = int(item["field-id"])
    return out


def hidden_names(spec: TableSpec) -> list[str]:
    """Names our files may hold that no published column reads: dropped columns' physical names and a primary-key
    table's `__lake_*` columns. pyiceberg refuses a file column the name mapping does not name ("Could not find
    field with name"), so they are mapped, each to a field id no column ever gets (`hidden_id`)."""
    names = list(spec.retired_physical)
    if spec.primary_key:
        names += list(LAKE_COLUMNS)
        names += [f"{VERSION_PREFIX}{n}" for c in spec.columns for n in dict.fromkeys((c.name, c.physical))]
        names += [f"{VERSION_PREFIX}{n}" for n in spec.retired_physical]
    physical = {c.physical for c in spec.columns}
    return [n for n in dict.fromkeys(names) if n not in physical]


def hidden_id(name: str) -> int:
    """A field id for a hidden name: above any id a catalog assigns (one more than the last, from 1), below the ids
    Iceberg reserves for metadata columns (from 2^31 - 201); the same at every publish."""
    return HIDDEN_IDS + zlib.crc32(name.encode()) % HIDDEN_IDS


def mapping_json(spec: TableSpec, iceberg_schema: Schema, ids: Mapping[str, int], before: Mapping[str, int]) -> str:
    """The name mapping of `spec`: each column's field id (by physical name, `ids`) -> its physical name, and the
    hidden names (`hidden_names`) -> ids no column has: a dropped column's physical name keeps the id of its dropped
    field (`before`: the mapping until now; Iceberg never gives an id twice), so snapshots from before the drop
    still read it."""
    items: list[dict[str, Any]] = [{"field-id": ids[c.physical], "names": [c.physical]} for c in spec.columns
                                   if c.physical in ids and find(iceberg_schema, ids[c.physical]) is not None]
    taken = {item["field-id"] for item in items}
    for name in hidden_names(spec):
        kept = before.get(name)
        items.append({"field-id": kept if kept is not None and kept not in taken else hidden_id(name),
                      "names": [name]})
    return json.dumps(items, separators=(",", ":"))


def field_ids(spec: TableSpec, iceberg_schema: Schema, mapping: Mapping[str, int]) -> dict[str, int]:
    """Physical name -> field id of every column of `spec` the Iceberg schema has (by the name mapping; a table
    published before any mapping: by name)."""
    out: dict[str, int] = {}
    for column in spec.columns:
        found = find(iceberg_schema, mapping[column.physical] if mapping else column.name) \
            if column.physical in mapping or not mapping else None
        if found is not None:
            out[column.physical] = found.field_id
    return out


def find(iceberg_schema: Schema, key: str | int) -> NestedField | None:
    """The field of `iceberg_schema` with that name or id (None: none)."""
    try:
        return iceberg_schema.find_field(key)
    except ValueError:
        return None


def _widens(published: IcebergType, wanted: IcebergType) -> bool:
    """Whether the published type must change to `wanted` (a wider type). A narrower `wanted` (a restore to before a
    widening) keeps the wider published type, which Iceberg cannot narrow and which reads the values exactly."""
    if published == wanted:
        return False
    narrower = (isinstance(wanted, IntegerType) and isinstance(published, LongType)) or \
        (isinstance(wanted, FloatType) and isinstance(published, DoubleType)) or \
        (isinstance(wanted, DecimalType) and isinstance(published, DecimalType) and wanted.scale == published.scale
         and wanted.precision < published.precision)
    return not narrower


def sync(txn: Transaction, spec: TableSpec) -> dict[str, int]:
    """Stage in `txn` the schema changes that make the table's Iceberg schema `spec`'s (drop, rename, widen, add,
    reorder: one step each, so a name freed by a drop or rename can be taken in the same commit), and the name
    mapping; returns physical name -> field id."""
    current = txn.table_metadata.schema()
    before = read_mapping(txn.table_metadata.properties)
    ids = field_ids(spec, current, before)
    wanted = set(ids.values())
    dropped = [f.name for f in current.fields if f.field_id not in wanted]
    if dropped:
        with txn.update_schema(allow_incompatible_changes=True) as update:
            for name in dropped:
                update.delete_column(name)
    renames = {txn.table_metadata.schema().find_field(ids[c.physical]).name: c.name for c in spec.columns
               if c.physical in ids and txn.table_metadata.schema().find_field(ids[c.physical]).name != c.name}
    if renames:
        # through a name no column has, so swapped names do not collide
        with txn.update_schema() as update:
            for old in renames:
                update.rename_column(old, f"__lake_renaming_{old}")
        with txn.update_schema() as update:
            for old, new in renames.items():
                update.rename_column(f"__lake_renaming_{old}", new)
    widened = [(c.name, iceberg_type(c.type)) for c in spec.columns if c.physical in ids
               and _widens(txn.table_metadata.schema().find_field(ids[c.physical]).field_type, iceberg_type(c.type))]
    if widened:
        with txn.update_schema() as update:
            for name, field_type in widened:
                update.update_column(name, field_type=field_type)
    added = [c for c in spec.columns if c.physical not in ids]
    if added:
        with txn.update_schema() as update:
            for column in added:
                update.add_column(column.name, iceberg_type(column.type))
        for column in added:
            ids[column.physical] = txn.table_metadata.schema().find_field(column.name).field_id
    if [f.name for f in txn.table_metadata.schema().fields] != spec.column_names:
        with txn.update_schema() as update:
            update.move_first(spec.column_names[0])
            for previous, name in zip(spec.column_names, spec.column_names[1:], strict=False):
                update.move_after(name, previous)
    mapping = mapping_json(spec, txn.table_metadata.schema(), ids, before)
    if txn.table_metadata.properties.get(NAME_MAPPING) != mapping:
        txn.set_properties({NAME_MAPPING: mapping})
    return ids



def same_partitioning(spec: TableSpec, iceberg_spec: PartitionSpec) -> bool:
    """Whether the published table is partitioned by `spec`'s partition columns (which never change)."""
    return [f.name for f in iceberg_spec.fields] == list(spec.partition_columns)
