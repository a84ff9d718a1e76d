"""`versioned_upsert`: upsert rows by primary key with a version, as delta files (merge-on-read).

The rows are written as one file per (partition, bucket) of the key, with their stamps (`physical.py`),
and committed as an `upsert` instant that records the versions (`versions.py`). Upserts only add files,
so any number may run at once on one table, in any order; the merged read (`merge_read.py`) applies them
in version order. Duplicate keys inside one upsert combine by the same operators: by version, then in the
order Spark reads the source (within a file, file order).

Checked before anything is committed: the table has a primary key; the source has every key column, no
column the table lacks, types that convert; keys are not NULL; every row has a version. The source may
lack value columns (a partial update): those keep their merged values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import TableRead
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.format.table_state import UPSERT_ACTION
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.schema import conform
from airflow_lake.lake.spec.table_spec import Column as SpecColumn
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lake.upsert import versions as versions_module
from airflow_lake.lake.upsert.physical import delta_rows, physical_spec, value_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
OPERATION = "versioned_upsert"
VERSION_ALIAS = "__lake_version"


@dataclass(frozen=True)
class Upserted:
    """An upsert's commit, and whether an earlier run had made it (a retry or the same data again)."""

    entry: LogEntry
    already_committed: bool


def versioned_upsert(table: TableMetadata, df: DataFrame, *, version: Any = None, version_column: str | None = None,
                     replace_version: bool = False, request_id: str | None = None,
                     shuffle: bool = True, base: TableState | None = None,
                     table_reads: Iterable[TableRead] = (), request_fingerprint: str | None = None) -> Upserted:
    """Upsert `df` into the primary-key table with `version` (one for every row) or the versions in
    `version_column` (default: the table's `version_column`). See the module docstring. A committed
    `request_id` returns its commit (`request_fingerprint`: of the request's inputs, `commit.requests`).

    `base` / `table_reads`: when `df` reads this table (an upsert from a query over it), the state it read
    and its scans there (`sources.load`): an upsert or compaction since then that they could have seen is a
    conflict (see `lake.write.write`). Which versions are already applied is decided at the base too.

    `shuffle=False` writes each input task's rows as one file per bucket it holds, without an Exchange (more,
    smaller files; measured no faster on 2 cores: docs/benchmarks.md section 7)."""
    from pyspark.sql import Observation

    base = table.state() if base is None else base
    spec = stored_spec(base.spec)
    if not spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has no primary key.", "Upsert into a table created with "
                            "`primary_key` and `bucket` on it; append to this one with `write`.")
    prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
    if prior is not None:
        return Upserted(prior, True)
    fixed = None if version is None else versions_module.parse_version(version)
    column = version_column if fixed is None else None
    if fixed is not None and version_column is not None:
        raise LakeSpecError("version", "give `version` or `version_column`, not both.", "Drop one.")
    if fixed is None and column is None:
        column = spec.version_column
        if column is None:
            raise LakeSpecError("version", "the upsert has no version.", "Give `version` (e.g. a batch number or "
                                "'{{ ds_nodash }}'), or `version_column` naming a column of the source.")
    present, conformed, version_expr = _conform(df, spec, column, fixed)
    own_reads = tuple(table_reads)
    txn = begin(table, UPSERT_ACTION, OPERATION, request_id=request_id, base=base,
                request_fingerprint=request_fingerprint, metadata={"columns": present})
    try:
        observation = Observation(f"upsert_{txn.instant}")
        observed = conformed.observe(observation, *versions_module.fingerprint_aggregates(
            list(dict.fromkeys([*spec.primary_key, *spec.partition_columns, *present])), version_expr))
        metrics: dict[str, Any] = {}
        files = write_dataframe(delta_rows(observed, spec, present, version_expr), table.storage,
                                physical_spec(spec), txn.instant, metrics=metrics, bucket_shuffle=shuffle)
        facts = observation.get
        if int(facts["null_versions"]):
            raise LakeSchemaError(f"{facts['null_versions']} row(s) have no version (NULL in {column!r}); nothing "
                                  "was committed. Fix: fill the version column, or give `version`.")
        versions = [int(v) for v in facts["versions"] or ()]
        if len(versions) > versions_module.MAX_VERSIONS_PER_UPSERT:
            raise LakeSpecError("version_column", f"the source has more than {versions_module.MAX_VERSIONS_PER_UPSERT} "
                                "distinct versions.", "Upsert fewer versions at once (a version is a batch).")
        if fixed is not None and not versions:
            versions = [fixed]
        fingerprint = versions_module.fingerprint(facts)
        removed, prior = _resolve_clash(table, txn.base, versions, present, fingerprint=fingerprint,
                                        replace=replace_version)
        if prior is not None:
            txn.abort(reason=f"a duplicate of instant {prior.instant} (log entry {prior.seq}: the same version(s) "
                             f"{versions} with the same data); nothing to write")
            log.info("upsert of version(s) %s is the same as instant %s: nothing written", versions,
                     prior.instant)
            return Upserted(prior, True)
        metrics.update({"rows": int(facts["rows"]), "versions": versions, "version_count": len(versions),
                        "min_version": min(versions, default=None), "max_version": max(versions, default=None),
                        "replaced_files": len(removed)})
        entry = txn.commit(added=files, removed=removed, metrics=metrics, versions=versions, table_reads=own_reads,
                           metadata={"versions": versions, "fingerprint": fingerprint, "columns": present})
        return Upserted(entry, False)
    except BaseException:
        txn.abort()
        raise


