"""`versioned_upsert`: upsert rows by primary key with a version, as delta files (merge-on-read).

The rows are written as one file per (partition, bucket) of the key, with their stamps (`physical.py`),
and committed as an `upsert` instant that records the versions (`versions.py`). Upserts only add files,
so any number may run at once on one table, in any order; the merged read (`merge_read.py`) applies them
in version order. Duplicate keys inside one upsert combine by the same operators: by version, then in the
order Spark reads the source (within a file, file order).

Checked before anything is committed: the table has a primary key; the source has every key column, no
column the table lacks, types that convert; keys are not NULL; every row has a version. The source may
lack value columns (a partial update): those keep their merged values.

Delete markers: a boolean source column (`_delete` unless the table has such a column, or the one named by
`delete_column`: Hudi's `_hoodie_is_deleted`) marks rows that delete their key at their version (NULL: not a
delete); it is never stored. Marked rows are written as delete rows and checked as a delete operation's keys
are (`deletes.check_deletes`); the rules are in `physical.py`.
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
from airflow_lake.lake.format.consumed import CONSUMED
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.format.table_state import UPSERT_ACTION
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.schema import EVOLUTION_FIX, conform, new_columns
from airflow_lake.lake.spec import sql_text
from airflow_lake.lake.spec.evolution import ADD_COLUMNS, add_columns, added_columns, check_schema_evolution
from airflow_lake.lake.spec.table_spec import Column as SpecColumn
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lake.upsert import versions as versions_module
from airflow_lake.lake.upsert.physical import delta_rows, physical_spec, value_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from airflow_lake.lake.commit.transaction import Transaction
    from airflow_lake.lake.format.data_files import DataFile
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
OPERATION = "versioned_upsert"
VERSION_ALIAS = "__lake_version"
DEFAULT_DELETE_COLUMN = "_delete"
MARK = "__lake_delete"  # the delete flag while writing (and in fingerprints), never stored


@dataclass(frozen=True)
class Upserted:
    """An upsert's commit, and whether an earlier run had made it (a retry or the same data again)."""

    entry: LogEntry
    already_committed: bool


