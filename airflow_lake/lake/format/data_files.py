"""Data files as a snapshot knows them: where, which partition and bucket, how big, and column stats."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.spec.bucketing import Bucketing

if TYPE_CHECKING:
    from airflow_lake.lake.spec.table_spec import TableSpec


@dataclass(frozen=True)
class ColumnStats:
    """Min, max and null count of one column in one file (min/max None when unknown)."""

    min: Any = None
    max: Any = None
    null_count: int = 0

    def to_list(self) -> list[Any]:
        """Compact JSON form [min, max, nulls]."""
        return [self.min, self.max, self.null_count]

    @classmethod
    def from_list(cls, raw: list[Any]) -> ColumnStats:
        """Inverse of `to_list`."""
        return cls(raw[0], raw[1], int(raw[2]))


class JsonStats(Mapping[str, ColumnStats]):
    """`DataFile.stats` of a file read from a log entry: its JSON form, each `ColumnStats` built when asked for.

    Folding a log builds every file of every entry, and most are never asked for their stats (a restore, a
    snapshot that a scan prunes by partition): building ten stats objects per file was most of a fold's time.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, list[Any]]) -> None:
        self._raw = raw

    def __getitem__(self, key: str) -> ColumnStats:
        return ColumnStats.from_list(self._raw[key])

    def get(self, key: str, default: Any = None) -> Any:  # the hot path of file skipping
        """The stats of column `key`, or `default`."""
        raw = self._raw.get(key)
        return default if raw is None else ColumnStats.from_list(raw)

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    @property
    def raw_lists(self) -> Mapping[str, list[Any]]:
        """The JSON form itself, column -> [min, max, null count] (read-only: for code that reads many files' stats
        and needs no `ColumnStats`, e.g. the published Delta log's)."""
        return self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce__(self) -> tuple[Any, ...]:  # pickles and copies as a plain dict
        return dict, (dict(self),)


@dataclass(frozen=True)
class DataFile:
    """One live Parquet file of a table, with the facts captured when it was written."""

    path: str  # relative to the table root
    partition: Mapping[str, str | None]  # canonical text of each partition column's value
    rows: int
    bytes: int
    bucket: int | None = None
    instant: str = ""  # the instant that added it
    # column -> stats; a dict, or for a file read from a checkpoint a lazy view on the checkpoint's stats
    # columns, decoded on first use (`stats_columns.LazyStats`), or for one read from a log entry `JsonStats`
    stats: Mapping[str, ColumnStats] = field(default_factory=dict)
    # `Bucketing.key()` of a bucketed file ('murmur3:16:work_id'); None for plain files and for bucketed
    # files written before files recorded it (their bucketing is the table spec's, which could not change)
    bucketing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "path": self.path,
            "partition": dict(self.partition),
            "rows": self.rows,
            "bytes": self.bytes,
            "bucket": self.bucket,
            "instant": self.instant,
            "stats": {k: v.to_list() for k, v in self.stats.items()},
            **({"bucketing": self.bucketing} if self.bucketing is not None else {}),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DataFile:
        """Inverse of `to_dict`."""
        return cls(
            path=raw["path"],
            partition=dict(raw.get("partition") or {}),
            rows=int(raw["rows"]),
            bytes=int(raw["bytes"]),
            bucket=raw.get("bucket"),
            instant=raw.get("instant", ""),
            stats=JsonStats(raw.get("stats") or {}),
            bucketing=raw.get("bucketing"),
        )

    def partition_key(self) -> tuple[tuple[str, str | None], ...]:
        """Hashable partition identity."""
        return tuple(sorted(self.partition.items()))


def file_bucketing(data_file: DataFile, spec: TableSpec) -> Bucketing | None:
    """The bucketing a file was written with (files from before files recorded it: the spec's)."""
    if data_file.bucket is None:
        return None
    if data_file.bucketing is not None:
        return Bucketing.parse(data_file.bucketing)
    if spec.bucket is None:
        raise LakeError(f"file {data_file.path!r} has bucket {data_file.bucket} but the table has no bucket spec.")
    return spec.bucket.bucketing()
