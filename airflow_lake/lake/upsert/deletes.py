"""Versioned deletes on a primary-key table: the `delete` operation with `keys` and `version`, and the checks
delete markers in an upsert source go through too. The rules are in `physical.py`.

A versioned delete writes one delta row per key — the key (and its partition), `__lake_d` = the version, every
value and stamp NULL — in the key's bucket as an upsert does, and commits it as an `upsert` instant of
operation `delete` that registers the version in the version index (`versions.py`): a retry of the same keys
at the same version is a no-op; the same version with other keys, or a version an upsert applied, is refused.
A key that is not in the table is deleted all the same: a backfill of an older version that arrives later
must stay deleted. A key of a partitioned table is unique within its partition, so a delete names the
partition values too.

Before anything is written (`check_deletes`), the keys' rows are checked for what a delete cannot remove
exactly: a base row whose commutative values (sum, max, min) fold versions on both sides of the delete, and
rows written before versioned deletes whose versions leave it open (`physical.with_row_stamps`). Such a delete
is refused, naming the key, the column and the range; and the delete records the files it checked (`reads`),
so a compaction that folds them meanwhile makes it fail with a retryable conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import snapshot_of
from airflow_lake.lake.format.table_state import UPSERT_ACTION, upsert_versions
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.schema import conform
from airflow_lake.lake.spec import sql_text
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lake.upsert import versions as versions_module
from airflow_lake.lake.upsert.merge_read import raw_scan
from airflow_lake.lake.upsert.physical import (
    DELETED,
    NEWEST,
    OLDEST,
    UNKNOWN_NEWEST,
    UNKNOWN_OLDEST,
    delta_rows,
    folded_range,
    has_deletes,
    operator_of,
    physical_spec,
    value_columns,
    with_row_stamps,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from airflow_lake.lake.format.data_files import DataFile
    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.format.table_state import TableState

log = logging.getLogger(__name__)
OPERATION = "delete"
MARK = "__lake_delete"  # the delete flag in fingerprints (a delete never looks like a key-only upsert)
DELETE_VERSION = "__lake_delete_version"
CURRENT = "__lake_current_watermark"
EXAMPLES = 5


@dataclass(frozen=True)
class Deleted:
    """A versioned delete's commit (None: no key given), and whether an earlier run had made it."""

    entry: LogEntry | None
    already_committed: bool = False

    def metrics(self) -> dict[str, Any]:
        """The job's result."""
        if self.entry is None:
            return {"noop": True, "reason": "no key to delete", "keys_deleted": 0, "already_committed": False}
        return requests.entry_result(self.entry, already_committed=self.already_committed)


def key_columns(spec: TableSpec) -> list[str]:
    """The columns that name a key: the primary key, then the partition columns it lacks."""
    return [*spec.primary_key, *[c for c in spec.partition_columns if c not in spec.primary_key]]


def conform_keys(df: DataFrame, spec: TableSpec, field: str = "keys") -> DataFrame:
    """The keys of `df` (exactly the key and partition columns, converted to the table's types)."""
    keys = key_columns(spec)
    names = {f.name.lower(): f.name for f in df.schema.fields}
    missing = [k for k in keys if k.lower() not in names]
    partitioned = " (a key is unique within a partition: name its partition values too)" \
        if spec.partition_columns else ""
    if missing:
        raise LakeSpecError(field, f"the keys lack column(s) {missing}{partitioned}; nothing was deleted.",
                            f"Give every one of {keys} for each key.")
    extra = [n for low, n in names.items() if low not in {k.lower() for k in keys}]
    if extra:
        raise LakeSpecError(field, f"the keys have column(s) {extra} that are not key columns; nothing was deleted.",
                            f"Select only {keys} (a versioned delete removes whole keys).")
    return conform(df, TableSpec(columns=tuple(spec.column(k) for k in keys)))


