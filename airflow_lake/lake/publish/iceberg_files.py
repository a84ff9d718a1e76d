"""Our data files as Iceberg data files: registered where they are (an absolute URI; never copied or rewritten), with
the partition values, record count and size our log holds, and column metrics by field id.

Metrics carry only what is exact: value and null counts of the columns a file holds, and bounds for integers, dates,
strings (our string min is a prefix, still a lower bound; a max that would need cutting is not kept) and UTC
timestamps (`timestamptz`, microseconds). Floats keep no bounds (NaN orders differently across engines), nor do
`timestamp_ntz`, booleans, decimals and binaries; a column a file does not hold (added later) has no metrics at all.
Bounds are serialized in the column's Iceberg type when the file is registered; a file registered before an
int -> bigint widening keeps 4-byte bounds, which Iceberg readers take for a promoted int (the spec's rule).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import PrimitiveType

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.identity import canonical_url
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.publish.iceberg_schema import find
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import INTEGER_TYPES

_BOUNDED = frozenset({*INTEGER_TYPES, "date", "string", "timestamp"})
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()


def file_uri(storage: Storage, path: str) -> str:
    """The absolute location of one of our data files, as Iceberg names it: a URI with its scheme, as the Iceberg spec
    asks (`file:///...` on local disk: Trino's own local file system refuses a bare path), or the URL in the store's
    own scheme (`s3://`, which Iceberg's FileIOs and DuckDB read; not Hadoop's `s3a://`)."""
    if storage.local:
        return "file://" + storage.path(path)
    storage.path(path)  # the confinement check
    return f"{canonical_url(storage.url)}/{path}"


def _bound(type_name: str, value: Any) -> Any:
    """A stats value as Iceberg's conversions take it (dates as days since the epoch)."""
    if type_name == "date":
        return dt.date.fromisoformat(str(value)).toordinal() - _EPOCH_DAY
    return int(value) if type_name in INTEGER_TYPES or type_name == "timestamp" else str(value)


def _partition_value(type_name: str, text: str | None) -> Any:
    if text is None:
        return None
    if type_name in INTEGER_TYPES:
        return int(text)
    if type_name == "boolean":
        return text.lower() == "true"
    if type_name == "date":
        return dt.date.fromisoformat(text).toordinal() - _EPOCH_DAY
    return text


def data_file(storage: Storage, data: DataFile, spec: TableSpec, *, iceberg_schema: Schema,
              iceberg_spec: PartitionSpec, ids: Mapping[str, int]) -> IcebergDataFile:
    """The Iceberg data file of `data` (`ids`: physical column name -> field id)."""
    partition = Record(*[_partition_value(spec.column(name).type, data.partition.get(name))
                         for name in spec.partition_columns])
    values: dict[int, int] = {}
    nulls: dict[int, int] = {}
    low: dict[int, bytes] = {}
    high: dict[int, bytes] = {}
    for column in spec.columns:
        field_id = ids.get(column.physical)
        known = data.stats.get(column.physical)
        if field_id is None or known is None or column.name in spec.partition_columns:
            continue
        values[field_id] = data.rows
        nulls[field_id] = int(known.null_count)
        field = find(iceberg_schema, field_id)
        if column.type not in _BOUNDED or field is None or not isinstance(field.field_type, PrimitiveType):
            continue
        if known.min is not None:
            low[field_id] = to_bytes(field.field_type, _bound(column.type, known.min))
        if known.max is not None:
            high[field_id] = to_bytes(field.field_type, _bound(column.type, known.max))
    out = IcebergDataFile.from_args(
        content=DataFileContent.DATA, file_path=file_uri(storage, data.path), file_format=FileFormat.PARQUET,
        partition=partition, record_count=data.rows, file_size_in_bytes=data.bytes, value_counts=values,
        null_value_counts=nulls, lower_bounds=low, upper_bounds=high, sort_order_id=None,
        equality_ids=None, key_metadata=None)
    out.spec_id = iceberg_spec.spec_id  # not a field of the manifest entry: from_args does not set it
    return out
