"""`compact`: fold a primary-key table's delta files into base files, one `replace` commit.

For each chosen partition that has more files than buckets, all its files are merged per key
(`merge_read.merged` with the stamps kept) and written as one file per bucket, sorted by the key; the
commit removes exactly the files read. Upserts that commit meanwhile only add files, so they are kept
(and merge on top of the new base, whatever their version: the base keeps each column's version). Two
compactions of one partition at once: the second gets a retryable conflict.

Deletes: each key's base row keeps its delete watermark (`__lake_d`) and only what is newer; a key deleted
with nothing newer stays as a tombstone (key, partition, watermark), so a late upsert of a lower version stays
deleted (`physical.py`). On a table with commutative columns (sum, max, min), a delete (or delete markers)
committed meanwhile into a partition being compacted is a retryable conflict: the fold was made without it,
and a fold across a delete's version cannot be split.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import TableRead
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import snapshot_of
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spec.partitions import normalize_partitions
from airflow_lake.lake.spec.table_spec import stored_spec
from airflow_lake.lake.upsert.merge_read import merged, raw_scan
from airflow_lake.lake.upsert.physical import SEQ, has_deletes, operator_of, physical_spec, value_columns

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
OPERATION = "compact_upserts"  # Hudi's merge-on-read compaction; "compact" before (format.operation_names)


@dataclass(frozen=True)
class Compacted:
    """A compaction's commit (None: nothing to compact), and whether an earlier run had made it."""

    entry: LogEntry | None
    already_committed: bool = False


def compact(table: TableMetadata, spark: SparkSession, *, partitions: Sequence[Mapping[str, Any]] | None = None,
            request_id: str | None = None, request_fingerprint: str | None = None) -> Compacted:
    """Compact the table's partitions (or the listed ones) that have more files than buckets; a committed
    `request_id` returns its commit (`request_fingerprint`: of the request's inputs, `commit.requests`)."""
    from pyspark.sql import functions as F

    base = table.state()  # the spec and files compaction reads: a spec change or replace since conflicts
    spec = stored_spec(base.spec)
    if not spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has no primary key: there are no upserts to compact.",
                            "Use clustering to merge the small files of a plain table.")
    prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
    if prior is not None:
        return Compacted(prior, True)
    chosen = normalize_partitions(spec, partitions) if partitions is not None else None
    if _inputs(base.files.values(), spec.bucket.count if spec.bucket else 1, chosen) == []:
        log.info("compact %s: no partition has more files than buckets; nothing to do", table.url)
        return Compacted(None)
    txn = begin(table, "replace", OPERATION, request_id=request_id, base=base, request_fingerprint=request_fingerprint)
    try:
        inputs = _inputs(txn.base.files.values(), spec.bucket.count if spec.bucket else 1, chosen)
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
        files = write_dataframe(rows, table.storage, physical, txn.instant, metrics=metrics, sort_within=by_key)
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


@dataclass(frozen=True)
class _DeletesRead(TableRead):
    """What a compaction of commutative columns depends on besides its inputs: that no delete row lands in its
    partitions meanwhile (see the module docstring)."""

    partitions: frozenset[tuple[tuple[str, str | None], ...]] = field(default_factory=frozenset)

    def may_see(self, data_file: DataFile) -> bool:
        return data_file.partition_key() in self.partitions and has_deletes([data_file])

    def describe(self) -> str:
        return f"snapshot {self.seq}, the deletes of the {len(self.partitions)} partition(s) it compacts"


def _inputs(files: Any, buckets: int, partitions: list[dict[str, str | None]] | str | None) -> list[DataFile]:
    """The files of the partitions to compact: those (among `partitions`, if given) with more files than
    buckets."""
    wanted = None if not isinstance(partitions, list) else {tuple(sorted(p.items())) for p in partitions}
    by_partition: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
    for data_file in files:
        key = data_file.partition_key()
        if wanted is None or key in wanted:
            by_partition.setdefault(key, []).append(data_file)
    return [f for group in by_partition.values() if len(group) > buckets for f in group]


def result_metrics(compacted: Compacted) -> dict[str, Any]:
    """A compaction's metrics for XCom."""
    entry = compacted.entry
    if entry is None:
        return {"noop": True, "already_committed": False}
    return requests.entry_result(entry, already_committed=compacted.already_committed)
