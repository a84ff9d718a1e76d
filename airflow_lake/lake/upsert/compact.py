"""`compact`: fold a primary-key table's delta files into base files, one `replace` commit.

For each chosen partition that has more files than buckets (a bucket's tombstone file and data file count as one:
below) or holds an upsert's delta file (other engines see base files only: `lake/publish`), all its files are merged
per key (`merge_read.merged` with the stamps kept) and written as one file per bucket, sorted by the key; the commit
removes exactly the files read. Upserts that commit meanwhile only add files, so they are kept (and merge on top of
the new base, whatever their version: the base keeps each column's version). Two compactions of one partition at once:
the second gets a retryable conflict.

Deletes: each key's base row keeps its delete watermark (`__lake_d`) and only what is newer; a key deleted
with nothing newer stays as a tombstone (key, partition, watermark), so a late upsert of a lower version stays
deleted (`physical.py`). Tombstones go into files of their own, one per bucket beside the bucket's file of rows
with data, in the same commit: so another engine reads a base file whole (`__lake_v` null count 0) or not at all
(only tombstones). Only a compaction whose input files hold deletes (their `__lake_d` stats) can make
tombstones: it keeps the merged rows (memory, then disk) and writes them twice, data then tombstones; any other
compaction writes once, as before. The next compaction counts a bucket's two files as one (one file split: a
file whose every `__lake_v` is NULL, written by no upsert or delete, beside a file of data of the same instant
and bucket), so it has nothing to do until as many deltas land as before, and then folds the tombstones back.
A partition with a base file of both NULL and other `__lake_v` (a compaction before the split: tombstones, or
data of no known version, beside data) is compacted again.

On a table with commutative columns (sum, max, min), a delete (or delete markers) committed meanwhile into a
partition being compacted is a retryable conflict: the fold was made without it, and a fold across a delete's
version cannot be split.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import TableRead
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import snapshot_of
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.plan_text import hashed_into
from airflow_lake.lake.spec.partitions import normalize_partitions
from airflow_lake.lake.spec.table_spec import stored_spec
from airflow_lake.lake.upsert.merge_read import merged, raw_scan
from airflow_lake.lake.upsert.physical import (
    NEWEST,
    SEQ,
    has_deletes,
    mixes_tombstones,
    only_tombstones,
    operator_of,
    physical_spec,
    value_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.format.table_state import TableState
    from airflow_lake.lake.spec.table_spec import TableSpec

log = logging.getLogger(__name__)
OPERATION = "compact_upserts"  # Hudi's merge-on-read compaction; "compact" before (format.operation_names)


@dataclass(frozen=True)
class Compacted:
    """A compaction's commit (None: nothing to compact), and whether an earlier run had made it."""

    entry: LogEntry | None
    already_committed: bool = False


def compact(table: TableMetadata, spark: SparkSession, *, partitions: Sequence[Mapping[str, Any]] | None = None,
            request_id: str | None = None, request_fingerprint: str | None = None) -> Compacted:
    """Compact the table's partitions (or the listed ones) that have more files than buckets or delta files; a committed
    `request_id` returns its commit (`request_fingerprint`: of the request's inputs, `commit.requests`)."""
    from pyspark.sql import functions as F

    base = table.state()  # the spec and files compaction reads: a spec change or replace since conflicts
    spec = stored_spec(base.spec)
    if (prior := committed_compaction(table, spec, request_id, request_fingerprint)) is not None:
        return prior
    chosen = normalize_partitions(spec, partitions) if partitions is not None else None
    if _inputs(base, spec.bucket.count if spec.bucket else 1, chosen) == []:
        log.info("compact %s: no partition has more files than buckets or upserts since its compaction; nothing to "
                 "do", table.url)
        return Compacted(None)
    txn = begin(table, "replace", OPERATION, request_id=request_id, base=base, request_fingerprint=request_fingerprint)
    try:
        inputs = _inputs(txn.base, spec.bucket.count if spec.bucket else 1, chosen)
        if not inputs:
            txn.abort()
            return Compacted(None)
        started = time.monotonic()
        physical = physical_spec(spec)
        scan = raw_scan(table, snapshot_of(txn.base), inputs)
        rows = merged(spark, scan, spec, keep_stamps=True).withColumn(SEQ, F.lit(0).cast("bigint"))
        rows = rows.select(*[f"`{c}`" for c in physical.column_names])
        metrics: dict[str, Any] = {}
        by_key = None if spec.bucket and spec.bucket.sort_columns else list(spec.primary_key)
        files = _write_base(rows, table, physical, txn.instant, metrics=metrics, sort_within=by_key,
                            tombstones=has_deletes(inputs))
        metrics.update({"files_before": len(inputs), "files_after": len(files), "keys": sum(f.rows for f in files),
                        "partitions": len({f.partition_key() for f in inputs}),
                        "compact_seconds": round(time.monotonic() - started, 3)})
        reads: list[TableRead] = []
        if any(not operator_of(spec, c).stamped for c in value_columns(spec)):
            reads.append(_DeletesRead(txn.base.seq, frozenset(), (), spec,
                                      frozenset(f.partition_key() for f in inputs)))
        entry = txn.commit(added=files, removed=[f.path for f in inputs], metrics=metrics, table_reads=reads)
        log.info("compacted %s: %d file(s) -> %d, %d keys", table.url, len(inputs), len(files), metrics["keys"])
        return Compacted(entry)
    except BaseException:
        txn.abort()
        raise


