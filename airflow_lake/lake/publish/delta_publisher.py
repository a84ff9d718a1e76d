"""Publish our log as Delta Lake versions: every entry after the newest published version, in order.

Version n of `_delta_log/` is entry n of our log:
- entry 0 (the create) and every entry that sets the spec carry `protocol` and `metaData` (`delta_schema.py`);
- added files become `add` actions and removed ones `remove` actions, for the files other engines see
  (`visibility.py`: a primary-key table's base files only); clustering and bucket rewrites (same rows, new layout)
  have `dataChange: false`; a restore re-adds the restored files;
- entries that change no file (rollbacks, cleans, plans) are versions with a `commitInfo` only;
- every version's `commitInfo` records the entry it publishes (`airflowLake`: seq, instant, action, operation).

A publisher killed midway leaves the versions it wrote, all whole (each is one exclusive create): the next one goes
on from the newest. Two publishers at once write the same versions; each version is created by one of them and the
other goes on to the next, so the log stays in order and without gaps.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.publish import delta_actions, delta_log, delta_schema
from airflow_lake.lake.publish.visibility import FileOperations, visible
from airflow_lake.lake.spec.table_spec import stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
LAYOUT_ONLY = frozenset({"execute_clustering", "bucket_rewrite"})  # same rows, new files: `dataChange: false`
ENGINE = "airflow-lake"


@dataclass(frozen=True)
class DeltaPublished:
    """What a Delta publish did: the newest published version, and the versions this call wrote."""

    version: int
    written: int
    seconds: float


def publish(table: TableMetadata, upto: int | None = None) -> DeltaPublished:
    """Write the Delta versions of our entries after the newest published one, up to `upto` (default the head)."""
    started = time.monotonic()
    storage = table.storage
    head = table.commit_log.head() if upto is None else upto
    done = delta_log.published_upto(storage, head)
    if done >= 0:
        _check_ours(table, done)
    if done >= head:
        return DeltaPublished(done, 0, time.monotonic() - started)
    if done < 0 and table.commit_log.start() > 0:
        raise LakeError(f"{table.url}: the first Delta publish of a table replays its whole log, but `clean` expired "
                        f"the entries before {table.commit_log.start()}. Fix: raise log.retain.hours before the "
                        "next clean on tables you publish; this table can only be published from a copy "
                        "(not yet supported).")
    state = table.state(done).copy() if done >= 0 else TableState()
    operations = FileOperations(table, state)
    written = 0
    for entry in table.commit_log.entries(done, head):
        operations.note(entry)
        actions = _actions(table, entry, state, operations)
        if storage.create_bytes(delta_log.version_file(entry.seq), delta_log.encode(actions)):
            written += 1
            faults.reach("mid_publish")  # a version is written, the ones after it are not
        else:
            log.info("Delta version %d of %s was published by another writer", entry.seq, table.url)
    seconds = time.monotonic() - started
    if written:
        log.info("published %d Delta version(s) of %s up to %d in %.3f s", written, table.url, head, seconds)
    return DeltaPublished(head, written, seconds)


def _check_ours(table: TableMetadata, version: int) -> None:
    """Version `version` of the Delta log must publish our entry `version` (it names the same instant): a
    `_delta_log/` this table did not write (left by a table that was deleted without it, or a Delta table's own) is
    never taken for ours nor continued, where other engines would read the other table's rows."""
    rel = delta_log.version_file(version)
    try:
        first = json.loads(table.storage.read_bytes(rel).split(b"\n", 1)[0])
        instant = first["commitInfo"]["airflowLake"]["instant"]
    except (KeyError, TypeError, ValueError):
        instant = None
    ours = table.commit_log.read(version).instant
    if instant != ours:
        raise LakeError(f"{table.url}: the Delta log there is not this table's: its version {version} "
                        f"{'publishes instant ' + repr(instant) if instant else 'was not written by airflow-lake'}, "
                        f"our log entry {version} is instant {ours!r} (a `_delta_log` left by a table deleted without "
                        "it, or another Delta table's). Other engines read that log, not this table. Fix: check "
                        f"what it is, move `{table.url.rstrip('/')}/{delta_log.DELTA_LOG}` away, then run "
                        f"`airflow-lake publish {table.url}`.")


def _actions(table: TableMetadata, entry: LogEntry, state: TableState, operations: FileOperations
             ) -> list[dict[str, Any]]:
    """The actions of `entry`'s version; folds `entry` into `state`."""
    before_spec = stored_spec(state.spec) if state.spec else None
    removed = [state.files[p] for p in entry.removed if p in state.files]
    state.apply(entry)
    spec = stored_spec(state.spec)
    completed_ms = int(entry.completed_at * 1000)
    actions: list[dict[str, Any]] = [{"commitInfo": _commit_info(entry, completed_ms)}]
    if entry.seq == 0 or "spec" in entry.metadata:
        mapping = delta_schema.needs_mapping(spec)
        first = table.commit_log.read(0) if entry.seq else entry
        uuid = delta_schema.table_uuid(state.table_id, first.instant)
        actions.append({"protocol": delta_schema.protocol(spec, mapping)})
        actions.append({"metaData": delta_schema.metadata(spec, mapping, uuid, int(first.completed_at * 1000),
                                                          table.url.rstrip("/").rsplit("/", 1)[-1])})
    data_change = entry.operation not in LAYOUT_ONLY
    old_spec = before_spec or spec
    for data_file in removed:
        # a file whose writing entry has expired from our log (`clean`) may have been published: remove it anyway (a
        # remove of a file never added is nothing to a reader; a missing one would show its rows beside the new)
        if visible(data_file, old_spec, operations) or operations(data_file) is None:
            actions.append(delta_actions.remove(data_file, old_spec, completed_ms, data_change))
    for data_file in entry.added:
        if visible(data_file, spec, operations):
            actions.append(delta_actions.add(data_file, spec, completed_ms, data_change))
    return actions


def _commit_info(entry: LogEntry, completed_ms: int) -> dict[str, Any]:
    # `txnId` (as Delta's writers record one) makes each publisher's bytes its own: a store's create whose answer
    # was lost is judged by reading the key back (`stores.create`), and two publishers' identical bytes would each
    # count as their own
    return {"timestamp": completed_ms, "operation": entry.operation.upper(), "operationParameters": {},
            "engineInfo": ENGINE, "isBlindAppend": False, "txnId": str(uuid.uuid4()),
            "airflowLake": {"seq": entry.seq, "instant": entry.instant, "action": entry.action,
                            "operation": entry.operation}}

