"""`delete`: remove the rows matching a predicate (`predicate.py`) from a plain, partitioned, bucketed or
clustered table, copy-on-write, as one `replace` commit.

1. Candidates: the live files whose stats may hold a matching row (`filters`: the stats skipping reads use), or,
   for a `where`, every live file — unless it names partition columns only, when it is evaluated once per
   partition and only the files of matching partitions are candidates.
2. Matches per candidate file. A few candidates (at most `ONE_PASS_MAX_FILES`, each alone in its partition and
   bucket: a key the stats narrow to its file) are rewritten straight away, in one pass: a file's matches are
   its rows in (the log) minus the rows its rewrite wrote, and the rewrite of a file with no match is deleted
   before the commit, never made live. Otherwise (a predicate the stats cannot narrow, a dry run) the matches are
   counted per file (`_metadata.file_path`) in one Spark job first, so that only files with a match are
   rewritten. Either way a file none of whose rows match is left alone; a file all of whose rows match is
   dropped (a predicate on partition columns only drops whole partitions without reading them).
3. Each other matching file is rewritten as ONE new file holding its other rows in their order in the file
   (`_metadata.row_index`): same partition, same bucket id under the same bucketing (so a bucketed read stays
   exact and clustered or bucket-sorted files keep their sort), fresh stats from the writer. Spark reads each of
   those files as its own task (`REWRITE_CONF`), and the writer keeps a task's rows in one file per partition
   and bucket.
4. One `replace` commit removes the matching files and adds the rewritten ones. It records what it read (a
   `TableRead` of the candidates and the predicate's filters): a concurrent commit that removed one of them, or
   added a file the read could have selected (an append of rows the predicate may match), makes it fail with a
   retryable conflict (WriteSerializable, `commit/conflicts.py`), so no matching row survives silently.

Rows for which the predicate is NULL are kept (SQL's DELETE). A delete that matches nothing commits nothing (a
one-pass delete deletes what it wrote and leaves no instant behind).
A retry with a committed `request_id` returns that commit; a crash before the commit leaves the table as it
was (its files are rolled back by the next writer, or are orphans that `remove_orphan_files` deletes). The
deleted rows stay in the removed files until `clean` deletes them, past the retention (`clean.retain.hours`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import TableRead
from airflow_lake.lake.commit.transaction import Transaction, begin
from airflow_lake.lake.delete.predicate import DeletePredicate, parse_predicate, vet_where
from airflow_lake.lake.delete.runtime_errors import evaluating
from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import Snapshot, snapshot_of
from airflow_lake.lake.spark.file_uris import table_path
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.spark.schema import spark_type
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.spec.bucketing import Bucketing
from airflow_lake.lake.spec.table_spec import BucketSpec, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.format.table_metadata import TableMetadata
    from airflow_lake.lake.format.table_state import TableState

log = logging.getLogger(__name__)
OPERATION = "delete"
FILE = "__lake_file"
ROW = "__lake_row"
_HUGE = str(1 << 40)
# Up to this many candidate files are rewritten without counting their matches first. The count is a Spark job
# of its own that cost about as much as rewriting one file (a point delete took 1.6-2.0x a plain
# read-filter-write with it); a rewrite of a candidate with no match is wasted, so only few may risk it.
ONE_PASS_MAX_FILES = 4
# One input file per Spark task: a file "costs" more to open than a task may hold, so no two share a task, and
# no file is split (it is smaller than a task may hold). Each task then writes its file's kept rows as one file.
REWRITE_CONF = {"spark.sql.files.openCostInBytes": _HUGE, "spark.sql.files.maxPartitionBytes": _HUGE,
                "spark.sql.files.maxRecordsPerFile": "0"}


@dataclass(frozen=True)
class DeletePlan:
    """What a delete would do on snapshot `seq`: the candidate files it reads and the matches per file."""

    seq: int
    predicate: DeletePredicate
    candidates: tuple[DataFile, ...]
    matches: Mapping[str, int]  # path -> matching rows, files with at least one match only
    read: TableRead

    @property
    def dropped(self) -> list[DataFile]:
        """Files all of whose rows match: removed, not rewritten."""
        return [f for f in self.candidates if self.matches.get(f.path, 0) >= f.rows > 0]

    @property
    def rewritten(self) -> list[DataFile]:
        """Files with some matching rows: rewritten with the others."""
        return [f for f in self.candidates if 0 < self.matches.get(f.path, 0) < f.rows]

    @property
    def rows_deleted(self) -> int:
        """Rows the delete removes."""
        return sum(self.matches.values())

    def metrics(self) -> dict[str, Any]:
        """The plan's side of the delete's metrics."""
        rewritten = self.rewritten
        return {"files_scanned": len(self.candidates), "bytes_scanned": sum(f.bytes for f in self.candidates),
                "files_rewritten": len(rewritten), "files_dropped": len(self.dropped),
                "rows_deleted": self.rows_deleted,
                "rows_kept": sum(f.rows - self.matches[f.path] for f in rewritten),
                "bytes_rewritten": sum(f.bytes for f in rewritten)}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (a dry run's output)."""
        return {"seq": self.seq, **self.predicate.describe(), **self.metrics(),
                "rewrite": [{"path": f.path, "rows": f.rows, "rows_deleted": self.matches[f.path]}
                            for f in self.rewritten],
                "drop": [{"path": f.path, "rows": f.rows} for f in self.dropped]}


