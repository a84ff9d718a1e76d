"""Incremental query sources: a view of an upstream lake table's changes since this table last consumed it.

A query source's `incremental: [{"view": "<name>", "table": "<upstream path>", "from": <seq>?}]` registers, per
upstream, the view `<name>` holding `LakeTable.changes(spark, start, end)` of that upstream:

* `end` is the upstream's head when the job starts (pinned: a `tables` view of the same upstream without
  `as_of` is read at `end` too, so both views see one snapshot);
* `start` is the position this downstream table consumed (`TableState.consumed` at the job's base), else
  `from`, else -1 (the whole upstream as inserts).

The job's commit records every upstream's `end` in its log entry (`format.consumed`): the output and the progress
land in one atomic step, and a commit whose positions another run moved since the job's base is a retryable
conflict (`commit.conflicts`). So a retry, a crash after the commit, two runs at once or a duplicated asset event
processes no change twice and skips none. When no window holds a data-changing commit the query is not run; the
positions are still committed (an entry without files) when an upstream moved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.changes.window import ChangeWindow, change_window
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeChangesUnavailable, LakeSpecError
from airflow_lake.lake.format.consumed import CONSUMED
from airflow_lake.lake.spec.strict import MAX_EXACT_INT, SpecReader
from airflow_lake.lake.spec.table_spec import IDENTIFIER

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_lake.lake.commit.reads import Pin
    from airflow_lake.lake.commit.requests import Request
    from airflow_lake.lake.format.log import LogEntry
    from airflow_lake.lake.format.snapshots import TableState
    from airflow_lake.lake.table import LakeTable

log = logging.getLogger(__name__)
FIELD = "incremental"
FIX = 'Give a list of {"view": "<name>", "table": "<upstream table path>", "from": <optional seq>}.'


@dataclass(frozen=True)
class IncrementalRef:
    """One upstream of a query: its changes are registered as the view `view`."""

    view: str
    table: str
    start: int | None = None  # `from`: where a downstream that consumed nothing yet starts (exclusive)


def parse_incremental(raw: Any, field_name: str, table_views: Sequence[str]) -> tuple[IncrementalRef, ...]:
    """The `incremental` list of a query source, read strictly: each item's keys, an identifier as view name that
    no `tables` view (nor another item) has, a table path, a whole `from` >= -1."""
    where = f"{field_name}.{FIELD}"
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise LakeSpecError(where, f"{raw!r} is not a non-empty list of upstream tables.", FIX)
    taken = {v.lower(): f"{field_name}.tables.{v}" for v in table_views}
    refs: list[IncrementalRef] = []
    for index, item in enumerate(raw):
        reader = SpecReader(item, "write", f"{where}[{index}]")
        view = reader.required("view")
        table = reader.required("table")
        start = _start(reader.raw_value("from"), reader.field("from"))
        reader.done()
        if not IDENTIFIER.match(view):
            raise LakeSpecError(reader.field("view"), f"{view!r} is not a valid view name.",
                                "Use letters, digits and underscores (not starting with a digit).")
        if view.lower() in taken:
            raise LakeSpecError(reader.field("view"), f"the view name {view!r} is taken by {taken[view.lower()]}.",
                                "Give every view of the query its own name.")
        taken[view.lower()] = reader.field("view")
        refs.append(IncrementalRef(view, table, start))
    return tuple(refs)


def _start(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isascii() and value.strip().lstrip("-").isdigit():
        value = int(value.strip())  # (a rendered template)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1 or value > MAX_EXACT_INT:
        raise LakeSpecError(name, f"{value!r} is not a log sequence number of the upstream table.",
                            "Give the upstream seq to start after (exclusive; -1: its whole content), as "
                            "`airflow-lake timeline PATH` shows it, or leave `from` out.")
    return value


@dataclass(frozen=True)
class Position:
    """An upstream at the job's start: where this downstream's window starts and ends (no window read yet)."""

    ref: IncrementalRef
    table: LakeTable
    identity: str  # `TableMetadata.identity`: what the downstream's positions are keyed by
    url: str  # canonical URL, recorded for people
    start: int  # exclusive: this table's consumed position, else `from`, else -1
    end: int  # the upstream's head at the job's start
    consumed: bool  # `start` is this table's consumed position (not `from` or -1)
    index: int  # in the source's `incremental` list, for messages

    @property
    def moved(self) -> bool:
        """True when the upstream has commits this downstream has not consumed (data-changing or not)."""
        return self.end != self.start


@dataclass(frozen=True)
class Upstream:
    """An upstream with its changes window (`start`, `end`] for this downstream."""

    position: Position
    window: ChangeWindow

    @property
    def ref(self) -> IncrementalRef:
        """The source's reference."""
        return self.position.ref

    @property
    def table(self) -> LakeTable:
        """The upstream table."""
        return self.position.table

    @property
    def identity(self) -> str:
        """The upstream's identity."""
        return self.position.identity

    @property
    def start(self) -> int:
        """The window's start (exclusive)."""
        return self.position.start

    @property
    def end(self) -> int:
        """The upstream snapshot the job reads up to (its head at the job's start)."""
        return self.position.end

    @property
    def moved(self) -> bool:
        """True when the upstream has commits this downstream has not consumed (data-changing or not)."""
        return self.position.moved

    def recorded(self) -> dict[str, Any]:
        """This upstream's entry in the commit's `consumed` metadata."""
        return {"seq": self.end, "table": self.position.url, "view": self.ref.view}

    def metrics(self, query_ran: bool) -> dict[str, Any]:
        """What the job reports of this view: the window, the data-changing commits read and (when the files
        tell it exactly: appends to a plain table) the change rows."""
        window = self.window
        rows: int | None = None
        if not window.spec.primary_key and not any(c.removed for c in window.commits):
            rows = sum(f.rows for f in window.initial) + sum(f.rows for c in window.commits for f in c.added)
        return {"table": self.position.url, "from": self.start, "to": self.end, "commits": len(window.commits),
                "initial_files": len(window.initial), "rows": rows, "query_ran": query_ran}


