"""Append and overwrite commits of a DataFrame: write the files, then complete the instant atomically."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.reads import TableRead
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import TableState, files_in_partitions
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.schema import conform, new_columns
from airflow_lake.lake.spec.evolution import ADD_COLUMNS, add_columns, added_columns, check_schema_evolution
from airflow_lake.lake.spec.partitions import DYNAMIC, Partitions, normalize_partitions
from airflow_lake.lake.spec.table_spec import stored_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from airflow_lake.lake.format.table_metadata import TableMetadata

MODES = ("append", "overwrite")


def write(table: TableMetadata, df: DataFrame, *, mode: str = "append", partitions: Partitions = None,
          request_id: str | None = None, reads: Iterable[str] = (),
          metadata: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
          max_exchanges: int | None = None, base: TableState | None = None,
          table_reads: Iterable[TableRead] = (), request_fingerprint: str | None = None,
          schema_evolution: str = "none", request_reads: Mapping[str, Any] | None = None) -> LogEntry:
    """Append `df`, or overwrite the table / the given partitions / ('dynamic') the partitions in `df`;
    `metrics` are added to the commit's.

    `base`: the table state `df` was built from when it reads this table (see `LakeTable.begin`), and
    `table_reads` the scans of it at that base (`sources.load`): commits since then that add or remove a
    file those scans could have seen make this write conflict instead of losing or doubling rows. Without
    a base, the latest state is taken before anything else (the spec used to conform the data is part of
    what the write read: a spec change committed meanwhile is a conflict).

    `max_exchanges`: fail (`LakeShuffleError`, before writing) if the query's plan and the write together
    need more shuffle Exchanges — for steps that must stay shuffle-free (bucketed reads into bucketed writes).

    With a `request_id` already committed, returns that entry and writes nothing (idempotent retries);
    `request_fingerprint` (of the request's inputs, `commit.requests`) is recorded and refuses a reused id;
    `request_reads` (what its query read of other lake tables) is recorded too: with other snapshots, an
    overwrite runs again (a rebuild) and an append is refused.
    Schema and partition errors are raised before any instant starts.

    `schema_evolution="add_columns"`: columns of `df` the table lacks are added (nullable, at the end, in the
    source's order and types) in the same commit, whose metadata `spec` is the new spec (Delta's mergeSchema).
    Off (the default), such a column is refused, naming this option.
    """
    from pyspark.sql import DataFrame as SparkDataFrame  # classic and Spark Connect DataFrames both are one

    if not isinstance(df, SparkDataFrame):
        raise LakeSpecError("df", f"a {type(df).__module__}.{type(df).__name__} is not a Spark DataFrame.",
                            "Convert it first, e.g. spark.createDataFrame(pandas_df).")
    if mode not in MODES:
        raise LakeSpecError("mode", f"unknown mode {mode!r}.", f"Use one of {', '.join(MODES)}.")
    base = table.state() if base is None else base
    spec = stored_spec(base.spec)
    if spec.primary_key:
        raise LakeSpecError("table", f"{table.url!r} has a primary key: rows go in by key and version.",
                            "Use versioned_upsert (VersionedUpsertOperator) instead of write.")
    if mode == "append" and partitions is not None:
        raise LakeSpecError("partitions", "partitions apply to overwrite only.", "Set mode='overwrite'.")
    if partitions == DYNAMIC and not spec.partition_columns:
        raise LakeSpecError("partitions", "the table is not partitioned.", "Drop `partitions`.")
    parts = normalize_partitions(spec, partitions)
    request = requests.Request("write", request_id, request_fingerprint, request_reads, rebuild=mode == "overwrite")
    prior = requests.committed(table, request)
    if prior is not None:
        return prior
    evolved = spec
    if check_schema_evolution(schema_evolution) == ADD_COLUMNS:
        evolved = add_columns(spec, new_columns(df, spec))
    # a nullable column the source lacks is NULL; a source that already is the table's columns goes as it is
    conformed = conform(df, evolved, missing_as_null=True, as_is=True)
    own_reads = tuple(table_reads)
    spec_change = {} if evolved == spec else {"spec": evolved.to_dict(), "added_columns": added_columns(spec, evolved)}
    txn = begin(table, "commit", "write", request_id=request_id, base=base, request_fingerprint=request_fingerprint,
                metadata={"mode": mode, "partitions": parts, **(metadata or {}), **request.metadata()})
    try:
        allowed = parts if isinstance(parts, list) else None
        metrics_out: dict[str, Any] = dict(metrics or {})
        files = write_dataframe(conformed, table.storage, evolved, txn.instant, allowed_partitions=allowed,
                                metrics=metrics_out, max_exchanges=max_exchanges)
        base_files = txn.base_files
        if mode == "append":
            return txn.commit(added=files, reads=reads, table_reads=own_reads, metrics=metrics_out,
                              metadata=spec_change)
        if parts is None:
            return txn.commit(added=files, removed=[f.path for f in base_files], reads=reads, whole_table=True,
                              table_reads=own_reads, metrics=metrics_out, metadata=spec_change)
        targets = [dict(p) for p in {f.partition_key(): f.partition for f in files}.values()] \
            if parts == DYNAMIC else parts
        assert isinstance(targets, list)
        removed = [f.path for f in files_in_partitions(base_files, targets)]
        return txn.commit(added=files, removed=removed, reads=reads, overwrites=targets, table_reads=own_reads,
                          metrics=metrics_out, metadata={"overwritten_partitions": targets, **spec_change})
    except BaseException:
        txn.abort()
        raise
