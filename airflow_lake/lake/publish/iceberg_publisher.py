"""Publish our log as Iceberg snapshots in a catalog: every entry after the newest published one, in order.

One Iceberg snapshot per entry of our log that changes what other engines see (`visibility.py`: a primary-key table's
tombstone-free base files only), its summary holding `lake.seq` (our sequence number) and `lake.instant`:
- files only added: `append`; files removed (and maybe added): `overwrite`; clustering and bucket rewrites (same rows,
  new files: `delta_publisher.LAYOUT_ONLY`): `replace`; a restore publishes the restored file set as an overwrite;
- an entry that sets the spec first brings the Iceberg schema and name mapping to it (`iceberg_schema.sync`), in the
  same catalog commit as its snapshot, if it has one;
- entries that change nothing other engines see (rollbacks, cleans, plans, a primary-key table's upserts) make no
  snapshot; how far the log has been looked at is the table property `lake.published-seq` (so the next publish does
  not fold them again). The newest published entry is the larger of it and the current snapshot's `lake.seq`.

Each catalog commit asserts the snapshot and schema it was built on: when another publisher got there first the
commit fails (`CommitFailedException`), and this one reloads and goes on from the newest `lake.seq`, so every entry
is published once and in order. A publish that is killed leaves the commits it made; the next one goes on from them.

The first publish (no Iceberg table yet, or one whose published entry has left our log) publishes the table as of
the head in one snapshot: the files that differ between the Iceberg table's current snapshot and ours. Iceberg time
travel reaches back to the first publish.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table, Transaction
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import AssertCurrentSchemaId, AssertRefSnapshotId

from airflow_lake.lake.errors import LakeError, LakeSnapshotNotFound
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.publish import iceberg_catalog, iceberg_files, iceberg_schema
from airflow_lake.lake.publish.delta_publisher import LAYOUT_ONLY
from airflow_lake.lake.publish.iceberg_replace import replace_files
from airflow_lake.lake.publish.visibility import FileOperations, visible
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
CATALOG_PROPERTY = "publish.iceberg.catalog"
TABLE_PROPERTY = "publish.iceberg.table"
SEQ = "lake.seq"  # snapshot summary: the entry of our log it publishes
INSTANT = "lake.instant"
EXAMINED = "lake.published-seq"  # table property: our log is published up to here
MAX_ATTEMPTS = 50  # reloads after another publisher's commit, before giving up (each one found progress)
MAIN = "main"


@dataclass(frozen=True)
class IcebergPublished:
    """What an Iceberg publish did: the newest published entry, and the snapshots this call committed."""

    seq: int
    written: int
    seconds: float


def target(spec: TableSpec) -> tuple[str, str] | None:
    """(catalog, `namespace.table`) a table publishes to, or None when it publishes no Iceberg."""
    catalog = spec.properties.get(CATALOG_PROPERTY)
    name = spec.properties.get(TABLE_PROPERTY)
    return (catalog, name) if catalog and name else None


def published_upto(table: Table) -> int:
    """The newest entry of our log the Iceberg table publishes (-1: none)."""
    snapshot = table.current_snapshot()
    seq = snapshot.summary.get(SEQ) if snapshot is not None and snapshot.summary is not None else None
    examined = table.metadata.properties.get(EXAMINED)
    return max(int(seq) if seq is not None else -1, int(examined) if examined is not None else -1)


def status(table: TableMetadata, spec: TableSpec) -> int | None:
    """The newest published entry (-1: none), without publishing; None: the table publishes no Iceberg."""
    where = target(spec)
    if where is None:
        return None
    found = iceberg_catalog.load(iceberg_catalog.catalog(where[0]), where[1])
    return -1 if found is None else published_upto(found)


def publish(table: TableMetadata, upto: int | None = None) -> IcebergPublished:
    """Commit the Iceberg snapshots of our entries after the newest published one, up to `upto` (default the head)."""
    started = time.monotonic()
    head = table.commit_log.head() if upto is None else upto
    state = table.state(head)
    spec = stored_spec(state.spec)
    where = target(spec)
    if where is None:
        raise LakeError(f"{table.url}: no Iceberg catalog is configured. Fix: set the table properties "
                        f"{CATALOG_PROPERTY} and {TABLE_PROPERTY}.")
    catalog_name, name = where
    catalog = iceberg_catalog.catalog(catalog_name)
    identity = table.identity(state)
    written = 0
    for _ in range(MAX_ATTEMPTS):
        published = iceberg_catalog.load(catalog, name)
        if published is None:
            published = iceberg_catalog.create(catalog, name, spec, identity, table.url)
        iceberg_catalog.check_owner(published, name, identity)
        if not iceberg_schema.same_partitioning(spec, published.spec()):
            raise LakeError(f"the Iceberg table {name!r} is partitioned by "
                            f"{[f.name for f in published.spec().fields]}, the lake table {table.url} by "
                            f"{list(spec.partition_columns)}. Fix: publish to another publish.iceberg.table.")
        done = published_upto(published)
        if done >= head:
            break
        try:
            try:
                written += _replay(table, published, done, head) if done >= 0 else _jump(table, published, head)
            except LakeSnapshotNotFound:  # entries after `done` have left our log: publish the head at once
                written += _jump(table, published, head)
            break
        except CommitFailedException:
            log.info("another publisher committed to the Iceberg table %s first; going on from its newest entry",
                     name)
    else:
        raise LakeError(f"{table.url}: the Iceberg table {name!r} changed under this publish {MAX_ATTEMPTS} times; "
                        "try `airflow-lake publish` again.")
    seconds = time.monotonic() - started
    if written:
        log.info("published %d Iceberg snapshot(s) of %s to %s up to %d in %.3f s", written, table.url, name, head,
                 seconds)
    return IcebergPublished(head, written, seconds)


def _replay(table: TableMetadata, published: Table, done: int, head: int) -> int:
    """Commit the snapshots of entries `done`+1..`head`, one per entry that changes what other engines see."""
    state = table.state(done).copy()
    operations = FileOperations(table, state)
    written = 0
    examined = done
    for entry in table.commit_log.entries(done, head):
        operations.note(entry)
        before = stored_spec(state.spec)
        removed = [state.files[p] for p in entry.removed if p in state.files]
        state.apply(entry)
        spec = stored_spec(state.spec)
        gone = {f.path: f for f in removed if visible(f, before, operations)}
        new = {f.path: f for f in entry.added if visible(f, spec, operations)}
        deleted = [f for p, f in gone.items() if p not in new]
        added = [f for p, f in new.items() if p not in gone]
        if not deleted and not added and "spec" not in entry.metadata:
            examined = entry.seq
            continue
        operation = Operation.REPLACE if entry.operation in LAYOUT_ONLY else None
        if _commit(table, published, spec, entry, deleted, added, operation):
            written += 1
        examined = entry.seq
    if examined > published_upto(published):
        txn = _transaction(published)
        txn.set_properties({EXAMINED: str(examined)})
        txn.commit_transaction()
    return written


def _jump(table: TableMetadata, published: Table, head: int) -> int:
    """Publish the table as of `head` in one snapshot: the files that differ from the Iceberg table's."""
    state = table.state(head)
    spec = stored_spec(state.spec)
    operations = FileOperations(table, state)
    ours = {iceberg_files.file_uri(table.storage, p): f for p, f in state.files.items()
            if visible(f, spec, operations)}
    theirs = _current_files(published)
    deleted = [f for uri, f in theirs.items() if uri not in ours]
    added = [f for uri, f in ours.items() if uri not in theirs]
    entry = table.commit_log.read(head)
    return 1 if _commit(table, published, spec, entry, deleted, added, None, upto=head) else 0