@dataclass(frozen=True)
class DeleteResult:
    """A delete's outcome: its commit (None: nothing matched, or a dry run), the plan, and whether a first try of
    the same request had committed it."""

    entry: LogEntry | None
    plan: DeletePlan | None
    already_committed: bool = False

    def metrics(self) -> dict[str, Any]:
        """Metrics for the job's result (the commit's when there is one)."""
        if self.entry is not None:
            return dict(self.entry.metrics)
        return {"noop": True, "reason": "no row matches the predicate", **(self.plan.metrics() if self.plan else {})}


@dataclass(frozen=True)
class _PartitionRead(TableRead):
    """A read of the files of chosen partitions (a `where` on partition columns): a file added to another
    partition could not have been selected."""

    partitions: frozenset[tuple[tuple[str, str | None], ...]] = frozenset()

    def may_see(self, data_file: DataFile) -> bool:
        return data_file.partition_key() in self.partitions and super().may_see(data_file)

    def describe(self) -> str:
        return f"snapshot {self.seq}, {len(self.partitions)} partition(s) matching the predicate"


def check_deletable(table: TableMetadata, spec: TableSpec) -> None:
    """Refuse a table whose rows this delete cannot remove: a primary-key table."""
    if spec.primary_key:
        refuse_versioned(table, spec)


def refuse_versioned(table: TableMetadata, spec: TableSpec) -> NoReturn:
    """A primary-key table deletes keys at a version (`upsert.deletes`), never rows by a predicate."""
    raise LakeSpecError("table", f"{table.url!r} has a primary key ({', '.join(spec.primary_key)}): its rows are "
                        "merged from versioned upserts, so a delete must say which keys and at which version, or a "
                        "late upsert of an older version would bring them back. Nothing was deleted.",
                        "Give `keys` and `version` instead of `filters` / `where` (operator keys=..., version=...; "
                        "LakeTable.delete_keys; CLI --keys/--version).")


def delete(table: TableMetadata, spark: SparkSession, *, filters: Iterable[Sequence[Any]] | None = None,
           where: str | None = None, request_id: str | None = None, request_fingerprint: str | None = None,
           dry_run: bool = False) -> DeleteResult:
    """Delete the rows matching `filters` or `where` (exactly one) as one `replace` commit (module docstring).

    Every input check runs before anything is written. `dry_run` plans and counts, and writes nothing.
    """
    prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
    if prior is not None:
        return DeleteResult(prior, None, already_committed=True)
    base = table.state()  # what the delete reads: the commit is checked against every entry since
    snap = snapshot_of(base)
    check_deletable(table, snap.spec)
    predicate = parse_predicate(filters, where, snap.spec)
    if predicate.where is not None:
        predicate = dataclasses.replace(predicate, columns=vet_where(spark, predicate.where, snap.spec))
    with evaluating(predicate.where):  # a `where` that fails on a row: a clear error, nothing committed
        return _delete(table, spark, snap, predicate, base, request_id=request_id,
                       request_fingerprint=request_fingerprint, dry_run=dry_run)


