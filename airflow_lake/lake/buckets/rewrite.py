"""`bucket_rewrite`: rewrite chosen partitions of a table into a bucket spec, as one `replace` commit.

The chosen partitions' live files are read, written again through the writer (one sorted file per
non-empty bucket and partition, each partition with its own count) and swapped in one commit that also
stores the new bucket spec. The commit overwrites those partitions: a writer that added files to them
meanwhile makes it fail with a retryable conflict (and a spec change makes concurrent writers retry), so
no row is lost or doubled. Partitions not chosen keep their files and their bucketing.

Choosing partitions (`PartitionSelection`): a list (each must exist), a range `{"from": p, "to": q}`
(inclusive, by typed values; `from` after `to` is refused), `{"from": p}` (p and later), or all. Turning
buckets on for a plain table with `{"from": p}` also sets the spec's `from_partition` to p, so earlier
partitions stay plain for later writes too (LAS: "compatible with historical non-bucket partitions").
A selection that matches no partition commits a new spec only if the spec leaves every existing
partition as its files are (`_check_spec_fits_files`): p past the last partition is fine, and buckets
start with p's first write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.data_files import DataFile, file_bucketing
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import snapshot_of
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.spec.bucketing import Bucketing, check_multiples
from airflow_lake.lake.spec.partitions import normalize_partition, partition_order_key
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
OPERATION = "bucket_rewrite"
Partition = dict[str, str | None]


@dataclass(frozen=True)
class PartitionSelection:
    """Which partitions to rewrite: `listed`, or the range `start`..`end` (either open), or all."""

    listed: tuple[Partition, ...] = ()
    start: Partition | None = None
    end: Partition | None = None

    @classmethod
    def parse(cls, raw: Any, spec: TableSpec, field: str = "partitions") -> PartitionSelection:
        """From JSON: None or "all", a list of partitions, or {"from": {...}, "to": {...}} (either optional)."""
        if raw is None or raw == "all":
            return cls()
        if not spec.partition_columns:
            raise LakeSpecError(field, "the table is not partitioned.", "Drop `partitions` to rewrite the table.")
        if isinstance(raw, Mapping):
            unknown = sorted(set(raw) - {"from", "to"})
            if unknown or not raw:
                raise LakeSpecError(field, f"unknown key {unknown[0]!r}." if unknown else "the range is empty.",
                                    "Give {'from': {...}} and/or {'to': {...}}, or a list of partitions.")
            start = normalize_partition(spec, raw["from"], f"{field}.from") if "from" in raw else None
            end = normalize_partition(spec, raw["to"], f"{field}.to") if "to" in raw else None
            for where, part in ((f"{field}.from", start), (f"{field}.to", end)):
                if part is not None and partition_order_key(spec, part) is None:
                    raise LakeSpecError(where, "a range bound cannot hold a null value.", "Give a value.")
            if start is not None and end is not None and \
                    _order_key(spec, start) > _order_key(spec, end):
                raise LakeSpecError(field, f"the range is reversed: `from` {start} is after `to` {end} (by the "
                                    "partitions' typed values), so it holds no partition.",
                                    f"Swap them: {{'from': {end}, 'to': {start}}}.")
            return cls(start=start, end=end)
        if isinstance(raw, str) or not isinstance(raw, Sequence) or not raw:
            raise LakeSpecError(field, f"{raw!r} is not a partition selection.",
                                "Give a list of partitions, {'from': {...}, 'to': {...}}, or 'all'.")
        return cls(listed=tuple(normalize_partition(spec, p, f"{field}[{i}]") for i, p in enumerate(raw)))

    def select(self, spec: TableSpec, existing: Sequence[Partition]) -> list[Partition]:
        """The existing partitions chosen; a listed partition that does not exist is an error."""
        if self.listed:
            keys = {_key(p) for p in existing}
            for i, part in enumerate(self.listed):
                if _key(part) not in keys:
                    raise LakeSpecError(f"partitions[{i}]", f"partition {part} does not exist (it has no live files).",
                                        "List existing partitions (`airflow-lake files PATH` shows them).")
            return [dict(p) for p in self.listed]
        chosen = []
        low = partition_order_key(spec, self.start) if self.start is not None else None
        high = partition_order_key(spec, self.end) if self.end is not None else None
        for part in existing:
            key = partition_order_key(spec, part)
            if low is None and high is None:
                chosen.append(dict(part))
            elif key is not None and (low is None or key >= low) and (high is None or key <= high):
                chosen.append(dict(part))  # (a partition with a null value is outside every range)
        return chosen

    def to_dict(self) -> Any:
        """JSON form (for the log)."""
        if self.listed:
            return [dict(p) for p in self.listed]
        if self.start is None and self.end is None:
            return "all"
        return {k: v for k, v in (("from", self.start), ("to", self.end)) if v is not None}


def new_spec(table_spec: TableSpec, bucket: Mapping[str, Any] | None, selection: PartitionSelection) -> TableSpec:
    """The table spec after the rewrite: `bucket` (JSON form) replaces the bucket spec if given."""
    if bucket is None:
        if table_spec.bucket is None:
            raise LakeSpecError("bucket", "the table has no bucket spec and none was given.",
                                "Give `bucket`: {'columns': [...], 'count': N, 'sort_columns': [...]}.")
        return table_spec
    if not isinstance(bucket, Mapping):
        raise LakeSpecError("bucket", f"expected an object, got {bucket!r}.",
                            "Give {'columns': [...], 'count': N, 'sort_columns': [...]}.")
    raw = dict(bucket)
    if table_spec.bucket is None and selection.start is not None and selection.end is None \
            and "from_partition" not in raw:
        raw["from_partition"] = dict(selection.start)  # a plain table bucketed from a partition on
    return TableSpec.from_dict({**table_spec.to_dict(), "bucket": raw})


def bucket_rewrite(table: TableMetadata, spark: SparkSession, *, partitions: Any = None,
                   bucket: Mapping[str, Any] | None = None, request_id: str | None = None,
                   request_fingerprint: str | None = None) -> LogEntry | None:
    """Rewrite the chosen partitions into the bucket spec (the table's, or `bucket`, which becomes the
    table's); returns the commit (None if nothing was chosen and the spec did not change).

    All input checks run before anything is written; a retry with a committed `request_id` returns it
    (`request_fingerprint`: of the request's inputs, `commit.requests`).
    """
    prior = requests.committed(table, requests.Request(OPERATION, request_id, request_fingerprint))
    if prior is not None:
        return prior
    base = table.state()  # the spec and files this rewrite reads: a spec change or write since conflicts
    spec = stored_spec(base.spec)
    if spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has a primary key: its files hold upserts that must be merged, "
                            "and its bucket count is part of its key layout.",
                            "Compact it instead (`compact`); to change its buckets, upsert into a new table.")
    selection = PartitionSelection.parse(partitions, spec)
    target = new_spec(spec, bucket, selection)
    _choose(selection, spec, target, list(base.files.values()))  # refuse bad input before an instant starts
    txn = begin(table, "replace", OPERATION, request_id=request_id, base=base, request_fingerprint=request_fingerprint)
    try:
        chosen, old = _choose(selection, spec, target, txn.base_files)
        if not old and target == spec:
            txn.abort()
            log.info("bucket_rewrite of %s: no partition chosen and the spec is unchanged; nothing to do", table.url)
            return None
        metrics: dict[str, Any] = {"partitions_rewritten": len(chosen), "spec_changed": target != spec}
        files: list[DataFile] = []
        if old:
            snap = snapshot_of(txn.base)
            df = Scan(table.storage, snap, (), tuple(old)).to_df(spark)
            log.info("bucket_rewrite of %s: %d partition(s), %d file(s), %d rows", table.url, len(chosen), len(old),
                     sum(f.rows for f in old))
            files = write_dataframe(df, table.storage, target, txn.instant,
                                    allowed_partitions=chosen if spec.partition_columns else None, metrics=metrics)
        metrics.update({"files_before": len(old), "files_after": len(files),
                        "bytes_before": sum(f.bytes for f in old), "bytes_after": sum(f.bytes for f in files)})
        metrics["bucket_counts"] = bucket_counts(files, target)
        metrics["bucket_counts_before"] = bucket_counts(old, spec)
        metadata: dict[str, Any] = {"partitions": selection.to_dict()}
        if target != spec:
            metadata["spec"] = target.to_dict()
        if spec.partition_columns:
            return txn.commit(added=files, removed=[f.path for f in old], overwrites=chosen, metrics=metrics,
                              metadata=metadata)
        return txn.commit(added=files, removed=[f.path for f in old], whole_table=True, metrics=metrics,
                          metadata=metadata)
    except BaseException:
        txn.abort()
        raise


def bucket_counts(files: Sequence[DataFile], spec: TableSpec) -> dict[str, int | None]:
    """Per partition (as `col=value/...` text; '' for an unpartitioned table): its bucket count, None if plain
    (the largest count if its files differ)."""
    counts: dict[str, set[int]] = {}
    for data_file in files:
        name = "/".join(f"{k}={v}" for k, v in data_file.partition.items())
        bucketing = file_bucketing(data_file, spec)
        counts.setdefault(name, set()).update([bucketing.count] if bucketing else [])
    return {name: max(found) if found else None for name, found in sorted(counts.items())}


def _check_counts_with_kept(target: TableSpec, spec: TableSpec, kept: Sequence[DataFile]) -> None:
    """The new counts must be multiples of the counts of the partitions that keep their files (`spec`: the
    spec they were written under)."""
    if target.bucket is None:
        return
    counts = set(target.bucket.counts)
    columns = target.bucket.columns
    for data_file in kept:
        bucketing = file_bucketing(data_file, spec)
        if bucketing is not None and bucketing.columns == columns:
            counts.add(bucketing.count)
    check_multiples(counts, "bucket.count")


def _choose(selection: PartitionSelection, spec: TableSpec, target: TableSpec, files: Iterable[DataFile]
            ) -> tuple[list[Partition], list[DataFile]]:
    """The chosen partitions and their files; the new counts checked against the partitions kept, and a
    spec change that rewrites nothing checked against every file."""
    files = list(files)
    chosen = selection.select(target, _partitions(files))
    keys = {_key(p) for p in chosen}
    _check_counts_with_kept(target, spec, [f for f in files if _key(f.partition) not in keys])
    if not chosen and target != spec:
        _check_spec_fits_files(selection, spec, target, files)
    return chosen, [f for f in files if _key(f.partition) in keys]


def _check_spec_fits_files(selection: PartitionSelection, spec: TableSpec, target: TableSpec,
                           files: Sequence[DataFile]) -> None:
    """A spec change that rewrites no partition may only describe the existing files as they are: each
    partition gets, for later writes, the bucketing its files already have (columns, count, hash; sort
    columns too if bucketed). `{"from": X}` past the last partition of a plain table passes (the existing
    partitions stay plain, X and later get buckets); a spec that would bucket, or re-bucket, partitions
    whose files stay as they are is refused: later writes would put files of another layout beside them."""
    sort_changed = spec.bucket is not None and target.bucket is not None and \
        spec.bucket.sort_columns != target.bucket.sort_columns
    seen: set[tuple[Any, Bucketing | None]] = set()
    for data_file in files:
        have = file_bucketing(data_file, spec)
        if (data_file.partition_key(), have) in seen:
            continue  # (a partition's files share their layout: one check each)
        seen.add((data_file.partition_key(), have))
        count = target.bucket_count_for(data_file.partition)
        want = target.bucket.bucketing(count) if target.bucket is not None and count is not None else None
        if have == want and not (have is not None and sort_changed):
            continue
        where = "/".join(f"{k}={v}" for k, v in data_file.partition.items()) or "the table"
        layout = "plain" if have is None else f"in {have.count} buckets"
        raise LakeSpecError(
            "partitions", f"{selection.to_dict()!r} matches no partition, so nothing would be rewritten, yet the "
            f"new bucket spec would change the layout of partitions that keep their files ({where} is {layout}): "
            "later writes would put files of another layout beside them.",
            "Choose the partitions to rewrite (a range that holds them, a list, or 'all'); to bucket only "
            "partitions that have no data yet, give {'from': <first such partition>} (earlier partitions stay "
            "plain) — or keep the table's bucket spec.")


def _order_key(spec: TableSpec, part: Partition) -> tuple[Any, ...]:
    key = partition_order_key(spec, part)
    assert key is not None  # (null bounds are refused first)
    return key


def _partitions(files: Sequence[DataFile]) -> list[Partition]:
    return list({f.partition_key(): dict(f.partition) for f in files}.values())


def _key(part: Mapping[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(part.items()))