def resolve_positions(refs: Sequence[IncrementalRef], base: TableState, pin: Pin | None,
                      field_name: str = "source") -> tuple[Position, ...]:
    """Open every upstream and fix where its window starts and ends: from this table's consumed position (at
    `base`, the job's base), else `from`, else -1, to the upstream's head now. Metadata only, no Spark, no log
    entries read (a retry of a committed request is answered before any window is: `windows`). Refused: the job's
    own table, two views of one upstream, a `from` (or position) past the upstream's head."""
    from airflow_lake.lake.table import LakeTable

    out: list[Position] = []
    seen: dict[str, str] = {}
    for index, ref in enumerate(refs):
        where = f"{field_name}.{FIELD}[{index}]"
        table = LakeTable.open(ref.table)
        head = table.state()
        ident = table.identity(head)
        if pin is not None and ident == pin.identity:
            raise LakeSpecError(f"{where}.table", f"{ref.table!r} is the table this job writes: a table cannot "
                                "consume its own changes (each commit would be a change to consume).",
                                "Name an upstream table; to read this table itself, use `tables`.")
        if ident in seen:
            raise LakeSpecError(f"{where}.table", f"{ref.table!r} is the upstream of view {seen[ident]!r} too: "
                                "consumed positions are kept per upstream table, so one view per upstream.",
                                "Read its changes in one view (or the whole table through `tables`).")
        seen[ident] = ref.view
        consumed = base.consumed.get(ident)
        start = consumed if consumed is not None else ref.start if ref.start is not None else -1
        if start > head.seq:
            what = f"this table consumed {ref.table!r} up to seq {start}" if consumed is not None \
                else f"`from` is {start}"
            raise LakeSpecError(f"{where}.from", f"{what}, but its log ends at seq {head.seq}.",
                                "Give a `from` at or before the upstream's head (`airflow-lake timeline PATH`).")
        out.append(Position(ref, table, ident, table.canonical_url, start, head.seq, consumed is not None, index))
    return tuple(out)


