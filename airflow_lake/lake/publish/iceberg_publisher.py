"""Publish our log as Iceberg snapshots in a catalog: every entry after the newest published one, in order.

One Iceberg snapshot per entry of our log that changes what other engines see (`visibility.py`: a primary-key table's
tombstone-free base files only), its summary holding `lake.seq` (our sequence number) and `lake.instant`:
- files only added: `append`; files removed (and maybe added): `overwrite`; clustering and bucket rewrites (same rows,
  new files: `delta_publisher.LAYOUT_ONLY`): `replace`; a restore publishes the restored file set as an overwrite;
- an entry that sets the spec first brings the Iceberg schema and name mapping to it (`iceberg_schema.sync`), in the
  same catalog commit as its snapshot, if it has one;
- a `clean` expires the snapshots of the entries before its horizon (Iceberg's metadata-only expiry: their files
  may be deleted), the current one excepted;
- entries that change nothing other engines see (rollbacks, plans, a primary-key table's upserts) make no
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.table import Table, Transaction
from pyiceberg.table.update import AssertCurrentSchemaId, AssertRefSnapshotId
from pyiceberg.table.update.snapshot import ExpireSnapshots

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
CLEAN = "clean"  # the action of `clean` entries (metadata `cleaned_before`: snapshots before it may miss files)


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
    written = [0]  # snapshots committed, also by a pass that then lost a race
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
                if done >= 0:
                    _replay(table, published, done, head, written)
                else:
                    _jump(table, published, head, written)
            except LakeSnapshotNotFound:  # entries after `done` have left our log: publish the head at once
                _jump(table, published, head, written)
            break
        except CommitFailedException:
            log.info("another publisher committed to the Iceberg table %s first; going on from its newest entry",
                     name)
    else:
        raise LakeError(f"{table.url}: the Iceberg table {name!r} changed under this publish {MAX_ATTEMPTS} times; "
                        "try `airflow-lake publish` again.")
    seconds = time.monotonic() - started
    if written[0]:
        log.info("published %d Iceberg snapshot(s) of %s to %s up to %d in %.3f s", written[0], table.url, name,
                 head, seconds)
    return IcebergPublished(head, written[0], seconds)


def _replay(table: TableMetadata, published: Table, done: int, head: int, written: list[int]) -> None:
    """Commit the snapshots of entries `done`+1..`head`, one per entry that changes what other engines see (counted
    in `written[0]`)."""
    state = table.state(done).copy()
    operations = FileOperations(table, state)
    examined = done
    for entry in table.commit_log.entries(done, head):
        operations.note(entry)
        before = stored_spec(state.spec)
        removed = [state.files[p] for p in entry.removed if p in state.files]
        state.apply(entry)
        spec = stored_spec(state.spec)
        gone = {f.path: f for f in removed if visible(f, before, operations)}
        new = {f.path: f for f in entry.added if visible(f, spec, operations)}
        change = _Change(entry.seq, entry, spec, [f for p, f in gone.items() if p not in new],
                         [f for p, f in new.items() if p not in gone], replace=entry.operation in LAYOUT_ONLY)
        examined = entry.seq
        if entry.action == CLEAN:  # snapshots before its horizon may name deleted files: expire them
            change.expire_before = int(entry.metadata.get("cleaned_before", 0))
        if change.deleted or change.added or "spec" in entry.metadata or _expired(published, change.expire_before):
            written[0] += _commit(table, published, change)
    if examined > published_upto(published):
        txn = _transaction(published)
        txn.set_properties({EXAMINED: str(examined)})
        txn.commit_transaction()


def _jump(table: TableMetadata, published: Table, head: int, written: list[int]) -> None:
    """Publish the table as of `head` in one snapshot: the files that differ from the Iceberg table's."""
    state = table.state(head)
    spec = stored_spec(state.spec)
    operations = FileOperations(table, state)
    ours = {iceberg_files.file_uri(table.storage, p): f for p, f in state.files.items()
            if visible(f, spec, operations)}
    theirs = _current_files(published)
    change = _Change(head, table.commit_log.read(head), spec, [],
                     [f for uri, f in ours.items() if uri not in theirs],
                     foreign=[f for uri, f in theirs.items() if uri not in ours])
    written[0] += _commit(table, published, change)


