"""write: append to or overwrite a lake table from files or a Spark SQL query over lake tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.jobs.ops.common import (
    NothingToDo,
    check_source_filters,
    plain_table,
    request_of,
    table_path,
    without_query,
)
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import Pin
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.sources.incremental import (
    Position,
    consumed_metadata,
    consumed_metrics,
    nothing_changed,
    pinned,
    resolve_positions,
    windows,
)
from airflow_lake.lake.sources.load import (
    QueryTable,
    Source,
    load,
    prune_to_changes,
    resolve_tables,
    snapshots_read,
)
from airflow_lake.lake.sources.strict_files import source_error
from airflow_lake.lake.spark.schema import nullable_columns
from airflow_lake.lake.spec.evolution import check_schema_evolution
from airflow_lake.lake.spec.partitions import DYNAMIC, normalize_partitions
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.write import append_overwrite as lake_write

if TYPE_CHECKING:
    from airflow_lake.lake.format.snapshots import TableState


@dataclass(frozen=True)
class WriteSpec:
    """Validated write spec."""

    table: str
    source: Source
    mode: str
    partitions: list[Mapping[str, Any]] | str | None
    request_id: str | None
    max_exchanges: int | None = None
    schema_evolution: str = "none"


def parse(raw: Mapping[str, Any]) -> WriteSpec | NothingToDo:
    """Validate a write spec (shape only; values are checked against the table when it runs).

    An overwrite of `partitions: []` overwrites nothing (never the whole table): `NothingToDo`."""
    reader = SpecReader(raw, "write")
    table = table_path(reader)
    if not reader.has("source"):
        raise LakeSpecError("source", "the write operation needs a `source`.",
                            "Give {'path': ..., 'format': ...} or {'query': ..., 'tables': {...}}.")
    check_source_filters(reader.raw_value("source"))
    source = Source.from_dict(reader.raw_value("source"))
    mode = reader.choice("mode", lake_write.MODES, "append")
    partitions = reader.raw_value("partitions")
    if partitions is not None and mode != "overwrite":
        raise LakeSpecError("partitions", "partitions apply to overwrite only.", "Set mode to 'overwrite'.")
    if isinstance(partitions, str) and partitions != DYNAMIC:
        raise LakeSpecError("partitions", f"{partitions!r} is not allowed.",
                            "Give a list of partitions or 'dynamic'.")
    request_id = reader.string("request_id")
    limit = reader.number("max_exchanges")
    if limit is not None and limit != int(limit):
        raise LakeSpecError("max_exchanges", f"{limit!r} is not a whole number.", "Give 0 for a shuffle-free step.")
    max_exchanges = None if limit is None else int(limit)
    schema_evolution = check_schema_evolution(reader.raw_value("schema_evolution"))
    reader.done()
    if partitions == []:  # e.g. an upstream task that found no partitions to overwrite
        return NothingToDo(table, "write", "partitions", request_id, partitioned=True, check=plain_table)
    return WriteSpec(table, source, mode, partitions, request_id, max_exchanges, schema_evolution)


def execute(spark: Any, spec: WriteSpec) -> dict[str, Any]:
    """Run the write; a retry with the same request_id returns the first run's metrics (and one with other
    inputs is refused: `commit.requests`). `max_exchanges` is a guard, not an input of the data.

    A query's lake tables are inputs too: the same request id over tables that hold other files now is not a
    retry. An overwrite then runs again (it rebuilds from the current snapshots); an append is refused.

    A query that reads the table itself (under any spelling of its URL: tables are matched by identity) reads it
    at the write's base: what it saw is what the commit is checked against (WriteSerializable, `lake.reads`).

    Incremental upstreams (`sources.incremental`): their changes since this table's consumed positions (at the
    base) up to their heads now; the commit records the new positions. Without a data-changing commit in any
    window the query is not run (`without_query`)."""
    start = _start(spec)
    if (first := requests.retry_result(start.table, start.request)) is not None:  # before the source is read
        return first  # (it may be gone)
    table, base, base_spec, pin, request = start.table, start.base, start.base_spec, start.pin, start.request
    upstreams = windows(start.positions)  # after the retry check: a retry reads no window (it may be cleaned by now)
    query_tables = prune_to_changes(start.query_tables, upstreams)  # tables read in their changed partitions only
    if nothing_changed(upstreams):
        return without_query(table, "write", base, upstreams, request=request, source=spec.source.describe())
    scans: dict[str, dict[str, int]] = {}
    # files (CSV headers, JSON keys) may lack nullable columns, as queries may: they read NULL (`schema.conform`)
    df, reads = load(spark, spec.source, base_spec, scans, optional=nullable_columns(base_spec), pin=pin,
                     tables=query_tables, upstreams=upstreams)
    metrics = {**({"source_scans": scans} if scans else {}), **consumed_metrics(upstreams, True)}
    try:
        entry = lake_write.write(table, df, mode=spec.mode, partitions=spec.partitions, request_id=spec.request_id,
                                 request_fingerprint=request.fingerprint, request_reads=request.reads,
                                 metadata={"source": spec.source.describe(), **consumed_metadata(upstreams)},
                                 metrics=metrics or None,
                                 max_exchanges=spec.max_exchanges, base=base,
                                 table_reads=reads.get(pin.identity, ()), schema_evolution=spec.schema_evolution)
    except Exception as err:  # a source file Spark refused mid-write, as a clear error
        clear = source_error(err)
        if clear is None:
            raise
        raise clear from err
    return requests.result(table.url, "write", entry, already_committed=False)


@dataclass(frozen=True)
class _Start:
    """What a write reads before its retry check (metadata only): the table at its base, the request it makes."""

    table: LakeTable
    base: TableState
    base_spec: TableSpec
    pin: Pin
    positions: tuple[Position, ...]
    query_tables: tuple[QueryTable, ...]
    request: requests.Request


def _start(spec: WriteSpec) -> _Start:
    """`execute`'s first step, up to its retry check: no Spark, nothing read but the logs."""
    table = LakeTable.open(spec.table)
    base = table.state()  # before anything is read: the spec, the partitions, a query over this table
    base_spec = stored_spec(base.spec)
    normalize_partitions(base_spec, spec.partitions)  # fail before reading the source
    pin = Pin.of(table, base)
    positions = resolve_positions(spec.source.incremental, base, pin)  # where each upstream's window starts, ends
    query_tables = resolve_tables(spec.source, pin, pinned(positions))  # metadata only: snapshots and files read
    # (left out, schema_evolution is not part of the fingerprint: retries recorded before it existed still match)
    request = request_of("write", spec, ignore=("max_exchanges", *(("schema_evolution",)
                                                                   if spec.schema_evolution == "none" else ())),
                         reads=snapshots_read(query_tables), rebuild=spec.mode == "overwrite")
    return _Start(table, base, base_spec, pin, positions, query_tables, request)


def retry_result(spec: WriteSpec) -> dict[str, Any] | None:
    """What `execute` returns when the spec's request has already committed (read from the log, no Spark), else
    None (it has to run)."""
    start = _start(spec)
    return requests.retry_result(start.table, start.request)


register(Operation("write", parse, execute, summary="append or overwrite from files or a query",
                   retry_result=retry_result))
