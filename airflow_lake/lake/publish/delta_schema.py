"""The Delta Lake `protocol` and `metaData` actions of a table spec.

- Types: our Spark SQL type names are Delta's, but for the integer names (`tinyint` is Delta's `byte`, ...).
- The protocol declares a writer feature of our own, `airflowLakeOwned` (writer version 7): a Delta writer that does
  not know it refuses to write, so no other engine appends to our table or vacuums away files our log still needs
  (checked with delta-rs: docs/design/open-tables-delta-facts.md). Readers are not affected.
- Column mapping (`name` mode) only once a column's physical name differs from its name (a rename, or a column added
  again after a drop: its data files hold another name). It then stays on, as Delta keeps it. It needs reader
  version 3 with the `columnMapping` reader feature: a reader that cannot map columns refuses instead of reading
  NULLs (delta-rs at reader version 2 did).
- `timestamp_ntz` columns need the `timestampNtz` reader-writer feature.
- Only the table's own columns are published: a primary-key table's `__lake_*` columns stay in the files, unseen.
"""

from __future__ import annotations

import json
import uuid
import zlib
from typing import Any

from airflow_lake.lake.spec.table_spec import TableSpec

OWN_FEATURE = "airflowLakeOwned"
MAPPING_ID = "delta.columnMapping.id"
MAPPING_NAME = "delta.columnMapping.physicalName"
MAPPING_MODE = "delta.columnMapping.mode"
_TYPES = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}
_ID_SPACE = (1 << 31) - 2


def delta_type(type_name: str) -> str:
    """The Delta schema type of one of our column types."""
    return _TYPES.get(type_name, type_name)


def column_id(physical: str) -> int:
    """A column's stable column-mapping id: from its physical name, which never changes and is never reused."""
    return 1 + zlib.crc32(physical.encode()) % _ID_SPACE


def schema(spec: TableSpec, mapping: bool) -> dict[str, Any]:
    """The Delta schema of `spec` (with column mapping metadata when `mapping`)."""
    fields = []
    for column in spec.columns:
        metadata: dict[str, Any] = {}
        if mapping:
            metadata = {MAPPING_ID: column_id(column.physical), MAPPING_NAME: column.physical}
        fields.append({"name": column.name, "type": delta_type(column.type), "nullable": column.nullable,
                       "metadata": metadata})
    return {"type": "struct", "fields": fields}


def needs_mapping(spec: TableSpec) -> bool:
    """Whether some column's data files name it otherwise than the table does."""
    return spec.renamed


def protocol(spec: TableSpec, mapping: bool) -> dict[str, Any]:
    """The protocol action's body."""
    reader: list[str] = []
    writer = [OWN_FEATURE]
    if mapping:
        reader.append("columnMapping")
        writer.append("columnMapping")
    if any(c.type == "timestamp_ntz" for c in spec.columns):
        reader.append("timestampNtz")
        writer.append("timestampNtz")
    if reader:
        return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(reader),
                "writerFeatures": sorted(writer)}
    return {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writer}


def table_uuid(table_id: str | None, first_instant: str) -> str:
    """The Delta table id: our table id when it is a UUID, else one derived from it (or from the create instant of a
    table from before ids), the same at every publish."""
    if table_id:
        try:
            return str(uuid.UUID(table_id))
        except ValueError:
            return str(uuid.uuid5(uuid.NAMESPACE_URL, f"airflow-lake:{table_id}"))
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"airflow-lake-instant:{first_instant}"))


def metadata(spec: TableSpec, mapping: bool, table_uuid_: str, created_ms: int, name: str) -> dict[str, Any]:
    """The metaData action's body."""
    configuration = {"airflowLake.owned": "true"}
    if mapping:
        ids = [column_id(c.physical) for c in spec.columns] + [column_id(p) for p in spec.retired_physical]
        configuration |= {MAPPING_MODE: "name", "delta.columnMapping.maxColumnId": str(max(ids, default=0))}
    return {"id": table_uuid_, "name": name, "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema(spec, mapping), separators=(",", ":")),
            "partitionColumns": list(spec.partition_columns), "configuration": configuration,
            "createdTime": created_ms}