def _delete(table: TableMetadata, spark: SparkSession, snap: Snapshot, predicate: DeletePredicate,
            base: TableState, *, request_id: str | None, request_fingerprint: str | None,
            dry_run: bool) -> DeleteResult:
    """Steps 1 to 3 of the module docstring for a checked predicate."""
    started = time.monotonic()
    candidates, partitions, known = _candidates(spark, snap, predicate)
    if known is None and not dry_run and one_pass_fits(candidates):
        return _delete_in_one_pass(table, spark, snap, predicate, candidates, started=started, base=base,
                                   request_id=request_id, request_fingerprint=request_fingerprint)
    matches = known if known is not None else _count_matches(table, spark, snap, predicate, candidates)
    plan = _plan(snap, predicate, candidates, matches, partitions)
    if dry_run or not plan.matches:
        log.info("delete on %s: %d candidate file(s), %d rows match%s", table.url, len(plan.candidates),
                 plan.rows_deleted, " (dry run)" if dry_run else "; nothing to commit")
        return DeleteResult(None, plan)
    txn = begin(table, "replace", OPERATION, request_id=request_id, base=base,
                request_fingerprint=request_fingerprint)
    try:
        entry = _commit(txn, plan, predicate, rewrite_files(table, spark, snap, plan, txn.instant),
                        count_pass=True, started=started)
    except BaseException:
        txn.abort()
        raise
    return DeleteResult(entry, plan)


def plan_delete(table: TableMetadata, spark: SparkSession, snap: Snapshot, predicate: DeletePredicate) -> DeletePlan:
    """The candidate files and the matching rows per file, counted (steps 1 and 2 of the module docstring)."""
    with evaluating(predicate.where):
        candidates, partitions, known = _candidates(spark, snap, predicate)
        matches = known if known is not None else _count_matches(table, spark, snap, predicate, candidates)
    return _plan(snap, predicate, candidates, matches, partitions)


Partitions = frozenset[tuple[tuple[str, str | None], ...]]


def _candidates(spark: SparkSession, snap: Snapshot, predicate: DeletePredicate
                ) -> tuple[tuple[DataFile, ...], Partitions | None, dict[str, int] | None]:
    """The files the delete reads, the partitions a `where` on partition columns chose (None: not such a
    `where`), and the matches per file when they are known without reading a row (None: they are not)."""
    spec = snap.spec
    if predicate.where is not None and predicate.columns is not None and \
            predicate.columns <= set(spec.partition_columns):
        partitions = _matching_partitions(spark, predicate.where, spec, snap.files)
        candidates = tuple(f for f in snap.files if f.partition_key() in partitions)
        return candidates, partitions, {f.path: f.rows for f in candidates}  # one value per partition
    candidates = tuple(f for f in snap.files if predicate.may_match(f, spec))
    if predicate.partition_only(spec) or not candidates:  # stats of partition values are exact: all rows match
        return candidates, None, {f.path: f.rows for f in candidates}
    return candidates, None, None


def _plan(snap: Snapshot, predicate: DeletePredicate, candidates: tuple[DataFile, ...], matches: Mapping[str, int],
          partitions: Partitions | None) -> DeletePlan:
    read_args: dict[str, Any] = {"seq": snap.seq, "files": frozenset(f.path for f in candidates),
                                 "filters": predicate.filters, "spec": snap.spec}
    read = TableRead(**read_args) if partitions is None else _PartitionRead(**read_args, partitions=partitions)
    return DeletePlan(snap.seq, predicate, candidates, {p: n for p, n in matches.items() if n > 0}, read)


def one_pass_fits(candidates: Sequence[DataFile]) -> bool:
    """True if the candidates are rewritten without counting first: few, and each alone in its partition and
    bucket, so that every file the rewrite writes is known to come from one of them."""
    places = {_place(f) for f in candidates}
    return 0 < len(candidates) <= ONE_PASS_MAX_FILES and len(places) == len(candidates)


def _place(data_file: DataFile) -> tuple[tuple[tuple[str, str | None], ...], int | None]:
    return data_file.partition_key(), data_file.bucket


