"""`LakeTable`: the one façade over a lake table's spec, timeline, snapshots, reads and commits."""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import recovery, requests
from airflow_lake.lake.commit.transaction import Transaction, begin
from airflow_lake.lake.errors import LakeError, LakeSpecError, LakeTableExists, LakeTableNotFound
from airflow_lake.lake.format import identity, instants, spec_history, table_roots
from airflow_lake.lake.format.filters import may_match, parse_filters
from airflow_lake.lake.format.log import CommitLog, LogEntry
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.format.table_metadata import AsOf, TableMetadata
from airflow_lake.lake.maintenance import clean as clean_module
from airflow_lake.lake.publish import publisher
from airflow_lake.lake.spark.scan import Scan
from airflow_lake.lake.spec.reserved import check_column_names
from airflow_lake.lake.spec.table_spec import TableSpec, check_identifier

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from airflow_lake.lake.maintenance.orphans import OrphanFilesResult
    from airflow_lake.lake.maintenance.restore import RestoreResult

log = logging.getLogger(__name__)
__all__ = ["AsOf", "LakeTable"]


def _tables_below(table: TableMetadata) -> list[str]:
    """The tables under a path that is no table (a root of tables), for the error that says so; empty when there
    are none or looking would be too broad (a bounded search: opening a table never lists a whole store)."""
    try:
        if table.storage.local:
            return table_roots.tables_below(table.url) if os.path.isdir(table.url) else []
        return table_roots.store_tables_below(table.url, max_depth=1)
    except (LakeError, OSError):
        return []


