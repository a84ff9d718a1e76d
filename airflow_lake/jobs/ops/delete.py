"""delete: remove the rows of a lake table that match `filters` or a SQL `where` predicate (copy-on-write).

The spec is read strictly. What a delete may say depends on the kind of table, and `delete_for` is the one place
that decides it: plain, partitioned, bucketed and clustered tables take `filters` or `where`; a primary-key table
takes `keys` and `version` (a versioned delete, `lake.upsert.deletes`): `keys` is a list of key objects
({"user_id": 42}, with the partition values on a partitioned table) or a source like an upsert's (path / query)
whose columns are exactly the key columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.ops.common import request_of, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import Pin
from airflow_lake.lake.delete.copy_on_write import OPERATION, DeleteResult, delete
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.sources.load import QueryTable, Source, load, resolve_tables, snapshots_read
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import exact_value
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.deletes import Deleted, key_columns, versioned_delete
from airflow_lake.lake.upsert.versions import parse_version


@dataclass(frozen=True)
class DeleteSpec:
    """Validated delete spec: exactly one of `filters`, `where` and `keys` (with `version`)."""

    table: str
    filters: list[Any] | None
    where: str | None
    request_id: str | None
    keys: list[dict[str, Any]] | Source | None = None
    version: int | None = None


def parse(raw: Mapping[str, Any]) -> DeleteSpec:
    """Validate a delete spec's shape (filters and where are checked against the table when it runs).

    An empty `filters` list is refused: an empty list never means every row (`where: "true"` says that)."""
    reader = SpecReader(raw, OPERATION)
    table = table_path(reader)
    filters = reader.raw_value("filters")
    where = reader.string("where")
    request_id = reader.string("request_id")
    raw_keys = reader.raw_value("keys")
    version = parse_version(reader.raw_value("version")) if reader.has("version") else None
    reader.done()
    if raw_keys is not None or version is not None:
        if filters is not None or where is not None:
            raise LakeSpecError("keys", "give `keys` + `version` (a primary-key table) or `filters` / `where` (other "
                                "tables), not both.", "Drop one of them.")
        return DeleteSpec(table, None, None, request_id, _parse_keys(raw_keys, version), version)
    if filters is not None and where is not None:
        raise LakeSpecError("where", "give exactly one of `filters` and `where`.",
                            "Drop one of them (filters: [['user_id', '=', 42]], or where: \"user_id = 42\").")
    if filters is None and where is None:
        raise LakeSpecError("filters", "a delete needs `filters` or `where` (which rows to delete).",
                            "Give filters: [['user_id', '=', 42]] or where: \"user_id = 42\"; to delete every row "
                            "say where: \"true\".")
    if filters is not None:
        if not isinstance(filters, list):
            raise LakeSpecError("filters", f"{filters!r} is not a list of filters.",
                                "Give a list such as [['user_id', '=', 42]].")
        if not filters:
            raise LakeSpecError("filters", "the filter list is empty; an empty list never means every row.",
                                "Give at least one filter such as ['user_id', '=', 42]; to delete every row say "
                                "where: \"true\".")
    return DeleteSpec(table, filters, where, request_id)


def _parse_keys(raw: Any, version: int | None) -> list[dict[str, Any]] | Source:
    """`keys`: a non-empty list of key objects, or a source; `version` must come with it."""
    if raw is None:
        raise LakeSpecError("keys", "`version` is for versioned deletes of primary-key tables, which need `keys`.",
                            "Give keys: [{'user_id': 42}] with the version, or drop `version`.")
    if version is None:
        raise LakeSpecError("version", "a versioned delete needs a `version`: it removes what versions up to it "
                            "said about the keys.", "Give e.g. version: '{{ ds_nodash }}' (higher than every version "
                            "the keys were upserted with, to remove all of them).")
    if isinstance(raw, Mapping):
        return Source.from_dict(raw, "keys")
    if not isinstance(raw, list) or not raw:
        raise LakeSpecError("keys", f"{raw!r} is not a non-empty list of keys or a source.",
                            "Give [{'user_id': 42}, ...] or {'path': ..., 'format': ...} / {'query': ..., "
                            "'tables': {...}}.")
    for i, key in enumerate(raw):
        if not isinstance(key, Mapping) or not key or not all(isinstance(c, str) for c in key):
            raise LakeSpecError(f"keys[{i}]", f"{key!r} is not a key object.",
                                "Give each key as {column: value} over the key columns, e.g. {'user_id': 42}.")
    return [dict(k) for k in raw]


# (table, spark, spec, request, the lake tables a query of keys reads: `keys_query_tables`)
Runner = Callable[[LakeTable, Any, DeleteSpec, requests.Request, tuple[QueryTable, ...]], "DeleteResult | Deleted"]


def _copy_on_write(table: LakeTable, spark: Any, spec: DeleteSpec, request: requests.Request,
                   query_tables: tuple[QueryTable, ...]) -> DeleteResult:
    return delete(table, spark, filters=spec.filters, where=spec.where, request_id=spec.request_id,
                  request_fingerprint=request.fingerprint)


def _versioned(table: LakeTable, spark: Any, spec: DeleteSpec, request: requests.Request,
               query_tables: tuple[QueryTable, ...]) -> Deleted:
    if spec.keys is None or spec.version is None:
        raise LakeSpecError("table", f"{table.url!r} has a primary key ({', '.join(table.spec.primary_key)}): its rows "
                            "are merged from versioned upserts, so a delete must say which keys and at which version "
                            "(a versioned delete, with `keys` and `version`), or a late upsert of an older version "
                            "would bring them back. Nothing was deleted.",
                            "Give keys: [{...}] (or a source of keys) and version: N instead of filters / where.")
    spec_keys = key_columns(table.spec)
    if isinstance(spec.keys, Source):
        key_spec = TableSpec(columns=tuple(table.spec.column(k) for k in spec_keys))
        df, _ = load(spark, spec.keys, key_spec, pin=Pin.of(table, table.state()), tables=query_tables)
        filters = None
    else:
        keys = typed_keys(table.spec, spec_keys, spec.keys)
        df = _key_frame(spark, table.spec, spec_keys, keys)
        # each key column's values: a superset of the keys, enough to skip files and buckets that hold none
        filters = [(c, "in", sorted({k[c] for k in keys}, key=repr)) for c in table.spec.primary_key]
    return versioned_delete(table, spark, df, version=spec.version, request_id=spec.request_id,
                            request_fingerprint=request.fingerprint, filters=filters, request_reads=request.reads)


def typed_keys(spec: TableSpec, columns: Sequence[str], keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The key objects by the key columns' names, each value converted to its column's type where that is exact
    (`types.exact_value`: the text "42" a template renders is 42 for an integer key; "4.0" or "abc" is refused,
    naming the key). Nothing is read or written before this check."""
    wanted = {c.lower(): c for c in columns}
    out = []
    for i, key in enumerate(keys):
        given = {c.lower(): (c, v) for c, v in key.items()}
        missing = [c for low, c in wanted.items() if low not in given]
        extra = [c for c in key if c.lower() not in wanted]
        if missing or extra:
            partitioned = " (a key is unique within a partition: give its partition values too)" \
                if spec.partition_columns else ""
            raise LakeSpecError(f"keys[{i}]", f"{key!r} does not name exactly the key columns {list(columns)}"
                                f"{partitioned}: missing {missing}, not key columns {extra}.",
                                f"Give each key as {{{', '.join(repr(c) + ': ...' for c in columns)}}}.")
        out.append({column: exact_value(spec.column(column).type, given[low][1], f"keys[{i}].{given[low][0]}")
                    for low, column in wanted.items()})
    return out