def _delete_in_one_pass(table: TableMetadata, spark: SparkSession, snap: Snapshot, predicate: DeletePredicate,
                        candidates: tuple[DataFile, ...], *, started: float, base: TableState,
                        request_id: str | None, request_fingerprint: str | None) -> DeleteResult:
    """Rewrite every candidate without its matching rows, learn the matches from the rows written, keep the
    rewrites of the files with a match and delete the others before committing (step 2)."""
    txn = begin(table, "replace", OPERATION, request_id=request_id, base=base,
                request_fingerprint=request_fingerprint)
    try:
        written = _rewrite(table, spark, snap, candidates, predicate=predicate, instant=txn.instant)
        out_rows: dict[tuple[Any, ...], int] = {}
        for data_file in written:
            out_rows[_place(data_file)] = out_rows.get(_place(data_file), 0) + data_file.rows
        matches = {f.path: f.rows - out_rows.get(_place(f), 0) for f in candidates}
        if any(n < 0 for n in matches.values()):
            raise LakeError("the delete wrote more rows than the files it rewrote hold; nothing was committed. This "
                            "is a bug: please report it with the table's timeline.")
        plan = _plan(snap, predicate, candidates, matches, None)
        if not plan.matches:
            txn.discard()  # nothing to commit: no entry, no files, no pending instant
            log.info("delete on %s: %d candidate file(s), no row matches; nothing to commit", table.url,
                     len(candidates))
            return DeleteResult(None, plan)
        unmatched = {_place(f) for f in candidates if f.path not in plan.matches}
        for data_file in written:
            if _place(data_file) in unmatched:  # the rewrite of a file with no match: never made live
                table.storage.delete(data_file.path)
        entry = _commit(txn, plan, predicate, [f for f in written if _place(f) not in unmatched],
                        count_pass=False, started=started)
    except BaseException:
        txn.abort()
        raise
    return DeleteResult(entry, plan)


def _commit(txn: Transaction, plan: DeletePlan, predicate: DeletePredicate, added: list[DataFile], *,
            count_pass: bool, started: float) -> LogEntry:
    """The delete's replace commit: the rewrites in, the rewritten and dropped files out, checked against what
    the delete read."""
    removed = [*plan.rewritten, *plan.dropped]
    metrics = {**plan.metrics(), "count_pass": count_pass, "delete_seconds": round(time.monotonic() - started, 3)}
    return txn.commit(added=added, removed=[f.path for f in removed], table_reads=[plan.read], metrics=metrics,
                      metadata={"predicate": predicate.describe()})


def _count_matches(table: TableMetadata, spark: SparkSession, snap: Snapshot, predicate: DeletePredicate,
                   candidates: Sequence[DataFile]) -> dict[str, int]:
    from pyspark.sql import functions as F

    if not candidates:
        return {}
    df = Scan(table.storage, snap, (), tuple(candidates)).to_df(spark)
    counted = df.where(predicate.column()).groupBy(F.col("_metadata.file_path").alias(FILE)).count().collect()
    paths = {f.path for f in candidates}
    out: dict[str, int] = {}
    for row in counted:
        # Spark reports a file as a URL (`file_uris`); names repeat across the partition directories of one write
        path = table_path(table.storage, str(row[FILE]))
        if path not in paths:
            raise LakeError(f"Spark read {row[FILE]!r}, which is not among the files the delete selected; nothing "
                            "was deleted. The table's files changed under it or the path is not understood.")
        out[path] = int(row["count"])
    return out