def versioned_delete(table: TableMetadata, spark: SparkSession, keys: DataFrame, *, version: Any,
                     request_id: str | None = None, request_fingerprint: str | None = None,
                     filters: Sequence[Sequence[Any]] | None = None,
                     request_reads: Mapping[str, Any] | None = None) -> Deleted:
    """Delete `keys` (a DataFrame of the key and partition columns) at `version` (module docstring).
    `filters`: key filters that hold for every key (they narrow the files `check_deletes` reads);
    `request_reads`: what a query of keys read of other lake tables, recorded with the request (`commit.requests`:
    the same request id over other snapshots is refused, never answered with the first result)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    base = table.state()
    spec = stored_spec(base.spec)
    if not spec.primary_key:
        raise LakeSpecError("keys", f"{table.url!r} has no primary key; `keys` and `version` are for versioned "
                            "deletes of primary-key tables.", "Delete its rows with `filters` or `where`.")
    request = requests.Request(OPERATION, request_id, request_fingerprint, request_reads)
    prior = requests.committed(table, request)
    if prior is not None:
        return Deleted(prior, True)
    fixed = versions_module.parse_version(version)
    wanted = conform_keys(keys, spec)
    names = key_columns(spec)
    wanted = wanted.dropDuplicates(names)  # (a NULL key column is refused by the writer: keys are NOT NULL)
    reads = check_deletes(table, base, spec, wanted.withColumn(DELETE_VERSION, F.lit(fixed).cast("bigint")),
                          low=fixed, high=fixed, filters=filters, field="version")
    txn = begin(table, UPSERT_ACTION, OPERATION, request_id=request_id, base=base,
                request_fingerprint=request_fingerprint,
                metadata={"columns": [], "deletes": True, **request.metadata()})
    try:
        observation = Observation(f"delete_{txn.instant}")
        version_expr = sql_text.whole(fixed)
        flagged = wanted.withColumn(MARK, F.lit(True))
        observed = flagged.observe(observation, *versions_module.fingerprint_aggregates([*names, MARK], version_expr))
        metrics: dict[str, Any] = {}
        files = write_dataframe(delta_rows(observed, spec, [], version_expr, deleted="true"), table.storage,
                                physical_spec(spec), txn.instant, metrics=metrics)
        facts = observation.get
        count = int(facts["rows"])
        if count == 0:
            txn.abort(reason="no key to delete")
            return Deleted(None)
        fingerprint = versions_module.fingerprint(facts)
        live = versions_module.applied(table, [fixed], txn.base)
        if fixed in live:
            earlier = live[fixed]
            if earlier.fingerprint == fingerprint and earlier.entry.operation == OPERATION:
                txn.abort(reason=f"a duplicate of instant {earlier.entry.instant} (the same keys at version {fixed})")
                return Deleted(earlier.entry, True)
            raise LakeSpecError("version", f"version {fixed} was already applied by instant "
                                f"{earlier.entry.instant} ({earlier.entry.operation}) with other keys or data; "
                                "nothing was deleted.", "Delete at a new version (higher than every version the "
                                "keys were upserted with, to remove all of them).")
        metrics.update({"keys_deleted": count, "version": fixed, "versions": [fixed]})
        entry = txn.commit(added=files, reads=reads, metrics=metrics, versions=[fixed],
                           metadata={"versions": [fixed], "fingerprint": fingerprint, "columns": [],
                                     "deletes": count})
        log.info("deleted %d key(s) of %s at version %d", count, table.url, fixed)
        return Deleted(entry)
    except BaseException:
        txn.abort()
        raise


def _stats(data_file: DataFile, column: str) -> tuple[Any, Any] | None:
    stats = data_file.stats.get(column)
    return None if stats is None else (stats.min, stats.max)


def may_hold_unknown(data_file: DataFile) -> bool:
    """Whether the file may hold rows of unknown version (written before versioned deletes, or folded from
    such rows by compaction)."""
    oldest = _stats(data_file, OLDEST)
    return oldest is None or oldest[0] == UNKNOWN_OLDEST


def may_fold_across(data_file: DataFile, low: int, high: int) -> bool:
    """Whether the file may hold data of a version <= `high` (a compaction may fold it with newer data)."""
    oldest = _stats(data_file, OLDEST)
    return oldest is None or (oldest[0] is not None and oldest[0] <= high)


def may_straddle(data_file: DataFile, low: int, high: int) -> bool:
    """Whether the file may hold a row folded over [v0, v] with v0 <= d < v for a delete version d in
    [low, high]."""
    oldest, newest = _stats(data_file, OLDEST), _stats(data_file, NEWEST)
    if oldest is None or newest is None:
        return True
    return oldest[0] is not None and newest[1] is not None and oldest[0] <= high and newest[1] > low \
        and oldest[0] < newest[1]


def needs_check(files: Iterable[DataFile], spec: TableSpec) -> bool:
    """Whether deletes on a table with these files may need `check_deletes` at all: it has commutative columns,
    or a file may hold rows of unknown version."""
    return any(not operator_of(spec, c).stamped for c in value_columns(spec)) or any(
        may_hold_unknown(f) for f in files)


def check_deletes(table: TableMetadata, state: TableState, spec: TableSpec, deletes: DataFrame, *, low: int,
                  high: int, filters: Iterable[Sequence[Any]] | None = None, field: str = "version") -> list[str]:
    """Refuse deletes (`deletes`: key columns and `DELETE_VERSION`, versions in [low, high]) that cannot be
    exact (module docstring) in the table as of `state`, before anything is written; return the files the
    check depends on (a commit's `reads`: a compaction that replaces them meanwhile is a conflict)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from airflow_lake.lake.spark.bucketed_read import scan_df

    snapshot = snapshot_of(state)
    unstamped = [c for c in value_columns(spec) if not operator_of(spec, c).stamped]
    scope = raw_scan(table, snapshot, filters=filters).files
    suspects = [f for f in scope if may_hold_unknown(f) or (unstamped and may_straddle(f, low, high))]
    depends = [f.path for f in scope if unstamped and may_fold_across(f, low, high)]
    if not suspects:
        return depends
    upper = highest_version(table, state) if any(may_hold_unknown(f) for f in suspects) else None
    names = key_columns(spec)
    # with the files holding deletes: a row a key's earlier delete already removed does not matter any more
    chosen = {f.path for f in suspects} | {f.path for f in scope if has_deletes([f])}
    rows = with_row_stamps(scan_df(deletes.sparkSession, raw_scan(
        table, snapshot, files=[f for f in scope if f.path in chosen])), spec)
    current = F.max(F.col(DELETED)).over(Window.partitionBy(*[F.col(f"`{k}`") for k in names]))
    rows = rows.withColumn(CURRENT, current)
    wanted = deletes.select(*[F.col(f"`{k}`").alias(f"__lake_delete_{i}") for i, k in enumerate(names)],
                            F.col(DELETE_VERSION))
    on = [F.col(f"`{k}`").eqNullSafe(F.col(f"__lake_delete_{i}")) for i, k in enumerate(names)]  # NULL partitions
    joined = rows.join(wanted, on=on, how="inner")
    version, newest, earlier = F.col(DELETE_VERSION), F.col(NEWEST), F.col(CURRENT)
    # a row of unknown version whose data an earlier delete left: a delete between its bounds cannot tell
    holds_data = earlier.isNull() | (newest > earlier)
    unsure = F.lit(False) if upper is None else (F.col(OLDEST) == UNKNOWN_OLDEST) & F.coalesce(
        holds_data, F.lit(False)) & (newest.isNull() | (version >= newest)) & (version < F.lit(upper))
    split: list[Column] = []
    for column in unstamped:
        first, last = folded_range(column)
        alive = earlier.isNull() | (first > earlier)
        split.append(F.when(F.col(f"`{column}`").isNotNull() & alive & (first <= version) & (last > version),
                            F.lit(column)))
    splitting = F.concat_ws(", ", *split, F.lit(None).cast("string"))
    problems = joined.where(unsure | (splitting != ""))
    examples = problems.select(*[F.col(f"`{k}`") for k in names], version.alias("d"), newest.alias("v"),
                               unsure.alias("unsure"), splitting.alias("columns"),
                               *[F.struct(*folded_range(c)).alias(f"range_{i}") for i, c in enumerate(unstamped)]
                               ).limit(EXAMPLES).collect()
    if not examples:
        return depends
    described = []
    for row in examples:
        key = ", ".join(f"{k}={row[k]!r}" for k in names)
        if row["unsure"]:
            lower = "unknown" if row["v"] in (None, UNKNOWN_NEWEST) else f"at least {row['v']}"
            described.append(f"key ({key}) has rows written before versioned deletes: their newest version is "
                             f"{lower} and below {upper} (the highest version the table applied), so a delete "
                             f"at {row['d']} cannot tell what it removes")
            continue
        for i, column in enumerate(unstamped):
            if column not in row["columns"].split(", "):
                continue
            first, last = row[f"range_{i}"]
            folded = f"versions up to {last} written before versioned deletes" if first == UNKNOWN_OLDEST \
                else f"versions {first}..{last}"
            described.append(f"key ({key}): column {column} folds {folded} (compacted), and a delete at "
                             f"{row['d']} would have to remove only part of them")
    raise LakeSpecError(field, "a delete cannot be applied exactly; nothing was committed: " + "; ".join(described)
                        + ".", "Delete at a version above the highest version the key holds (it then removes all "
                        "of it), or below the lowest"
                        + ("" if upper is None else f"; for a key with rows written before versioned deletes, at "
                           f"{upper} or above (the highest version the table applied) removes all of it") + ".")


def highest_version(table: TableMetadata, state: TableState) -> int | None:
    """The highest version an upsert or delete of the table applied (as of `state`): an upper bound of the
    versions in rows written before versioned deletes."""
    index = state.versions
    if index is not None:
        return max(index, default=None)
    found = [v for entry in table.commit_log.entries(-1, state.seq) for v in upsert_versions(entry)]
    return max(found, default=None)