def windows(positions: Sequence[Position], field_name: str = "source") -> tuple[Upstream, ...]:
    """Each upstream's changes window (metadata: its log entries in the window). A window past what the
    upstream's `clean` kept raises `LakeChangesUnavailable`, saying how to start over."""
    out: list[Upstream] = []
    for position in positions:
        ref = position.ref
        try:
            window = change_window(position.table, position.start, position.end)
        except LakeChangesUnavailable as err:
            if not position.consumed:
                raise
            raise LakeChangesUnavailable(
                f"{field_name}.{FIELD}[{position.index}]: this table consumed {ref.table!r} up to seq "
                f"{position.start}, and {err} To consume it again from scratch, restore this table to a snapshot "
                "from before it first consumed it (e.g. to_seq 0: empty, nothing consumed) and run the job again: "
                "it then reads the whole upstream as inserts.", err.start, err.oldest) from err
        out.append(Upstream(position, window))
        log.info("incremental view %s: changes of %s in (%d, %d], %d data-changing commit(s)", ref.view,
                 position.table.url, position.start, position.end, len(window.commits))
    return tuple(out)


def pinned(positions: Sequence[Position]) -> dict[str, int]:
    """Upstream identity -> the snapshot its `tables` views (without `as_of`) are read at."""
    return {p.identity: p.end for p in positions}


def nothing_changed(upstreams: Sequence[Upstream]) -> bool:
    """True when no window holds a data-changing commit: the query is not run."""
    return bool(upstreams) and all(u.window.empty for u in upstreams)


def register_changes(spark: SparkSession, upstreams: Sequence[Upstream]) -> None:
    """Register each upstream's changes in its window as its view (`LakeTable.changes` of the window resolved at
    the job's start)."""
    from airflow_lake.lake.changes.spark_read import read_changes

    faults.reach("before_query")  # (crash tests: the windows are fixed, nothing is read or written yet)
    for upstream in upstreams:
        read_changes(upstream.table, spark, upstream.window).createOrReplaceTempView(upstream.ref.view)


def consumed_metadata(upstreams: Sequence[Upstream]) -> dict[str, Any]:
    """The commit metadata that records the positions (empty without upstreams)."""
    if not upstreams:
        return {}
    return {CONSUMED: {u.identity: u.recorded() for u in upstreams}}


def consumed_metrics(upstreams: Sequence[Upstream], query_ran: bool) -> dict[str, Any]:
    """The job's metrics of its incremental views (empty without upstreams)."""
    if not upstreams:
        return {}
    return {FIELD: {u.ref.view: u.metrics(query_ran) for u in upstreams}}


def commit_positions(table: LakeTable, operation: str, base: TableState, upstreams: Sequence[Upstream],
                     request: Request, *, metadata: Mapping[str, Any] | None = None) -> LogEntry | None:
    """When the query is not run (no data-changing commit in any window): commit an entry without files that
    records the positions if an upstream moved (its data-free commits are consumed too), else nothing (None)."""
    if not any(u.moved for u in upstreams):
        log.info("no upstream of %s moved since it last consumed them: nothing to commit", table.url)
        return None
    txn = begin(table, "commit", operation, request_id=request.request_id, base=base,
                request_fingerprint=request.fingerprint,
                metadata={**(metadata or {}), **request.metadata(), **consumed_metadata(upstreams)})
    try:
        entry = txn.commit(metrics={**consumed_metrics(upstreams, False), "positions_only": True})
    except BaseException:
        txn.abort()
        raise
    log.info("no data-changing commit upstream of %s: recorded the consumed positions only (log entry %d)",
             table.url, entry.seq)
    return entry


__all__ = ["FIELD", "IncrementalRef", "Position", "Upstream", "commit_positions", "consumed_metadata",
           "consumed_metrics", "nothing_changed", "parse_incremental", "pinned", "register_changes",
           "resolve_positions", "windows"]