def _partition_frame(spark: SparkSession, spec: TableSpec, rows: list[tuple[Any, ...]]) -> DataFrame:
    """The partition values `rows` (as their canonical text, with an index first) typed as the table's columns."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    columns = list(spec.partition_columns)
    schema = T.StructType([T.StructField(FILE, T.LongType()),
                           *[T.StructField(c, T.StringType(), True) for c in columns]])
    return spark.createDataFrame(rows, schema).select(
        F.col(FILE), *[F.col(f"`{c}`").cast(spark_type(spec.column(c).type)).alias(c) for c in columns])


def _matching_partitions(spark: SparkSession, where: str, spec: TableSpec, files: Sequence[DataFile]
                         ) -> frozenset[tuple[tuple[str, str | None], ...]]:
    from pyspark.sql import functions as F

    keys = sorted({f.partition_key() for f in files}, key=repr)
    if not keys:
        return frozenset()
    rows = [(i, *[dict(key).get(c) for c in spec.partition_columns]) for i, key in enumerate(keys)]
    hits = _partition_frame(spark, spec, rows).where(F.expr(where)).select(FILE).collect()
    return frozenset(keys[int(r[FILE])] for r in hits)


def rewrite_files(table: TableMetadata, spark: SparkSession, snap: Snapshot, plan: DeletePlan,
                  instant: str) -> list[DataFile]:
    """Write each file of `plan.rewritten` again without its matching rows, as files of `instant` (step 3)."""
    files = plan.rewritten
    written = _rewrite(table, spark, snap, files, predicate=plan.predicate, instant=instant)
    _check_rewrite(files, written, plan)
    return written


def _rewrite(table: TableMetadata, spark: SparkSession, snap: Snapshot, files: Sequence[DataFile], *,
             predicate: DeletePredicate, instant: str) -> list[DataFile]:
    """Write each of `files` again without the rows `predicate` matches, each as one file in its place."""
    from pyspark.sql import functions as F

    spec = snap.spec
    groups: dict[Bucketing | None, list[DataFile]] = {}
    for data_file in files:
        groups.setdefault(file_bucketing(data_file, spec), []).append(data_file)
    keep = ~F.coalesce(predicate.column(), F.lit(False))  # a NULL predicate keeps the row
    added: list[DataFile] = []
    with session_conf(spark, REWRITE_CONF):
        for bucketing, group in groups.items():
            target = _spec_for(spec, bucketing)
            # A task reads its one file in order, and a write without partitions or buckets keeps a task's rows
            # in order: only a write that sorts (by partition, by bucket) needs the row index to sort by.
            sorts = bool(spec.partition_columns) or target.bucket is not None
            df = Scan(table.storage, snap, (), tuple(group)).to_df(spark)
            if sorts:
                df = df.withColumn(ROW, F.col("_metadata.row_index"))
            partitions = [dict(p) for p in {f.partition_key(): f.partition for f in group}.values()] \
                if spec.partition_columns else None
            written = write_dataframe(df.where(keep), table.storage, target, instant, allowed_partitions=partitions,
                                      sort_within=[ROW] if sorts else None, drop_columns=[ROW] if sorts else (),
                                      bucket_shuffle=False)
            _check_places(group, written)
            added += written
    return added


def _spec_for(spec: TableSpec, bucketing: Bucketing | None) -> TableSpec:
    """The spec to write files of `bucketing` with: that bucketing alone (its count everywhere), or plain."""
    if bucketing is None:
        return dataclasses.replace(spec, bucket=None)
    sort_columns = spec.bucket.sort_columns if spec.bucket is not None else ()
    return dataclasses.replace(spec, bucket=BucketSpec(bucketing.columns, bucketing.count, sort_columns,
                                                       bucketing.hash))


def _check_rewrite(files: Sequence[DataFile], written: Sequence[DataFile], plan: DeletePlan) -> None:
    """Rows in = rows kept out."""
    kept = sum(f.rows - plan.matches[f.path] for f in files)
    if sum(f.rows for f in written) != kept:
        raise LakeError(f"the delete counted {kept} rows to keep in {len(files)} file(s) but wrote "
                        f"{sum(f.rows for f in written)}; nothing was committed. Is the predicate deterministic? "
                        "If so, this is a bug: please report it with the table's timeline.")
    if len(written) != sum(1 for f in files if f.rows > plan.matches[f.path]):
        log.warning("delete: %d file(s) rewritten as %d (a session setting such as spark.sql.files.maxPartitionNum "
                    "made Spark read several files in one task); rows are right, file order may not be kept",
                    len(files), len(written))


def _check_places(files: Sequence[DataFile], written: Sequence[DataFile]) -> None:
    """Every new file in a partition and bucket one of the rewritten files had."""
    places = {_place(f) for f in files}
    stray = [f.path for f in written if _place(f) not in places]
    if stray:
        raise LakeError(f"the delete wrote {stray[0]!r} outside the partitions and buckets it rewrote; nothing was "
                        "committed. This is a bug: please report it with the table's timeline.")


__all__ = ["ONE_PASS_MAX_FILES", "OPERATION", "DeletePlan", "DeleteResult", "check_deletable", "delete",
           "one_pass_fits", "plan_delete", "refuse_versioned", "rewrite_files"]