def committed_compaction(table: TableMetadata, spec: TableSpec, request_id: str | None,
                         request_fingerprint: str | None) -> Compacted | None:
    """The commit of `request_id` if it has committed (a retry: `compact` returns it and writes nothing), else None;
    metadata only. `spec`: the table's; one without a primary key is refused, as `compact` refuses it."""
    if not spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has no primary key: there are no upserts to compact.",
                            "Use clustering to merge the small files of a plain table.")
    prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
    return None if prior is None else Compacted(prior, True)


@dataclass(frozen=True)
class _DeletesRead(TableRead):
    """What a compaction of commutative columns depends on besides its inputs: that no delete row lands in its
    partitions meanwhile (see the module docstring)."""

    partitions: frozenset[tuple[tuple[str, str | None], ...]] = field(default_factory=frozenset)

    def may_see(self, data_file: DataFile) -> bool:
        return data_file.partition_key() in self.partitions and has_deletes([data_file])

    def describe(self) -> str:
        return f"snapshot {self.seq}, the deletes of the {len(self.partitions)} partition(s) it compacts"


def _write_base(rows: DataFrame, table: TableMetadata, physical: TableSpec, instant: str, *, metrics: dict[str, Any],
                sort_within: list[str] | None, tombstones: bool) -> list[DataFile]:
    """Write the merged `rows` as base files of `instant`: with `tombstones` (the inputs hold deletes), the rows
    with data and the tombstones (`__lake_v` NULL) into files of their own, from one computation of the merge;
    else in one write. Each file's `__lake_v` stats say which it is (`_by_construction`)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # Until the cached merge has run, Spark's planner (AQE) knows no partitioning of it and a write would add an
    # Exchange; the rows are one bucket per task as merged (a bucketed scan), and the cache keeps its partitions.
    shuffle = not tombstones or physical.bucket is None or not hashed_into(
        rows, list(physical.bucket.columns), physical.bucket.count)

    def write(df: DataFrame, into: dict[str, Any]) -> list[DataFile]:
        return write_dataframe(df, table.storage, physical, instant, metrics=into, sort_within=sort_within,
                               bucket_shuffle=shuffle)

    if not tombstones:  # no watermark: every key exists and has a version (UNKNOWN_NEWEST at worst)
        return _by_construction(write(rows, metrics), tombstones=False)
    cached = rows.persist(StorageLevel.MEMORY_AND_DISK)  # the merge (scan, window, aggregate) runs once
    try:
        data = _by_construction(write(cached.where(F.col(NEWEST).isNotNull()), metrics), tombstones=False)
        more: dict[str, Any] = {}
        kept = _by_construction(write(cached.where(F.col(NEWEST).isNull()), more), tombstones=True)
    finally:
        cached.unpersist()
    metrics["write_exchanges"] = metrics.get("write_exchanges", 0) + more.get("write_exchanges", 0)
    metrics.update({"tombstone_files": len(kept), "tombstones": sum(f.rows for f in kept)})
    return data + kept


def _by_construction(files: list[DataFile], *, tombstones: bool) -> list[DataFile]:
    """`files` with their `__lake_v` null count as the write made it: 0 in files of rows with data, every row in
    tombstone files. A footer without null counts (Parquet statistics turned off) reads as 0, which would make a
    tombstone file look like data to every reader of the stats (`only_tombstones`, another engine)."""
    out = []
    for data_file in files:
        stats = data_file.stats.get(NEWEST)
        if tombstones:
            fixed = ColumnStats(None, None, data_file.rows)
        elif stats is not None and stats.null_count:
            raise LakeError(f"compaction wrote {data_file.path} with {stats.null_count} row(s) of no version "
                            "beside rows with data; nothing was committed. Report this.")
        else:
            fixed = ColumnStats(None if stats is None else stats.min, None if stats is None else stats.max, 0)
        out.append(dataclasses.replace(data_file, stats={**data_file.stats, NEWEST: fixed}))
    return out


def _inputs(state: TableState, buckets: int, partitions: list[dict[str, str | None]] | str | None
            ) -> list[DataFile]:
    """The files of the partitions to compact (among `partitions`, if given): those with more files than buckets,
    those with a delta file (an upsert's or a versioned delete's: a partition only one upsert wrote has no more files
    than buckets, and other engines see a primary-key table's base files only, `lake/publish/visibility.py`), and
    those with a base file of both NULL and other `__lake_v` (a compaction before the split). A tombstone file
    is the other half of its bucket's base file (the compaction that wrote both split one file in two): counted
    once, so a partition counts what it counted before the split, and a compaction right after has nothing to do."""
    wanted = None if not isinstance(partitions, list) else {tuple(sorted(p.items())) for p in partitions}
    by_partition: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
    for data_file in state.files.values():
        key = data_file.partition_key()
        if wanted is None or key in wanted:
            by_partition.setdefault(key, []).append(data_file)
    # the entries that wrote deltas: every upsert and versioned delete records its versions in the index
    upserts = None if state.versions is None else set(state.versions.values())

    def base(data_file: DataFile) -> bool:  # (no index: every file is taken for a base; halves still pair up)
        return upserts is None or state.instants.get(data_file.instant, -1) not in upserts

    out = []
    for group in by_partition.values():
        halves = {(f.instant, f.bucket) for f in group if base(f) and not only_tombstones(f)}
        counted = [f for f in group if not (only_tombstones(f) and base(f) and (f.instant, f.bucket) in halves)]
        deltas = any(not base(f) for f in group)  # (upserts since the last compaction: other engines see none)
        if len(counted) > buckets or deltas or any(mixes_tombstones(f) and base(f) for f in group):
            out += group
    return out


def result_metrics(compacted: Compacted) -> dict[str, Any]:
    """A compaction's metrics for XCom."""
    entry = compacted.entry
    if entry is None:
        return {"noop": True, "already_committed": False}
    return requests.entry_result(entry, already_committed=compacted.already_committed)
