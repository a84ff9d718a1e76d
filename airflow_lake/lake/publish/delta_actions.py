"""Delta Lake `add` / `remove` actions of our data files, with the stats we already hold.

Paths are relative URIs (percent-encoded: a partition directory `s=a%2Fb` names the file `s=a%252Fb`). Stats
(`numRecords`, `minValues`, `maxValues`, `nullCount`) are keyed by the columns' physical names (Delta's rule under
column mapping; they are the names otherwise) and carry only bounds a reader may prune by: integers, dates, strings
(our string min is a prefix, still a lower bound; a max that would need cutting is not kept) and UTC timestamps
(milliseconds, min rounded down and max up). Floats keep no bounds (NaN orders differently across engines), nor do
`timestamp_ntz`, booleans, decimals and binaries; a column a file does not hold (added later) has no stats.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import quote

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import INTEGER_TYPES

_BOUNDED = frozenset({*INTEGER_TYPES, "date", "string", "timestamp"})
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def uri_path(path: str) -> str:
    """A data file's path as a Delta action names it (a relative, percent-encoded URI)."""
    return quote(path, safe="/=-_.~,")


def _bound(type_name: str, value: Any, upper: bool) -> Any:
    if type_name != "timestamp":
        return value
    micros = int(value)
    millis = -(-micros // 1000) if upper else micros // 1000
    stamp = _EPOCH + dt.timedelta(milliseconds=millis)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def stats(data_file: DataFile, spec: TableSpec) -> str:
    """The `stats` JSON of one file."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for column in spec.columns:
        if column.name in spec.partition_columns:
            continue
        known = data_file.stats.get(column.physical)
        if known is None:
            continue
        nulls[column.physical] = int(known.null_count)
        if column.type not in _BOUNDED:
            continue
        if known.min is not None:
            low[column.physical] = _bound(column.type, known.min, upper=False)
        if known.max is not None:
            high[column.physical] = _bound(column.type, known.max, upper=True)
    return json.dumps({"numRecords": data_file.rows, "minValues": low, "maxValues": high, "nullCount": nulls},
                      separators=(",", ":"))


def partition_values(data_file: DataFile, spec: TableSpec) -> dict[str, str | None]:
    """The file's partition values as Delta keys them (by physical name, which for partition columns is the name)."""
    return {name: data_file.partition.get(name) for name in spec.partition_columns}


def add(data_file: DataFile, spec: TableSpec, modified_ms: int, data_change: bool) -> dict[str, Any]:
    """The `add` action of a live file."""
    return {"add": {"path": uri_path(data_file.path), "partitionValues": partition_values(data_file, spec),
                    "size": data_file.bytes, "modificationTime": modified_ms, "dataChange": data_change,
                    "stats": stats(data_file, spec)}}


def remove(path: str, deleted_ms: int, data_change: bool) -> dict[str, Any]:
    """The `remove` action of a file no longer live (by path: what readers need to drop it)."""
    return {"remove": {"path": uri_path(path), "deletionTimestamp": deleted_ms, "dataChange": data_change}}
