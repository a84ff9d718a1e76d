"""versioned_upsert: upsert rows by primary key with a version, from files or a Spark SQL query."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.jobs.ops.common import check_source_filters, request_of, table_path, without_query
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
from airflow_lake.lake.spec.evolution import ADD_COLUMNS, check_schema_evolution
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import Column, TableSpec, stored_spec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.arrow_upsert import NeedsSpark, arrow_source, arrow_upsert, unsupported
from airflow_lake.lake.upsert.physical import value_columns
from airflow_lake.lake.upsert.upsert import DEFAULT_DELETE_COLUMN, OPERATION, Upserted, result_metrics, versioned_upsert
from airflow_lake.lake.upsert.versions import parse_version

if TYPE_CHECKING:
    from airflow_lake.lake.format.snapshots import TableState


@dataclass(frozen=True)
class UpsertSpec:
    """A validated versioned_upsert spec."""

    table: str
    source: Source
    version: int | None
    version_column: str | None
    replace_version: bool
    request_id: str | None
    schema_evolution: str = "none"
    merge_operators: Mapping[str, str] | None = None
    delete_column: str | None = None


def parse(raw: Mapping[str, Any]) -> UpsertSpec:
    """Validate the spec: a source, and a version or a version column (else the table's)."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    if not reader.has("source"):
        raise LakeSpecError("source", "the upsert needs a `source`.",
                            "Give {'path': ..., 'format': ...} or {'query': ..., 'tables': {...}}.")
    check_source_filters(reader.raw_value("source"))
    source = Source.from_dict(reader.raw_value("source"))
    version = parse_version(reader.raw_value("version")) if reader.has("version") else None
    version_column = reader.string("version_column")
    if version is not None and version_column is not None:
        raise LakeSpecError("version", "give `version` or `version_column`, not both.", "Drop one.")
    replace_version = reader.boolean("replace_version", default=False)
    request_id = reader.string("request_id")
    schema_evolution = check_schema_evolution(reader.raw_value("schema_evolution"))
    merge_operators = reader.string_map("merge_operators")
    delete_column = reader.string("delete_column")
    if merge_operators and schema_evolution != ADD_COLUMNS:
        raise LakeSpecError("merge_operators", "merge operators are for the columns schema evolution adds.",
                            'Set schema_evolution to "add_columns", or drop `merge_operators`.')
    reader.done()
    return UpsertSpec(table, source, version, version_column, replace_version, request_id, schema_evolution,
                      merge_operators or None, delete_column)


def execute(spark: Any, spec: UpsertSpec) -> dict[str, Any]:
    """Run the upsert; a retry (same request id, or the same version with the same data) writes nothing, and
    the same request id with other inputs is refused (`commit.requests`).

    A query that reads the table itself reads it at the upsert's base, and incremental upstreams are read and
    consumed as a write consumes them (see `write.execute`)."""
    start = _start(spec)
    if (first := _retry_of(start)) is not None:  # before the source is read: it may be gone
        return first
    table, base, table_spec, pin, request = start.table, start.base, start.table_spec, start.pin, start.request
    upstreams = windows(start.positions)  # after the retry check: a retry reads no window (it may be cleaned by now)
    query_tables = prune_to_changes(start.query_tables, upstreams)  # tables read in their changed partitions only
    if nothing_changed(upstreams):
        return without_query(table, OPERATION, base, upstreams, request=request, source=spec.source.describe())
    if spark is None:  # the hook found the source small and plain (`spark_free`): pyarrow here, or NeedsSpark
        return _execute_without_spark(spec, start)
    column = spec.version_column or (None if spec.version is not None else table_spec.version_column)
    source_spec = table_spec
    if column is not None and not table_spec.has_column(column):  # a version only: read it as a bigint
        source_spec = TableSpec(columns=(*table_spec.columns, Column(column, "bigint")))
    marker = spec.delete_column or DEFAULT_DELETE_COLUMN  # delete markers: read as a boolean, never required
    if not table_spec.has_column(marker):
        source_spec = TableSpec(columns=(*source_spec.columns, Column(marker, "boolean")))
    df, reads = load(spark, spec.source, source_spec, optional=[*value_columns(table_spec), marker],
                     pin=pin, tables=query_tables, upstreams=upstreams)
    try:
        upserted = versioned_upsert(table, df, version=spec.version, version_column=spec.version_column,
                                    replace_version=spec.replace_version, request_id=spec.request_id,
                                    request_fingerprint=request.fingerprint,
                                    request_reads=request.reads,
                                    base=base, table_reads=reads.get(pin.identity, ()),
                                    schema_evolution=spec.schema_evolution, merge_operators=spec.merge_operators,
                                    delete_column=spec.delete_column, metadata=consumed_metadata(upstreams),
                                    metrics=consumed_metrics(upstreams, True))
    except Exception as err:  # a source file Spark refused mid-write, as a clear error
        clear = source_error(err)
        if clear is None:
            raise
        raise clear from err
    return {"table": table.url, "operation": OPERATION, **result_metrics(upserted)}


def _execute_without_spark(spec: UpsertSpec, start: _Start) -> dict[str, Any]:
    """The upsert of a plain Parquet source with pyarrow in this process (`upsert.arrow_upsert`); raises
    `NeedsSpark` before anything is written when it has to run on Spark after all."""
    if spec.source.path is None or spec.schema_evolution == ADD_COLUMNS:
        raise NeedsSpark("the source is a query, or schema evolution may add columns")
    # (the size was checked by `spark_free` with the hook's limit; the files are the same)
    source = arrow_source(spec.source.path, spec.source.format, spec.source.options, max_bytes=sys.maxsize)
    upserted = arrow_upsert(start.table, source, version=spec.version, version_column=spec.version_column,
                            replace_version=spec.replace_version, request_id=spec.request_id,
                            base=start.base, request_fingerprint=start.request.fingerprint)
    return {"table": start.table.url, "operation": OPERATION, **result_metrics(upserted)}


def spark_free(spec: UpsertSpec, max_bytes: int) -> str | None:
    """Why the upsert needs Spark (None: it can run in the caller's process, `_execute_without_spark`): a `path`
    source of plain Parquet files of at most `max_bytes`, into a table whose columns and bucketing the pyarrow path
    writes as Spark does (`arrow_upsert.unsupported`). Reads the table's state and the files' schemas only."""
    if spec.source.path is None or spec.schema_evolution == ADD_COLUMNS:
        return "the source is a query, or schema evolution may add columns"
    try:
        source = arrow_source(spec.source.path, spec.source.format, spec.source.options, max_bytes=max_bytes)
    except NeedsSpark as why:
        return str(why)
    table_spec = stored_spec(LakeTable.open(spec.table).state().spec)
    return unsupported(table_spec, source, version=spec.version, version_column=spec.version_column,
                       delete_column=spec.delete_column)


@dataclass(frozen=True)
class _Start:
    """What an upsert reads before its retry check (metadata only): the table at its base, the request it makes."""

    table: LakeTable
    base: TableState
    table_spec: TableSpec
    pin: Pin
    positions: tuple[Position, ...]
    query_tables: tuple[QueryTable, ...]
    request: requests.Request


def _start(spec: UpsertSpec) -> _Start:
    """`execute`'s first step, up to its retry check: no Spark, nothing read but the logs."""
    table = LakeTable.open(spec.table)
    base = table.state()  # before anything is read: the spec, the applied versions, a query over this table
    table_spec = stored_spec(base.spec)
    # (left out, the evolution fields are not part of the fingerprint: retries recorded before them still match)
    pin = Pin.of(table, base)
    positions = resolve_positions(spec.source.incremental, base, pin)  # where each upstream's window starts, ends
    query_tables = resolve_tables(spec.source, pin, pinned(positions))  # metadata only: snapshots and files read
    request = request_of(OPERATION, spec, ignore=(() if spec.schema_evolution == ADD_COLUMNS
                                                  else ("schema_evolution", "merge_operators"))
                         + (() if spec.delete_column else ("delete_column",)), reads=snapshots_read(query_tables))
    return _Start(table, base, table_spec, pin, positions, query_tables, request)


def _retry_of(start: _Start) -> dict[str, Any] | None:
    """The first try's result when the request has committed (flagged `already_committed`), else None."""
    if (prior := requests.committed(start.table, start.request)) is None:
        return None
    return {"table": start.table.url, "operation": OPERATION, **result_metrics(Upserted(prior, True))}


def retry_result(spec: UpsertSpec) -> dict[str, Any] | None:
    """What `execute` returns when the spec's request has already committed (read from the log, no Spark), else
    None (it has to run)."""
    return _retry_of(_start(spec))


register(Operation(OPERATION, parse, execute, summary="upsert by primary key with a version (merge-on-read)",
                   retry_result=retry_result, spark_free=spark_free))
