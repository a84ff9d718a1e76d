"""Pieces shared by operations: the table field, the request a spec makes, checks of empty selections."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.jobs.noop import NothingToDo
from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.requests import Request, fingerprint
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.storage import normalize_url
from airflow_lake.lake.sources.load import Source
from airflow_lake.lake.spec.strict import SpecReader

if TYPE_CHECKING:
    from airflow_lake.lake.format.snapshots import TableState
    from airflow_lake.lake.sources.incremental import Upstream
    from airflow_lake.lake.table import LakeTable


def table_path(reader: SpecReader) -> str:
    """The required `table` field, checked as a path before any SparkSession starts (NUL bytes, blanks)."""
    path = reader.required("table")
    normalize_url(path)
    return path


def request_of(operation: str, spec: Any, *, ignore: Collection[str] = (), reads: Mapping[str, Any] | None = None,
               rebuild: bool = False) -> Request:
    """The request a parsed spec (a dataclass with `request_id`) makes, fingerprinted over the fields that
    define its result: all but `table` (where, not what), `request_id` and `ignore` (settings that change how it
    runs, not what it commits, such as parallelism), so an Airflow retry matches and a reused id does not.

    `reads`: what its query reads of other lake tables (`sources.load.snapshots_read`), compared on its own so
    that commits from before it was recorded still match; `rebuild`: an overwrite, which runs again when they
    changed (`commit.requests`)."""
    request_id = spec.request_id
    inputs = {f.name: _input(getattr(spec, f.name)) for f in dataclasses.fields(spec)
              if f.name not in {"table", "request_id", *ignore}}
    return Request(operation, request_id, fingerprint(inputs) if request_id else None,
                   (reads or None) if request_id else None, rebuild)


def _input(value: Any) -> Any:
    """A spec field as its fingerprint takes it: a source without incremental upstreams as it was before they
    existed (so retries of requests committed before them still match)."""
    if isinstance(value, Source) and not value.incremental:
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.name != "incremental"}
    return value


def without_query(table: LakeTable, operation: str, base: TableState, upstreams: tuple[Upstream, ...], *,
                  request: Request, source: Mapping[str, Any]) -> dict[str, Any]:
    """The result of an incremental job whose upstreams have no data-changing commit to consume: the query is not
    run; the moved positions are committed without files (`incremental.commit_positions`), or nothing is."""
    from airflow_lake.lake.sources.incremental import commit_positions, consumed_metrics

    entry = commit_positions(table, operation, base, upstreams, request, metadata={"source": source})
    if entry is not None:
        return requests.result(table.url, operation, entry, already_committed=False)
    return {"table": table.url, "operation": operation, "request_id": request.request_id, "noop": True,
            "reason": "no upstream has changes this table has not consumed", "files_added": 0, "rows_added": 0,
            "already_committed": False, **consumed_metrics(upstreams, False)}


def plain_table(table: LakeTable) -> None:
    """Refuse a primary-key table where only plain tables are written (write, clustering)."""
    if table.spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has a primary key: rows go in by key and version.",
                            "Use versioned_upsert for its rows and compact for its files.")


def primary_key_table(table: LakeTable) -> None:
    """Refuse a plain table where only primary-key tables are meant (compact)."""
    if not table.spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has no primary key: there are no upserts to compact.",
                            "Use clustering to merge the small files of a plain table.")


def check_source_filters(raw_source: Any, field_name: str = "source") -> None:
    """Refuse `filters: []` on a table a query reads: an empty filter list would read the whole table
    (leave `filters` out for that)."""
    tables = raw_source.get("tables") if isinstance(raw_source, Mapping) else None
    if not isinstance(tables, Mapping):
        return
    for name, ref in tables.items():
        if isinstance(ref, Mapping) and isinstance(ref.get("filters"), list) and not ref["filters"]:
            where = f"{field_name}.tables.{name}.filters"
            raise LakeSpecError(where, "the filter list is empty: it would select every row of the table.",
                                f"Give at least one filter such as ['dt', '=', '2024-01-01'], or leave `{where}` "
                                "out to read the whole table.")


__all__ = ["NothingToDo", "check_source_filters", "plain_table", "primary_key_table", "request_of", "table_path",
           "without_query"]