def versioned_upsert(table: TableMetadata, df: DataFrame, *, version: Any = None, version_column: str | None = None,
                     replace_version: bool = False, request_id: str | None = None,
                     shuffle: bool = True, base: TableState | None = None,
                     table_reads: Iterable[TableRead] = (), request_fingerprint: str | None = None,
                     schema_evolution: str = "none", merge_operators: Mapping[str, str] | None = None,
                     delete_column: str | None = None, request_reads: Mapping[str, Any] | None = None,
                     metadata: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None) -> Upserted:
    """Upsert `df` into the primary-key table with `version` (one for every row) or the versions in
    `version_column` (default: the table's `version_column`). See the module docstring. A committed
    `request_id` returns its commit (`request_fingerprint`: of the request's inputs, `commit.requests`;
    `request_reads`: what its query read of other lake tables, recorded too: other snapshots are refused).

    `base` / `table_reads`: when `df` reads this table (an upsert from a query over it), the state it read
    and its scans there (`sources.load`): an upsert or compaction since then that they could have seen is a
    conflict (see `lake.write.write`). Which versions are already applied is decided at the base too.

    `shuffle=False` writes each input task's rows as one file per bucket it holds, without an Exchange (more,
    smaller files; measured no faster on 2 cores: docs/benchmarks.md section 7).

    `schema_evolution="add_columns"`: source columns the table lacks are added (nullable, at the end, in source
    order) in the same commit, merged by `merge_operators` (new column -> operator; default "last"). Versions
    upserted before read them as NULL (their files have no stamp for them: they never set them).

    `delete_column`: the source's boolean delete-marker column (default `_delete`, if the source has it and
    the table does not); see the module docstring.

    `metadata` / `metrics`: recorded with the commit besides the upsert's own. With consumed upstream positions in
    `metadata` (`format.consumed`), an upsert that turns out to repeat an earlier one still commits them, in an
    entry without files: the changes it consumed are applied already, and must not be read again."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    base = table.state() if base is None else base
    spec = stored_spec(base.spec)
    if not spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has no primary key.", "Upsert into a table created with "
                            "`primary_key` and `bucket` on it; append to this one with `write`.")
    request = requests.Request(OPERATION, request_id, request_fingerprint, request_reads)
    prior = requests.committed(table, request)
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
    marker = _delete_marker(df, spec, delete_column)
    old_spec = spec
    spec = _evolve(df if marker is None else df.drop(marker), spec, column, schema_evolution, merge_operators)
    spec_change = {} if spec == old_spec else {"spec": spec.to_dict(), "added_columns": added_columns(old_spec, spec)}
    present, conformed, version_expr = _conform(df, spec, column, fixed, marker)
    own_reads = tuple(table_reads)
    checked = [] if marker is None else _check_markers(table, base, spec, conformed, version_expr)
    txn = begin(table, UPSERT_ACTION, OPERATION, request_id=request_id, base=base,
                request_fingerprint=request_fingerprint,
                metadata={"columns": present, **(metadata or {}), **request.metadata()})
    try:
        observation = Observation(f"upsert_{txn.instant}")
        fingerprinted = list(dict.fromkeys([*spec.primary_key, *spec.partition_columns, *present]))
        counted = [] if marker is None else [F.expr(f"count_if({sql_text.ident(MARK)}) AS `deletes`")]
        observed = conformed.observe(observation, *versions_module.fingerprint_aggregates(
            fingerprinted + ([MARK] if marker else []), version_expr), *counted)
        written: dict[str, Any] = dict(metrics or {})
        deleted = None if marker is None else sql_text.ident(MARK)
        files = write_dataframe(delta_rows(observed, spec, present, version_expr, deleted), table.storage,
                                physical_spec(spec), txn.instant, metrics=written, bucket_shuffle=shuffle,
                                plain_columns=plain_keys(spec), sized_tasks=True)
        facts = _observed(observation, files)
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
        removed, prior = resolve_clash(table, txn.base, versions, present, fingerprint=fingerprint,
                                        replace=replace_version)
        if prior is not None and CONSUMED in (metadata or {}):
            log.info("upsert of version(s) %s is the same as instant %s: only the consumed positions are committed",
                     versions, prior.instant)
            return Upserted(txn.commit(metrics={**(metrics or {}), "duplicate_of": prior.seq}), False)
        if prior is not None:
            txn.abort(reason=f"a duplicate of instant {prior.instant} (log entry {prior.seq}: the same version(s) "
                             f"{versions} with the same data); nothing to write")
            log.info("upsert of version(s) %s is the same as instant %s: nothing written", versions,
                     prior.instant)
            return Upserted(prior, True)
        return commit_upsert(txn, files, removed, written, rows=int(facts["rows"]), versions=versions,
                             fingerprint=fingerprint, present=present, table_reads=own_reads, reads=checked,
                             deletes=None if marker is None else int(facts["deletes"]), spec_change=spec_change)
    except BaseException:
        txn.abort()
        raise


# What an empty source's upsert observes: no rows, so nothing summed (`fingerprint_aggregates` of no rows)
_EMPTY_FACTS = {"rows": 0, "null_versions": 0, "versions": [], "low": 0, "high": 0, "xor": 0, "deletes": 0}


def _observed(observation: Any, files: list[DataFile]) -> Mapping[str, Any]:
    """The facts `observation` collected while the rows were written. A source with no rows at all (no partition,
    so no task ran) reports none: Spark's `Observation.get` then fails inside PySpark on its empty row, and the
    facts are those of no rows (nothing was written)."""
    try:
        facts: Mapping[str, Any] = observation.get
    except Exception:
        if files:
            raise
        return _EMPTY_FACTS
    return facts or _EMPTY_FACTS


def commit_upsert(txn: Transaction, files: list[DataFile], removed: list[str], metrics: dict[str, Any], *, rows: int,
                  versions: list[int], fingerprint: str, present: list[str], table_reads: tuple[TableRead, ...] = (),
                  reads: list[str] | None = None, deletes: int | None = None,
                  spec_change: Mapping[str, Any] | None = None) -> Upserted:
    """Commit an upsert's written `files` (replacing `removed`) with its versions, fingerprint and metrics."""
    metrics.update({"rows": rows, "versions": versions, "version_count": len(versions),
                    "min_version": min(versions, default=None), "max_version": max(versions, default=None),
                    "replaced_files": len(removed)})
    metrics.update({} if deletes is None else {"delete_rows": deletes})
    entry = txn.commit(added=files, removed=removed, metrics=metrics, versions=versions, table_reads=table_reads,
                       reads=reads or [], metadata={"versions": versions, "fingerprint": fingerprint,
                                                    "columns": present,
                                                    **({} if deletes is None else {"deletes": deletes}),
                                                    **(spec_change or {})})
    return Upserted(entry, False)


def plain_keys(spec: TableSpec) -> list[str]:
    """The key columns an upsert's files hold without a Parquet dictionary: an upsert sets a key about once, so
    a dictionary of them is the keys again, built at a cost (`file_writer.plain_options`). Partition columns
    live in directory names."""
    return [spec.physical_of(k) for k in spec.primary_key if k not in spec.partition_columns]