@dataclass
class _Change:
    """One catalog commit: the files to delete and add, as of entry `seq` (whose spec is `spec`)."""

    seq: int
    entry: LogEntry
    spec: TableSpec
    deleted: list[DataFile]
    added: list[DataFile]
    foreign: list[IcebergDataFile] = field(default_factory=list)  # in the Iceberg table, not ours (a first publish)
    replace: bool = False  # same rows in new files: Iceberg's `replace`
    expire_before: int = -1  # expire the snapshots of entries before this one (a clean deleted their files)


def _expired(published: Table, before: int) -> list[int]:
    """The snapshots that publish entries before `before`, but the current one (Iceberg keeps a branch's head)."""
    current = published.current_snapshot()
    out = []
    for snapshot in published.metadata.snapshots:
        seq = snapshot.summary.get(SEQ) if snapshot.summary is not None else None
        if seq is not None and int(seq) < before and (current is None or snapshot.snapshot_id != current.snapshot_id):
            out.append(snapshot.snapshot_id)
    return out


def _current_files(published: Table) -> dict[str, IcebergDataFile]:
    """The data files of the Iceberg table's current snapshot, by location."""
    snapshot = published.current_snapshot()
    if snapshot is None:
        return {}
    return {item.data_file.file_path: item.data_file for manifest in snapshot.manifests(published.io)
            for item in manifest.fetch_manifest_entry(published.io, discard_deleted=True)}


def _transaction(published: Table) -> Transaction:
    """A transaction that commits only onto the snapshot and schema it was built on (else CommitFailedException)."""
    txn = published.transaction()
    snapshot = published.current_snapshot()
    requirements = (  # pydantic models whose fields have aliases (populated by name, as pyiceberg does)
        AssertRefSnapshotId(ref=MAIN, snapshot_id=snapshot.snapshot_id if snapshot else None),  # type: ignore[call-arg]
        AssertCurrentSchemaId(current_schema_id=published.metadata.current_schema_id),  # type: ignore[call-arg]
    )
    txn._apply((), requirements)
    return txn


def _commit(table: TableMetadata, published: Table, change: _Change) -> int:
    """One catalog commit: the schema of the change's spec, and a snapshot deleting and adding its files (if any);
    the number of snapshots it made (0 or 1)."""
    txn = _transaction(published)
    ids = iceberg_schema.sync(txn, change.spec)
    txn.set_properties({EXAMINED: str(change.seq), **iceberg_catalog.OWN_PROPERTIES})
    expired = _expired(published, change.expire_before)
    if expired:  # metadata only: Iceberg drops the snapshots, no file is deleted (that was our clean)
        ExpireSnapshots(txn).by_ids(expired).commit()
    snapshot = bool(change.deleted or change.added or change.foreign)
    if snapshot:
        schema = txn.table_metadata.schema()
        partitioning = txn.table_metadata.spec()

        def convert(data_file: DataFile) -> IcebergDataFile:
            return iceberg_files.data_file(table.storage, data_file, change.spec, iceberg_schema=schema,
                                           iceberg_spec=partitioning, ids=ids)

        summary = {SEQ: str(change.seq), INSTANT: change.entry.instant, "lake.operation": change.entry.operation}
        update = txn.update_snapshot(snapshot_properties=summary)
        # appends merge small manifests (pyiceberg's commit.manifest-merge.*), so the manifests of a table that
        # is appended to at every commit stay few
        producer: Any = replace_files(update) if change.replace else \
            update.overwrite() if change.deleted or change.foreign else update.merge_append()
        for foreign in change.foreign:
            producer.delete_data_file(foreign)
        for data_file in change.deleted:
            producer.delete_data_file(convert(data_file))
        for data_file in change.added:
            producer.append_data_file(convert(data_file))
        producer.commit()
    txn.commit_transaction()
    return int(snapshot)