def _current_files(published: Table) -> dict[str, DataFile]:
    """The data files of the Iceberg table's current snapshot (as the DataFile to delete them by), by location."""
    snapshot = published.current_snapshot()
    if snapshot is None:
        return {}
    out: dict[str, DataFile] = {}
    for manifest in snapshot.manifests(published.io):
        for item in manifest.fetch_manifest_entry(published.io, discard_deleted=True):
            out[item.data_file.file_path] = item.data_file  # type: ignore[assignment]
    return out


def _transaction(published: Table) -> Transaction:
    """A transaction that commits only onto the snapshot and schema it was built on (else CommitFailedException)."""
    txn = published.transaction()
    snapshot = published.current_snapshot()
    txn._apply((), (AssertRefSnapshotId(snapshot_id=snapshot.snapshot_id if snapshot else None, ref=MAIN),
                    AssertCurrentSchemaId(current_schema_id=published.metadata.current_schema_id)))
    return txn


def _commit(table: TableMetadata, published: Table, spec: TableSpec, entry: LogEntry,
            deleted: Iterable[DataFile | object], added: Iterable[DataFile], operation: Operation | None,
            upto: int | None = None) -> bool:
    """One catalog commit: the schema of `spec`, and a snapshot deleting and adding files (if any); True if it
    made a snapshot."""
    seq = entry.seq if upto is None else upto
    deleted, added = list(deleted), list(added)
    txn = _transaction(published)
    ids = iceberg_schema.sync(txn, spec)
    txn.set_properties({EXAMINED: str(seq), **iceberg_catalog.OWN_PROPERTIES})
    snapshot = bool(deleted or added)
    if snapshot:
        schema = txn.table_metadata.schema()
        partitioning = txn.table_metadata.spec()
        summary = {SEQ: str(seq), INSTANT: entry.instant, "lake.operation": entry.operation}
        update = txn.update_snapshot(snapshot_properties=summary)
        producer = replace_files(update) if operation == Operation.REPLACE else \
            update.overwrite() if deleted else update.fast_append()
        for item in deleted:
            producer.delete_data_file(item if not isinstance(item, DataFile) else
                                      _iceberg_file(table, item, spec, schema, partitioning, ids))
        for data_file in added:
            producer.append_data_file(_iceberg_file(table, data_file, spec, schema, partitioning, ids))
        producer.commit()
    txn.commit_transaction()
    return snapshot


def _iceberg_file(table: TableMetadata, data_file: DataFile, spec: TableSpec, schema: object, partitioning: object,
                  ids: Mapping[str, int]) -> object:
    return iceberg_files.data_file(table.storage, data_file, spec, schema, partitioning, ids)  # type: ignore[arg-type]
