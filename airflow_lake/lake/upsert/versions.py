"""Upsert versions: each version is applied once.

An upsert's entry records its `versions` (sorted), the value columns it set (`columns`) and a
`fingerprint` of its rows (row count, and order-independent sums and the XOR of a 64-bit hash of each row). An
upsert whose versions meet a live upsert's:

- with the same versions, columns and fingerprint: it is that upsert again (an Airflow retry, a re-run of
  a backfill): nothing is written, the earlier commit is returned;
- otherwise it is refused, unless it replaces them (`replace_version`): then the earlier upsert's files are
  removed in the same commit — only while they are still delta files (not yet compacted into the base).

Two upserts of one version racing each other: the second to commit sees the first (conflict rule in
`conflicts.py`) and retries into one of the cases above.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.log import LogEntryExpired
from airflow_lake.lake.format.table_state import UPSERT_ACTION
from airflow_lake.lake.spec import sql_text

if TYPE_CHECKING:
    from pyspark.sql import Column

    from airflow_lake.lake.format.log import LogEntry
    from airflow_lake.lake.format.snapshots import TableState
    from airflow_lake.lake.format.table_metadata import TableMetadata

MIN_VERSION, MAX_VERSION = -(1 << 63), (1 << 63) - 1
MAX_VERSIONS_PER_UPSERT = 10_000


def parse_version(value: Any, field: str = "version") -> int:
    """A version given to an upsert: a whole number (or its text, e.g. a rendered `{{ ds_nodash }}`)."""
    if isinstance(value, bool) or value is None:
        raise LakeSpecError(field, f"{value!r} is not a version.", "Give a whole number (a batch number, yyyymmdd).")
    if isinstance(value, str):
        text = value.strip()
        # ASCII digits only: str.isdigit() also takes "²" and "--5" would pass a strip of every "-"
        if not re.fullmatch(r"-?[0-9]+", text):
            raise LakeSpecError(field, f"{value!r} is not a whole number.", "Give e.g. 7 or '20240301'.")
        if len(text) > 40:  # int() of thousands of digits fails outright; no 64-bit number is this long
            raise LakeSpecError(field, f"a number of {len(text)} digits is not a 64-bit whole number.",
                                "Give e.g. 7 or '20240301'.")
        value = int(text)
    given = value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not MIN_VERSION <= value <= MAX_VERSION:
        shown = repr(given) if len(repr(given)) <= 40 else f"a number of {len(str(value))} digits"  # (1e300)
        raise LakeSpecError(field, f"{shown} is not a 64-bit whole number.", "Give e.g. 7 or '20240301'.")
    return value


@dataclass(frozen=True)
class Applied:
    """A live upsert and what it applied."""

    entry: LogEntry
    versions: tuple[int, ...]
    columns: tuple[str, ...]
    fingerprint: str


def applied(table: TableMetadata, versions: Iterable[int], state: TableState | None = None) -> dict[int, Applied]:
    """Of `versions`, those a live upsert applied -> that upsert (a later replacing upsert wins).

    Reads only those upserts' log entries, found through the state's version index (checkpointed), so an
    upsert costs the same on a table with 10 or 10,000 entries; the whole log only if the index is unknown."""
    wanted = set(versions)
    state = table.state() if state is None else state
    index = state.versions
    if index is None:
        entries: Iterable[LogEntry] = table.commit_log.entries(-1, state.seq)
    else:
        entries = (table.commit_log.read(seq) for seq in sorted({index[v] for v in wanted if v in index}))
    out: dict[int, Applied] = {}
    try:
        for entry in entries:
            item = _applied(entry)
            if item is None:
                continue
            for version in wanted.intersection(item.versions):
                out[version] = item  # entries come in log order: a later replacing upsert wins
    except LogEntryExpired as err:
        held = sorted(v for v in wanted if index is not None and index.get(v) == err.seq)
        raise LakeSpecError("version", f"version(s) {held or sorted(wanted)} were applied by log entry {err.seq}, "
                            "which `clean` has expired from the log (older than the table's log.retain.hours): "
                            "that upsert can be neither compared with this one nor replaced. Nothing was committed.",
                            "Upsert a new, higher version with the corrections.") from err
    return out


def _applied(entry: LogEntry) -> Applied | None:
    if entry.action != UPSERT_ACTION or "versions" not in entry.metadata:
        return None
    meta = entry.metadata
    return Applied(entry, tuple(int(v) for v in meta["versions"]), tuple(meta.get("columns") or ()),
                   str(meta.get("fingerprint", "")))


def fingerprint_aggregates(columns: Sequence[str], version: str) -> list[Column]:
    """Aggregates for `DataFrame.observe`: rows, rows without a version, the distinct versions (up to a
    cap), and order-independent sums of a 64-bit hash of (columns, version) — its two 32-bit halves summed
    as bigints (exact up to 2**31 rows), and XORed. `version` is a Spark SQL expression; each aggregate is
    SQL text, one call to Spark (built from DataFrame functions: ~50 calls per upsert)."""
    from pyspark.sql import functions as F

    row_hash = f"xxhash64({', '.join([*[sql_text.ident(c) for c in columns], version])})"
    return [F.expr(text) for text in (
        "count(1) AS `rows`", f"count_if(({version}) IS NULL) AS `null_versions`",
        f"slice(array_sort(collect_set({version})), 1, {MAX_VERSIONS_PER_UPSERT + 1}) AS `versions`",
        f"coalesce(sum({row_hash} & {0xFFFFFFFF}L), 0) AS `low`",
        f"coalesce(sum(shiftrightunsigned({row_hash}, 32)), 0) AS `high`",
        f"coalesce(bit_xor({row_hash}), 0) AS `xor`")]


def fingerprint(observed: Mapping[str, Any]) -> str:
    """The text kept in the entry."""
    parts = (int(observed["rows"]), int(observed["low"]), int(observed["high"]), int(observed["xor"]) & (2**64 - 1))
    return ":".join(f"{p:x}" for p in parts)
