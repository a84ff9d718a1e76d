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
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import INTEGER_TYPES

_BOUNDED = frozenset({*INTEGER_TYPES, "date", "string", "timestamp"})
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


_PLAIN = re.compile(r"[A-Za-z0-9/=._~,-]*")
_SAFE = "/=-_.~,"


def uri_path(path: str) -> str:
    """A data file's path as a Delta action names it (a relative, percent-encoded URI)."""
    return path if _PLAIN.fullmatch(path) else quote(path, safe=_SAFE)  # (most paths need no quoting: fast)


def _json_encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


_encode: Callable[[Any], bytes] = _json_encode
try:  # the stats of every file go through here at each checkpoint: msgspec encodes them ~10x faster
    from msgspec.json import encode as _fast_encode
except ImportError:  # pragma: no cover - a lake core used without Airflow (which brings msgspec)
    pass
else:
    _encode = _fast_encode


def _timestamp(micros: int, upper: bool) -> str:
    millis = -(-micros // 1000) if upper else micros // 1000
    s = _EPOCH + dt.timedelta(milliseconds=millis)
    return (f"{s.year:04d}-{s.month:02d}-{s.day:02d}T{s.hour:02d}:{s.minute:02d}:{s.second:02d}."
            f"{s.microsecond // 1000:03d}Z")


class StatsPlan:
    """Which of a spec's columns a file's stats are published for, and how (made once per spec)."""

    def __init__(self, spec: TableSpec) -> None:
        # (physical name, bounds kept, a timestamp) of each data column
        self.columns = [(c.physical, c.type in _BOUNDED, c.type == "timestamp") for c in spec.columns
                        if c.name not in spec.partition_columns]

    def stats(self, data_file: DataFile) -> str:
        """The `stats` JSON of one file."""
        raw = getattr(data_file.stats, "raw_lists", None)
        low: dict[str, Any] = {}
        high: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        for physical, bounded, timestamp in self.columns:
            if raw is not None:
                known = raw.get(physical)
                if known is None:
                    continue
                least, most, count = known[0], known[1], int(known[2])
            else:
                stat = data_file.stats.get(physical)
                if stat is None:
                    continue
                least, most, count = stat.min, stat.max, int(stat.null_count)
            nulls[physical] = count
            if not bounded:
                continue
            if least is not None:
                low[physical] = _timestamp(int(least), upper=False) if timestamp else least
            if most is not None:
                high[physical] = _timestamp(int(most), upper=True) if timestamp else most
        return _encode({"numRecords": data_file.rows, "minValues": low, "maxValues": high,
                        "nullCount": nulls}).decode()


def stats(data_file: DataFile, spec: TableSpec) -> str:
    """The `stats` JSON of one file (`StatsPlan` for many files of one spec)."""
    return StatsPlan(spec).stats(data_file)


def partition_values(data_file: DataFile, spec: TableSpec) -> dict[str, str | None]:
    """The file's partition values as Delta keys them (by physical name, which for partition columns is the name)."""
    return {name: data_file.partition.get(name) for name in spec.partition_columns}


def add(data_file: DataFile, spec: TableSpec, modified_ms: int, data_change: bool,
        plan: StatsPlan | None = None) -> dict[str, Any]:
    """The `add` action of a live file."""
    return {"add": {"path": uri_path(data_file.path), "partitionValues": partition_values(data_file, spec),
                    "size": data_file.bytes, "modificationTime": modified_ms, "dataChange": data_change,
                    "stats": (plan or StatsPlan(spec)).stats(data_file)}}


def remove(path: str, deleted_ms: int, data_change: bool) -> dict[str, Any]:
    """The `remove` action of a file no longer live (by path: what readers need to drop it)."""
    return {"remove": {"path": uri_path(path), "deletionTimestamp": deleted_ms, "dataChange": data_change}}