def _evolve(df: DataFrame, spec: TableSpec, version_column: str | None, mode: str,
            merge_operators: Mapping[str, str] | None) -> TableSpec:
    """The table spec with the source's new columns (schema evolution), or `spec` when it is off."""
    if check_schema_evolution(mode) != ADD_COLUMNS:
        if merge_operators:
            raise LakeSpecError("merge_operators", "merge operators are given for new columns, but schema evolution "
                                "is off.", 'Set schema_evolution to "add_columns", or drop `merge_operators`.')
        return spec
    ignore = [version_column] if version_column is not None and not spec.has_column(version_column) else []
    new = new_columns(df, spec, ignore=ignore)
    names = {c.name.lower() for c in new}
    for name in merge_operators or {}:
        if name.lower() not in names:
            raise LakeSpecError(f"merge_operators.{name}", f"{name!r} is not a new column of the source (new: "
                                f"{[c.name for c in new] or 'none'}).", "Give operators for new columns only; an "
                                "existing column keeps its operator.")
    operators = {c.name: op for c in new for name, op in (merge_operators or {}).items()
                 if name.lower() == c.name.lower()}
    return add_columns(spec, new, merge_operators=operators)


def _delete_marker(df: DataFrame, spec: TableSpec, delete_column: str | None) -> str | None:
    """The source's delete-marker column (its name in the source), or None."""
    names = {f.name.lower(): f for f in df.schema.fields}
    if delete_column is None:
        if DEFAULT_DELETE_COLUMN in names and not spec.has_column(DEFAULT_DELETE_COLUMN):
            delete_column = DEFAULT_DELETE_COLUMN
        else:
            return None
    elif spec.has_column(delete_column):
        raise LakeSpecError("delete_column", f"{delete_column!r} is a column of the table; delete markers are never "
                            "stored.", "Name the source's marker column something the table does not have.")
    field = names.get(delete_column.lower())
    if field is None:
        raise LakeSchemaError(f"the source has no delete-marker column {delete_column!r} (`delete_column`); nothing "
                              f"was written. Fix: add it (boolean), or drop `delete_column`. The source's columns "
                              f"are {[f.name for f in df.schema.fields]}.")
    if field.dataType.simpleString() != "boolean":
        raise LakeSchemaError(f"delete-marker column {field.name!r} is {field.dataType.simpleString()}; it must be "
                              f"boolean (true: delete the key at the row's version). Fix: e.g. CAST(op = 'D' AS "
                              f"BOOLEAN) AS {field.name} in the query.")
    return field.name


def _check_markers(table: TableMetadata, base: TableState, spec: TableSpec, conformed: DataFrame,
                   version: str) -> list[str]:
    """Refuse delete markers that cannot be applied exactly (`deletes.check_deletes`) before anything is
    written; the files that check depends on (`version`: the rows' version, a SQL expression)."""
    from pyspark.sql import functions as F

    from airflow_lake.lake.upsert import deletes

    if not deletes.needs_check(base.files.values(), spec):
        return []
    marked = conformed.where(F.col(MARK)).select(*[F.col(f"`{k}`") for k in deletes.key_columns(spec)],
                                                 F.expr(version).alias(deletes.DELETE_VERSION))
    bounds = marked.agg(F.min(deletes.DELETE_VERSION).alias("low"), F.max(deletes.DELETE_VERSION).alias("high")
                        ).collect()[0]
    if bounds["low"] is None:
        return []
    return deletes.check_deletes(table, base, spec, marked, low=int(bounds["low"]), high=int(bounds["high"]),
                                 field="delete_column")


def _conform(df: DataFrame, spec: TableSpec, version_column: str | None, fixed: int | None,
             marker: str | None = None) -> tuple[list[str], DataFrame, str]:
    """The value columns the source sets, the source conformed to the table (key + those columns, plus the
    version as `__lake_version` when it comes from a column, and the delete flag as `__lake_delete` when the
    source has a `marker` column), and the version expression (Spark SQL text)."""
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
    extra = [n for low, n in names.items() if low not in table_names and n not in (version_source, marker)]
    if extra:
        raise LakeSchemaError(f"the source has column(s) {extra} that the table does not; nothing was written. Fix: "
                              f"{EVOLUTION_FIX}. The table's columns are {spec.column_names}.")
    present = [c for c in value_columns(spec) if c.lower() in names]
    columns = [spec.column(c) for c in spec.column_names if c in keys or c in present]
    source = df
    if version_source is not None:
        source = source.withColumn(VERSION_ALIAS, F.col(f"`{version_source}`").cast("bigint"))
        if version_source.lower() not in table_names:  # only a version, not data
            source = source.drop(version_source)
        columns.append(SpecColumn(VERSION_ALIAS, "bigint"))
    if marker is not None:
        source = source.withColumn(MARK, F.coalesce(F.col(f"`{marker}`"), F.lit(False))).drop(marker)
        columns.append(SpecColumn(MARK, "boolean"))
    conformed = conform(source, TableSpec(columns=tuple(columns)))
    return present, conformed, sql_text.whole(fixed) if fixed is not None else sql_text.ident(VERSION_ALIAS)


def resolve_clash(table: TableMetadata, base: TableState, versions: list[int], present: list[str], *,
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
