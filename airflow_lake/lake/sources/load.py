"""Sources of a write: files (Parquet, CSV, JSON) or a Spark SQL query over lake tables (whole snapshots, and the
changes of upstream tables since this table consumed them: `incremental.py`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit.reads import Pin, TableRead
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.sources.changed_partitions import ALL as ALL_PARTITIONS
from airflow_lake.lake.sources.changed_partitions import changed_filters, read_choice, windows_of
from airflow_lake.lake.sources.incremental import FIELD as INCREMENTAL
from airflow_lake.lake.sources.incremental import IncrementalRef, Upstream, parse_incremental, register_changes
from airflow_lake.lake.sources.query_guard import read_only_query
from airflow_lake.lake.sources.strict_files import read_files, read_mode, refuse_lake_table_path
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import IDENTIFIER, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.format.snapshots import Snapshot
    from airflow_lake.lake.spark.scan import Scan
    from airflow_lake.lake.table import LakeTable

FORMATS = ("parquet", "csv", "json")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableRef:
    """A lake table a query reads, registered as a temporary view called `name`."""

    name: str
    path: str
    as_of: int | str | None = None
    # filters the scan applies (and prunes files and partitions with): choosing partitions here keeps a
    # read of a table bucketed from a partition on, or with per-partition counts, one bucketed scan
    filters: tuple[tuple[Any, ...], ...] = ()
    # "changed": only the partitions the query's incremental windows touched (`changed_partitions`), or those
    # the named incremental views' windows touched; or "all"
    partitions: str | tuple[str, ...] = ALL_PARTITIONS


@dataclass(frozen=True)
class Source:
    """Either files at `path` in `format`, or a `query` over `tables` and the changes of `incremental` upstreams."""

    path: str | None = None
    format: str = "parquet"
    options: Mapping[str, str] = field(default_factory=dict)
    query: str | None = None
    tables: tuple[TableRef, ...] = ()
    incremental: tuple[IncrementalRef, ...] = ()

    def describe(self) -> dict[str, Any]:
        """Short JSON form for instant metadata."""
        if self.query is not None:
            upstreams = {INCREMENTAL: {r.view: r.table for r in self.incremental}} if self.incremental else {}
            return {"query": self.query, "tables": {t.name: t.path for t in self.tables}, **upstreams}
        return {"path": self.path, "format": self.format}

    @classmethod
    def from_dict(cls, raw: Any, field_name: str = "source") -> Source:
        """Validate a source spec, strictly like every spec (`SpecReader`: unknown keys and wrong types fail)."""
        reader = SpecReader(raw, "write", field_name)
        path, query = reader.string("path"), reader.string("query")
        if (path is None) == (query is None):
            raise LakeSpecError(field_name, "give exactly one of `path` and `query`.",
                                "Read files with `path` or lake tables with `query` + `tables`.")
        options = reader.mapping("options") or {}
        fmt = reader.string("format", default="parquet")
        tables = reader.mapping("tables") or {}
        incremental = reader.raw_value(INCREMENTAL)
        reader.done()
        if path is not None and incremental is not None:
            raise LakeSpecError(f"{field_name}.{INCREMENTAL}", "incremental views are for a `query` source; a `path` "
                                "source reads files, which have no changes to consume.",
                                "Give a `query` over the incremental views instead of `path`, or drop `incremental`.")
        if path is not None:
            refuse_lake_table_path(path, f"{field_name}.path")
            if fmt not in FORMATS:
                raise LakeSpecError(f"{field_name}.format", f"unknown format {fmt!r}.",
                                    f"Use one of {', '.join(FORMATS)}.")
            read_mode(options, field_name)  # before Spark starts
            return cls(path=path, format=fmt, options={str(k): str(v) for k, v in options.items()})
        refs = []
        for name, ref in tables.items():
            where = f"{field_name}.tables.{name}"
            if not isinstance(name, str) or not IDENTIFIER.match(name):
                raise LakeSpecError(where, f"{name!r} is not a valid view name.",
                                    "Use letters, digits and underscores.")
            if isinstance(ref, str):
                refs.append(TableRef(name, ref))
            elif isinstance(ref, Mapping) and isinstance(ref.get("path"), str):
                unknown = sorted(str(k) for k in ref if k not in ("path", "as_of", "filters", "partitions"))
                if unknown:
                    raise LakeSpecError(f"{where}.{unknown[0]}", "unknown key.",
                                        "Use path, as_of, filters and partitions.")
                filters = ref.get("filters") or []
                if not isinstance(filters, list) or not all(isinstance(f, list | tuple) for f in filters):
                    raise LakeSpecError(f"{where}.filters", f"{filters!r} is not a list of filters.",
                                        "Give [['dt', '>=', '2024-06-01'], ...].")
                views = [str(i.get("view")) for i in incremental if isinstance(i, Mapping)] \
                    if isinstance(incremental, list) else []
                partitions = read_choice(ref.get("partitions"), f"{where}.partitions", views)
                refs.append(TableRef(name, ref["path"], ref.get("as_of"), tuple(tuple(f) for f in filters),
                                     partitions))
            else:
                raise LakeSpecError(where, f"{ref!r} is not a table reference.",
                                    "Give a path, or {'path': ..., 'as_of': ..., 'filters': [...]}.")
        assert query is not None
        upstreams = parse_incremental(incremental, field_name, [r.name for r in refs])
        return cls(query=query, tables=tuple(refs), incremental=upstreams)


@dataclass(frozen=True)
class QueryTable:
    """A lake table a query reads, resolved (metadata only, no Spark): the snapshot and the files it reads."""

    ref: TableRef
    table: LakeTable
    identity: str  # `TableMetadata.identity`: the same for every spelling of the table's URL
    snapshot: Snapshot
    scan: Scan
    own: bool  # the table the job commits to, read at the job's base (the pin)
    upstream: bool = False  # an incremental upstream, read at the end of its changes window (`pinned`)


def resolve_tables(source: Source, pin: Pin | None = None, pinned: Mapping[str, int] | None = None
                   ) -> tuple[QueryTable, ...]:
    """The lake tables of a query source, each at the snapshot the query reads: its `as_of`, else the job's base
    when it is the job's own table (`pin`, matched by table identity, never by the URL's spelling), else the
    snapshot an incremental upstream of the same identity is pinned at (`pinned`: identity -> seq, the end of its
    changes window), else the latest. Refused without an `as_of`: a table with the pinned table's id at another
    place (a copy made by copying its files, or the same table under another mount), which can be neither pinned
    safely nor told apart.

    A table read with `partitions: "changed"` (or a list of incremental views) is checked here (a partitioned
    plain table) and scanned whole; `prune_to_changes` narrows it once the changes windows are known."""
    from airflow_lake.lake.table import LakeTable
    from airflow_lake.lake.upsert.merge_read import raw_scan

    out: list[QueryTable] = []
    for ref in source.tables:
        table = LakeTable.open(ref.path)
        ident = table.identity()
        pinned_url = pin.url if pin is not None and ident == pin.identity else None
        elsewhere = pinned_url is not None and table.canonical_url != pinned_url
        own = pinned_url is not None and not elsewhere
        if elsewhere and ref.as_of is None:  # (a fixed snapshot of a copy needs no pin: it is read as any table)
            raise LakeSpecError(f"source.tables.{ref.name}", f"{ref.path!r} has the table id of the table this job "
                                f"writes ({pinned_url!r}) but lies at {table.canonical_url!r}: it is a copy made by "
                                "copying the table's files (its `_lake` directory included), or the same table "
                                "under another mount. Which snapshot the query must read cannot be told; nothing "
                                "was run.",
                                "Name the table by the same path as the job's `table`; to copy a table, create a "
                                "new one and write its rows into it.")
        as_of = pin.seq if own and pin is not None and ref.as_of is None else ref.as_of
        upstream = not own and ref.as_of is None and pinned is not None and ident in pinned
        if upstream:
            assert pinned is not None
            as_of = pinned[ident]
        snapshot = table.snapshot(as_of)
        filters = ref.filters
        if ref.partitions != ALL_PARTITIONS:
            check_changed_partitions(snapshot.spec, ref)
        if snapshot.spec.primary_key:  # merged per key, as any read of a primary-key table; only key filters
            # decide which files are read (a stale value must not hide a key's newer one)
            scan = raw_scan(table, snapshot, filters=filters or None)
        else:
            scan = table.scan(filters=filters or None, as_of=snapshot.seq)
        out.append(QueryTable(ref, table, ident, snapshot, scan, own, upstream))
    return tuple(out)


def check_changed_partitions(spec: TableSpec, ref: TableRef) -> None:
    """Refuse `partitions: "changed"` (or a list of views) where it means nothing, before anything is read: a
    primary-key table (merged per key across files), a table without partition columns."""
    where = f"source.tables.{ref.name}.partitions"
    if spec.primary_key:
        raise LakeSpecError(where, f'"changed" partitions of the primary-key table {ref.path!r}: its rows are '
                            "merged per key across files, not read by partition.",
                            "Read a primary-key table whole (leave `partitions` out).")
    if not spec.partition_columns:
        raise LakeSpecError(where, f'"changed" partitions of {ref.path!r}, a table without partition columns.',
                            'Leave `partitions` out (or "all") for an unpartitioned table.')


def prune_to_changes(tables: Sequence[QueryTable], upstreams: Sequence[Upstream]) -> tuple[QueryTable, ...]:
    """The query tables, those read with `partitions: "changed"` (or a list of incremental views) scanned again in
    only the partitions the upstreams' changes windows touched (`changed_partitions`; metadata only). Called once
    the windows are known (after a job's retry check)."""
    windows = {u.ref.view: u.window for u in upstreams}
    out = []
    for query_table in tables:
        ref = query_table.ref
        if ref.partitions == ALL_PARTITIONS:
            out.append(query_table)
            continue
        where = f"source.tables.{ref.name}.partitions"
        spec = query_table.snapshot.spec
        filters = (*ref.filters, *(changed_filters(spec, windows_of(ref.partitions, windows), where) or ()))
        scan = query_table.table.scan(filters=filters or None, as_of=query_table.snapshot.seq)
        out.append(dataclasses.replace(query_table, scan=scan))
    return tuple(out)


def snapshots_read(tables: Collection[QueryTable]) -> dict[str, Any]:
    """What a query reads of lake tables other than the job's own, as a request's fingerprint takes it
    (`commit.requests`): per view, the table's identity and a digest of its spec and of the files its scan
    selected. Files are never rewritten in place, so the same files are the same rows: a commit the query's
    filters exclude, or a `clean`, leaves it unchanged; an append, overwrite, delete, compaction or restore that
    changes what it reads does not. (The job's own table is left out: its read is checked by the commit's
    isolation check, and after the commit its base has moved on by the commit itself. So is an incremental
    upstream's: it is read at the end of its changes window, which the commit records as a consumed position; a
    retry finds that commit, while a later run reads a later snapshot by design, not as other inputs.)"""
    out: dict[str, Any] = {}
    for query_table in tables:
        if query_table.own or query_table.upstream:
            continue
        digest = hashlib.sha256()
        digest.update(json.dumps(query_table.snapshot.spec.to_dict(), sort_keys=True).encode())
        for path in sorted(f.path for f in query_table.scan.files):
            digest.update(b"\0" + path.encode())
        out[query_table.ref.name] = {"table": query_table.identity, "files": digest.hexdigest()}
    return out


def load(spark: SparkSession, source: Source, spec: TableSpec, scans: dict[str, dict[str, int]] | None = None,
         optional: Collection[str] = (), *, pin: Pin | None = None, tables: Sequence[QueryTable] | None = None,
         upstreams: Sequence[Upstream] = ()) -> tuple[DataFrame, dict[str, list[TableRead]]]:
    """The source as a DataFrame, and per lake table identity (`TableMetadata.identity`) the scans it reads (for
    the isolation check).

    `pin`: the table a job commits to and its base (`LakeTable.begin(base=...)`): a query reading that table
    without an `as_of` reads it at the base, never at a newer state, whatever spelling of its URL it names.
    `tables`: the query's tables as `resolve_tables` resolved them already (else they are resolved here);
    `upstreams`: the source's incremental upstreams with their changes windows (`incremental.windows`),
    registered as their views; required when the source has `incremental`.
    `scans` (if given) gets, per query table name, the files read and the files skipped by their stats;
    `optional` columns may be missing from CSV and JSON files (a partial upsert).
    """
    from airflow_lake.lake.spark.bucketed_read import register

    if source.path is not None:
        refuse_lake_table_path(source.path)
        return read_files(spark, source.path, source.format, source.options, spec=spec, optional=optional), {}
    reads: dict[str, list[TableRead]] = {}
    if tables is None:
        tables = prune_to_changes(resolve_tables(source, pin, {u.identity: u.end for u in upstreams}), upstreams)
    for query_table in tables:
        ref, table, snapshot, scan = query_table.ref, query_table.table, query_table.snapshot, query_table.scan
        if snapshot.spec.primary_key:
            table.register(spark, ref.name, as_of=snapshot.seq, filters=ref.filters or None)
        else:
            register(spark, scan, ref.name)  # bucketed where the table is
        if ref.as_of is None:  # a time-travel read sees a fixed snapshot: no later commit changes it
            reads.setdefault(query_table.identity, []).append(
                TableRead(snapshot.seq, frozenset(f.path for f in scan.files), scan.filters, snapshot.spec))
        log.info("query table %s (%s) at snapshot %d: %d of %d file(s) read, %d skipped", ref.name, table.url,
                 snapshot.seq, len(scan.files), scan.files_total, scan.files_skipped)
        if scans is not None:
            scans[ref.name] = {"files_read": len(scan.files), "files_skipped": scan.files_skipped}
    if len(upstreams) != len(source.incremental):
        raise ValueError("the source's incremental upstreams must be resolved first (`incremental.windows`)")
    register_changes(spark, upstreams)
    assert source.query is not None
    views = [t.name for t in source.tables] + [u.ref.view for u in upstreams]
    return read_only_query(spark, source.query, views=views), reads