def _conform(df: DataFrame, spec: TableSpec, version_column: str | None, fixed: int | None
             ) -> tuple[list[str], DataFrame, Column]:
    """The value columns the source sets, the source conformed to the table (key + those columns, plus the
    version as `__lake_version` when it comes from a column), and the version expression."""
    from pyspark.sql import functions as F

    names = {f.name.lower(): f.name for f in df.schema.fields}
    version_source = None
    if version_column is not None:
        version_source = names.get(version_column.lower())
        if version_source is None:
            raise LakeSchemaError(f"the source has no version column {version_column!r}; nothing was written. Fix: "
                                  f"add it, or give `version`. The source's columns are {list(names.values())}.")
        type_name = df.schema[version_source].dataType.simpleString()
        if type_name not in ("tinyint", "smallint", "int", "bigint"):
            raise LakeSchemaError(f"version column {version_source!r} is {type_name}; versions are whole numbers. "
                                  f"Fix: CAST it AS BIGINT in the query, or give `version`.")
    keys = [*spec.primary_key, *[c for c in spec.partition_columns if c not in spec.primary_key]]
    missing_keys = [k for k in keys if k.lower() not in names]
    if missing_keys:
        raise LakeSchemaError(f"the source lacks key column(s) {missing_keys}; nothing was written. Fix: select them "
                              f"(rows are merged by {keys}: the key and the partition columns).")
    table_names = {c.lower() for c in spec.column_names}
    extra = [n for low, n in names.items() if low not in table_names and n != version_source]
    if extra:
        raise LakeSchemaError(f"the source has column(s) {extra} that the table does not; nothing was written. Fix: "
                              f"drop them from the query. The table's columns are {spec.column_names}.")
    present = [c for c in value_columns(spec) if c.lower() in names]
    columns = [spec.column(c) for c in spec.column_names if c in keys or c in present]
    source = df
    if version_source is not None:
        source = source.withColumn(VERSION_ALIAS, F.col(f"`{version_source}`").cast("bigint"))
        if version_source.lower() not in table_names:  # only a version, not data
            source = source.drop(version_source)
        columns.append(SpecColumn(VERSION_ALIAS, "bigint"))
    conformed = conform(source, TableSpec(columns=tuple(columns)))
    return present, conformed, F.lit(fixed).cast("bigint") if fixed is not None else F.col(VERSION_ALIAS)


def _resolve_clash(table: TableMetadata, base: TableState, versions: list[int], present: list[str], *,
                   fingerprint: str, replace: bool) -> tuple[list[str], LogEntry | None]:
    """(files to remove, an identical earlier upsert) for an upsert of `versions` (see `versions.py`), as of
    the transaction's `base`: an upsert of one of them committed after it is a conflict at commit, and the
    retry then sees it."""
    live = versions_module.applied(table, versions, base)
    clashing = {live[v].entry.seq: live[v] for v in versions if v in live}
    if not clashing:
        return [], None
    priors = list(clashing.values())
    first = priors[0]
    if not replace:
        if len(priors) == 1 and list(first.versions) == versions and first.fingerprint == fingerprint and \
                sorted(first.columns) == sorted(present):
            return [], first.entry
        raise LakeSpecError("version", f"version {min(v for v in versions if v in live)} was already upserted by "
                            f"instant {first.entry.instant} with other data; nothing was committed.",
                            "Use a new version, or pass replace_version=True to replace that upsert.")
    state = base
    removed: list[str] = []
    for prior in priors:
        outside = sorted(set(prior.versions) - set(versions))
        if outside:
            raise LakeSpecError("replace_version", f"instant {prior.entry.instant} upserted versions {outside} too, "
                                "which this upsert does not replace; nothing was committed.",
                                "Replace all of that upsert's versions at once.")
        paths = [f.path for f in prior.entry.added]
        if any(p not in state.files for p in paths):
            raise LakeSpecError("replace_version", f"the upsert of version(s) {list(prior.versions)} (instant "
                                f"{prior.entry.instant}) was compacted into the base; it cannot be replaced. "
                                "Nothing was committed.", "Upsert a new, higher version with the corrections.")
        removed += paths
    return removed, None


def result_metrics(upserted: Upserted) -> dict[str, Any]:
    """An upsert's metrics for XCom."""
    meta: Mapping[str, Any] = upserted.entry.metadata
    return requests.entry_result(upserted.entry, versions=[int(v) for v in meta.get("versions") or ()],
                                 already_committed=upserted.already_committed)
