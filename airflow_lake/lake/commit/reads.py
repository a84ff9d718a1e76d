"""What a job read of the table it commits to, for the isolation check (`conflicts.py`).

A job that reads its own table (a write or upsert from a query over it, an overwrite that dedupes the
table from itself) reads one snapshot — its transaction's base — through a scan with filters. A commit
that lands after that base and adds a file the scan could have selected, or removes a file it did select,
changes what the job would have read: the job conflicts (Delta's WriteSerializable). A file the filters
prove irrelevant (stats or partition values) does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.filters import Filter, may_match
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from airflow_lake.lake.format.snapshots import TableState
    from airflow_lake.lake.format.table_metadata import TableMetadata


@dataclass(frozen=True)
class Pin:
    """The table a job commits to, at the job's base: a query of the job that reads this table (under any
    spelling of its URL: it is matched by `identity`) reads this snapshot, and its reads are checked by the
    commit. `url` is the table's canonical URL, to tell a copy of it (same id, another place) from itself."""

    identity: str
    url: str
    seq: int

    @classmethod
    def of(cls, table: TableMetadata, base: TableState) -> Pin:
        """The pin of `table` at its state `base`."""
        return cls(table.identity(base), table.canonical_url, base.seq)


@dataclass(frozen=True)
class TableRead:
    """One scan of the table at snapshot `seq`: the files it selected and the filters that selected them."""

    seq: int
    files: frozenset[str]
    filters: tuple[Filter, ...]
    spec: TableSpec

    def may_see(self, data_file: DataFile) -> bool:
        """True unless the scan's filters prove that it would not have read `data_file`."""
        return may_match(data_file, self.filters, self.spec)

    def describe(self) -> str:
        """Short form for conflict messages."""
        where = " AND ".join(f.describe() for f in self.filters) or "the whole table"
        return f"snapshot {self.seq}, {where}"


def read_files(reads: Iterable[TableRead]) -> frozenset[str]:
    """Every file the reads selected."""
    out: set[str] = set()
    for read in reads:
        out |= read.files
    return frozenset(out)