class LakeTable(TableMetadata):
    """A lake table at a URL. Use `LakeTable.create` or `LakeTable.open`."""

    # -- lifecycle -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str, spec: TableSpec | Mapping[str, Any], *, exist_ok: bool = False,
               request_id: str | None = None) -> LakeTable:
        """Create a table (log entry 0 holds its spec). With `exist_ok`, an existing table is fine when `spec` is
        its spec, or a spec it had before and left only through the provider's own operations (bucket_rewrite,
        alter_table, schema evolution: `format.spec_history`); otherwise `LakeTableExists` names what differs.

        Refused (`LakeSpecError`, nothing written) inside another table or over a directory that holds one
        (`table_roots.check_new_root`)."""
        table_spec = spec if isinstance(spec, TableSpec) else TableSpec.from_dict(spec)
        table = cls(path)
        if table.storage.local and os.path.isfile(table.url):
            raise LakeSpecError("table", f"{table.url!r} is a file, not a directory.",
                                "Give the path of a directory (it is created if it does not exist).")
        table.storage.check_commits()  # a store whose commits cannot be atomic is refused: `stores.refusal`
        now = time.time()
        entry = LogEntry(seq=0, instant=instants.format_id(int(now * 1000)), action="create",
                         operation="create_table", started_at=now, completed_at=now,
                         request_id=request_id,
                         metadata={"spec": table_spec.to_dict(), identity.TABLE_ID: identity.new_table_id()},
                         metrics={"columns": len(table_spec.columns), "created": True})
        if table.commit_log.head() < 0:
            # a name the format or Spark uses itself would make the table unreadable (`spec.reserved`); an existing
            # table that has one (created before the rule) stays as it is
            check_column_names(table_spec.column_names, "columns")
            if table.storage.local:  # before anything is written: no `_lake` left behind
                table_roots.check_new_root(table.url)
            else:  # an S3-compatible server may ignore If-None-Match: create one key twice to see
                table_roots.check_new_store_root(table.url)
                table.storage.check_commits(probe=True)
            if table.commit_log.try_append(entry):
                log.info("created lake table %s", table.url)
                publisher.after_commit(table, entry.seq)
                return table
        first = table.commit_log.read(0)
        if exist_ok or (request_id is not None and first.request_id == request_id):
            # the table's spec, or one it reached its spec from through the provider's own operations (a daily
            # create task after a one-off bucket_rewrite); else `LakeTableExists` naming every difference
            reached = spec_history.reached_from(table, table_spec)
            if reached.differences:
                log.info("lake table %s exists: %s", table.url, reached.describe())
            return table  # identical table, or a retry of the request that created it
        raise LakeTableExists(f"a lake table already exists at {table.url!r}. Fix: pass exist_ok=True "
                              "(if_exists='ignore') or use another path.")

    @classmethod
    def open(cls, path: str) -> LakeTable:
        """Open an existing table."""
        table = cls(path)
        if table.commit_log.head() < 0:
            below = _tables_below(table)
            if below:  # a root of tables (what `airflow-lake ls` takes), not a table
                more = f" and {len(below) - 1} more" if len(below) > 1 else ""
                example = below[0] if "://" in below[0] or os.path.isabs(below[0]) else \
                    f"{table.url.rstrip('/')}/{below[0]}"
                raise LakeTableNotFound(f"{table.url!r} is not a lake table but a directory holding lake tables "
                                        f"({below[0]!r}{more}). Fix: give one table's path, e.g. {example!r} "
                                        "(`airflow-lake ls` lists the tables under a directory).")
            raise LakeTableNotFound(f"no lake table at {table.url!r}. Fix: create it first (operation "
                                    "create_table) or check the path.")
        return table

    @staticmethod
    def exists(path: str) -> bool:
        """True if a lake table exists at `path`."""
        return CommitLog(Storage(path)).head() >= 0

    def after_commit(self, entry: LogEntry) -> None:
        """After an entry lands: the checkpoint (`TableMetadata.after_commit`), then publishing it for other engines
        (`lake.publish`). Never raises: the commit has succeeded."""
        super().after_commit(entry)
        publisher.after_commit(self, entry.seq)

    def publish(self) -> publisher.Published:
        """Publish every commit not yet published (Delta Lake's `_delta_log/`); raises what goes wrong."""
        return publisher.publish(self)

    def find_request(self, request_id: str, operation: str | None = None) -> LogEntry | None:
        """The completed entry recorded with `request_id` (a retry), if any: `commit.requests.find_committed`."""
        return requests.find_committed(self, request_id, operation)

    def consumed(self, as_of: AsOf = None) -> dict[str, int]:
        """How far this table has consumed each upstream table's changes, as of a snapshot (default the latest):
        upstream table identity (`identity()` of the upstream) -> the upstream seq its incremental jobs read up to
        (`format.consumed`). Empty for a table no incremental job wrote."""
        return dict(self.state(self.resolve(as_of)).consumed)

    # -- reads ---------------------------------------------------------------------------------------
    def scan(self, filters: Iterable[Sequence[Any]] | None = None, as_of: AsOf = None) -> Scan:
        """Plan a read: the snapshot's files that may match `filters` (files_skipped tells how many not)."""
        snap = self.snapshot(as_of)
        parsed = parse_filters(filters, snap.spec)
        files = tuple(f for f in snap.files if may_match(f, parsed, snap.spec))
        return Scan(self.storage, snap, tuple(parsed), files)

    def read(self, spark: SparkSession, as_of: AsOf = None, filters: Iterable[Sequence[Any]] | None = None,
             columns: Sequence[str] | None = None) -> DataFrame:
        """Read a snapshot as a Spark DataFrame, skipping files by their stats.

        A bucketed table (or the bucketed partitions `filters` select) is read as a Spark bucketed table:
        point filters read one bucket, joins and group-bys on the bucket columns need no shuffle (see
        `buckets.catalog`, and `buckets.catalog.READ_CONF` for the session settings that help).
        """
        from airflow_lake.lake.spark.bucketed_read import scan_df

        if self.spec.primary_key:  # one row per key, merged over the upserts (`upsert.merge_read`)
            from airflow_lake.lake.upsert.merge_read import read_merged

            return read_merged(self, spark, as_of, filters, columns)
        scan = self.scan(filters, as_of)
        log.info("scan of %s at %d: %d of %d file(s) read, %d skipped", self.url, scan.snapshot.seq,
                 len(scan.files), scan.files_total, scan.files_skipped)
        df = scan_df(spark, scan)
        return df.select(*[f"`{c}`" for c in columns]) if columns else df

    def register(self, spark: SparkSession, name: str, as_of: AsOf = None,
                 filters: Iterable[Sequence[Any]] | None = None) -> DataFrame:
        """Make a snapshot queryable in Spark SQL as the temporary view `name` (bucketed like `read`)."""
        from airflow_lake.lake.spark.bucketed_read import register

        check_identifier(name, "name")
        if self.spec.primary_key:
            df = self.read(spark, as_of, filters)
            df.createOrReplaceTempView(name)
            return df
        return register(spark, self.scan(filters, as_of), name)

    def to_arrow(self, as_of: AsOf = None, columns: Sequence[str] | None = None) -> pa.Table:
        """A snapshot as an Arrow table, read with pyarrow on this machine (no Spark): for small tables. Exactly
        the snapshot's live files are read; a primary-key table is merged per key as `read` merges it (one row
        per key, sorted by partition and key: `upsert.arrow_merge`)."""
        from airflow_lake.lake.format.pyarrow_read import read_files

        snap = self.snapshot(as_of)
        if snap.spec.primary_key:
            from airflow_lake.lake.upsert.arrow_merge import read_merged_arrow

            return read_merged_arrow(self.storage, snap.spec, snap.files, columns)
        return read_files(self.storage, snap.spec, snap.files, columns)

    def changes(self, spark: SparkSession, start: int | float | str, end: int | float | str | None = None, *,
                filters: Iterable[Sequence[Any]] | None = None) -> DataFrame:
        """The rows that changed after snapshot `start` (exclusive; -1: from the empty table, everything an insert)
        up to `end` (inclusive; default the latest): the end snapshot's columns plus `_change_type` (insert,
        delete, update_preimage, update_postimage), `_commit_seq` and `_commit_time`. Each bound is a log sequence
        number, an instant id, or a time (UNIX seconds as a float, ISO-8601 text: the last snapshot completed at or
        before it). Plain tables: per commit, the rows added minus the rows removed and the other way round (rows a
        rewrite carried over are no change); primary-key tables: net changes per key over the merged state.
        Commits that change no data (clustering, bucket rewrite, compaction, alter, clean) give nothing and are
        not read; `filters` prune and filter as `read`'s. A start older than what `clean` kept raises
        `LakeChangesUnavailable` naming the oldest start (`lake.changes`)."""
        from airflow_lake.lake.changes.spark_read import read_changes
        from airflow_lake.lake.changes.window import change_window

        return read_changes(self, spark, change_window(self, start, end), filters)

    # -- writes --------------------------------------------------------------------------------------
    def begin(self, action: str, operation: str, metadata: Mapping[str, Any] | None = None,
              request_id: str | None = None, recover: bool = True, *, base: TableState | None = None
              ) -> Transaction:
        """Start a transaction (`commit.transaction.begin`); first rolls back instants whose writer died."""
        return begin(self, action, operation, metadata, request_id=request_id, recover=recover, base=base)

    def write(self, df: DataFrame, *, mode: str = "append", partitions: Sequence[Mapping[str, Any]] | str | None = None,
              request_id: str | None = None, schema_evolution: str = "none") -> LogEntry:
        """Append `df`, or overwrite the whole table, the listed partitions, or ('dynamic') those in `df`.
        `schema_evolution="add_columns"` adds the columns of `df` the table lacks in the same commit (off by
        default: a new column is refused, naming this option)."""
        from airflow_lake.lake.write import append_overwrite as lake_write

        return lake_write.write(self, df, mode=mode, partitions=partitions, request_id=request_id,
                                schema_evolution=schema_evolution)

    def delete(self, spark: SparkSession, *, filters: Iterable[Sequence[Any]] | None = None, where: str | None = None,
               request_id: str | None = None) -> LogEntry | None:
        """Delete the rows matching `filters` ([("user_id", "=", 42)]) or `where` (a SQL predicate such as
        "user_id = 42"; exactly one of them) copy-on-write, as one `replace` commit; None if no row matched
        (`lake.delete`). A primary-key table deletes keys at a version: `delete_keys`."""
        from airflow_lake.lake.delete.copy_on_write import delete

        return delete(self, spark, filters=filters, where=where, request_id=request_id).entry

    def delete_keys(self, spark: SparkSession, keys: DataFrame, *, version: int, request_id: str | None = None
                    ) -> LogEntry | None:
        """Versioned delete of a primary-key table: `keys` (a DataFrame of the key and partition columns) lose what
        versions <= `version` said about them; later upserts of higher versions bring them back, late ones of
        lower versions stay deleted, also after compaction (`lake.upsert.deletes`); None if `keys` is empty. A
        retry of a committed `request_id` returns that commit."""
        from airflow_lake.lake.upsert.deletes import versioned_delete

        return versioned_delete(self, spark, keys, version=version, request_id=request_id).entry

    def alter_table(self, changes: Sequence[Mapping[str, Any]], *, request_id: str | None = None) -> LogEntry:
        """Change the schema or properties in one commit that writes no data file: `changes` in order, e.g.
        [{"add": "c2", "type": "bigint", "after": "c1"}, {"widen": "c", "type": "bigint"}, {"drop": "d"},
        {"rename": "a", "to": "b"}, {"set_properties": {"clean.retain.hours": "24"}}] (`lake.alter`)."""
        from airflow_lake.lake.alter.alter_table import alter_table

        return alter_table(self, changes, request_id=request_id).entry

    def rollback_pending(self, instant_ids: Iterable[str] | None = None,
                         request_id: str | None = None) -> LogEntry | None:
        """Roll back the named pending instants, or (None) every one whose writer is dead. Completed commits
        are refused: undoing one is `restore` (issue 22)."""
        if instant_ids is None:
            return recovery.recover(self, request_id=request_id)
        return recovery.rollback(self, list(instant_ids), request_id=request_id)

    def rollback(self, instant_ids: Iterable[str] | None = None, request_id: str | None = None) -> LogEntry | None:
        """Deprecated name of `rollback_pending`."""
        _renamed("rollback", "rollback_pending")
        return self.rollback_pending(instant_ids, request_id=request_id)

    def rollback_unchecked(self, instant_ids: Iterable[str], reason: str) -> LogEntry | None:
        """Roll back instants WITHOUT checking that their writer is dead: for instants the caller owns
        (its own aborted write, a task it killed). Use `rollback_pending` for anyone else's."""
        return recovery.rollback_unchecked(self, instant_ids, reason)

    def clean(self, retain_hours: float | None = None, request_id: str | None = None, *,
              force: bool = False) -> LogEntry | None:
        """Delete removed files no snapshot within `retain_hours` needs (default: the table property
        `clean.retain.hours`; a shorter one needs `force`)."""
        return clean_module.clean(self, retain_hours, request_id=request_id, force=force)

    def remove_orphan_files(self, older_than_hours: float | None = None, *, dry_run: bool = False,
                            request_id: str | None = None, force: bool = False) -> OrphanFilesResult:
        """Delete files under the root that no log entry holds, untouched for `older_than_hours` (default:
        the property `clean.retain.hours`; a shorter one needs `force`); `dry_run` only lists them."""
        from airflow_lake.lake.maintenance import orphans

        return orphans.remove_orphan_files(self, older_than_hours, dry_run=dry_run, request_id=request_id,
                                           force=force)

    def restore(self, *, to_seq: int | None = None, to_instant: str | None = None,
                to_timestamp: float | str | None = None, dry_run: bool = False,
                request_id: str | None = None) -> RestoreResult:
        """Commit a snapshot equal to an earlier one, given by exactly one of `to_seq` (log sequence number),
        `to_instant` (instant id) or `to_timestamp` (ISO-8601 or UNIX seconds: the last snapshot completed at or
        before it): Delta's RESTORE. Files, spec, upsert versions and request ids become the target's; history
        stays. `dry_run` only plans; restoring the current snapshot commits nothing (`maintenance.restore`)."""
        from airflow_lake.lake.maintenance import restore as restore_module

        target = restore_module.target_of(to_seq, to_instant, to_timestamp)
        return restore_module.restore(self, target, dry_run=dry_run, request_id=request_id)

    def vacuum(self, older_than_hours: float | None = None, *, dry_run: bool = False,
               request_id: str | None = None, force: bool = False) -> OrphanFilesResult:
        """Deprecated name of `remove_orphan_files` (not `clean`, which is what Delta calls VACUUM)."""
        _renamed("vacuum", "remove_orphan_files")
        return self.remove_orphan_files(older_than_hours, dry_run=dry_run, request_id=request_id, force=force)


def _renamed(old: str, new: str) -> None:
    # stacklevel 3: the warning points at the caller of the old method, not at the alias
    warnings.warn(f"LakeTable.{old} is deprecated: use LakeTable.{new} (same arguments; docs/api.md, \"Names\").",
                  DeprecationWarning, stacklevel=3)