def _key_frame(spark: Any, spec: TableSpec, columns: Sequence[str], keys: list[dict[str, Any]]) -> Any:
    """The typed key objects (`typed_keys`) as a DataFrame of the key columns."""
    from airflow_lake.lake.spark.schema import spark_type

    rows = [tuple(key[c] for c in columns) for key in keys]
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField(c, spark_type(spec.column(c).type), True) for c in columns])
    try:
        return spark.createDataFrame(rows, schema)
    except (TypeError, ValueError) as err:
        types = ", ".join(f"{c} {spec.column(c).type}" for c in columns)
        raise LakeSpecError("keys", f"a key's value does not fit its column's type: {err}",
                            f"Give values of the key columns' types ({types}).") from err


def keys_query_tables(table: LakeTable, spec: DeleteSpec) -> tuple[QueryTable, ...]:
    """The lake tables a source of keys reads (a query over lake tables; none for files or listed keys), each at the
    snapshot it reads (the table's own at its current state): metadata only, before the request is fingerprinted,
    so a re-run under the same request id whose keys' tables changed is refused, not answered with the first
    result (`commit.requests`)."""
    if not isinstance(spec.keys, Source):
        return ()
    return resolve_tables(spec.keys, Pin.of(table, table.state()))


def delete_for(table: LakeTable) -> Runner:
    """How rows of this kind of table are deleted: copy-on-write, or (primary key) a versioned delete."""
    return _versioned if table.spec.primary_key else _copy_on_write


def _start(spec: DeleteSpec) -> tuple[LakeTable, tuple[QueryTable, ...], requests.Request]:
    """`execute`'s first step, up to its retry check (no Spark): the table, what a query of keys reads, the request."""
    table = LakeTable.open(spec.table)
    # (the key fields stay out of a filter delete's fingerprint: retries recorded before them still match)
    if spec.keys is not None and not table.spec.primary_key:
        raise LakeSpecError("keys", f"{table.url!r} has no primary key; `keys` and `version` are for versioned "
                            "deletes of primary-key tables.", "Delete its rows with `filters` or `where`.")
    query_tables = keys_query_tables(table, spec)
    request = request_of(OPERATION, spec, ignore=("keys", "version") if spec.keys is None else (),
                         reads=snapshots_read(query_tables))
    return table, query_tables, request


def retry_result(spec: DeleteSpec) -> dict[str, Any] | None:
    """What `execute` returns when the spec's request has already committed (read from the log, no Spark), else
    None (it has to run)."""
    table, _, request = _start(spec)
    return requests.retry_result(table, request)


def execute(spark: Any, spec: DeleteSpec) -> dict[str, Any]:
    """Run the delete; a retry with the same request_id returns the first run's metrics."""
    table, query_tables, request = _start(spec)
    if (first := requests.retry_result(table, request)) is not None:
        return first
    result = delete_for(table)(table, spark, spec, request, query_tables)
    if result.entry is None:
        return {**requests.result(table.url, OPERATION, None, already_committed=False), **result.metrics(),
                "request_id": spec.request_id}
    return requests.result(table.url, OPERATION, result.entry, already_committed=result.already_committed)


register(Operation(OPERATION, parse, execute, summary="delete rows matching filters or a SQL predicate, or keys "
                   "at a version (primary-key tables)", retry_result=retry_result))
