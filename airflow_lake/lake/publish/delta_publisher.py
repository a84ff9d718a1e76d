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
from airflow_lake.lake.format.log import LogEntry, LogEntryExpired
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.publish import delta_actions, delta_checkpoint, delta_log, delta_schema
from airflow_lake.lake.publish.visibility import FileOperations, visible
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

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
    """Write the Delta versions of our entries after the newest published one, up to `upto` (default the head).

    After a commit only its own entry is new: the versions are made from the entries, the spec in force at each
    (`_Specs`) and the latest state (which files a primary-key table shows), never from a state folded again.
    """
    started = time.monotonic()
    storage = table.storage
    head = table.commit_log.head() if upto is None else upto
    done, first_bytes = delta_log.newest(storage, head)
    latest = table.state(head)
    if done >= 0:
        _check_ours(table, done, latest.table_id, first_bytes)
    if done >= head:
        return DeltaPublished(done, 0, time.monotonic() - started)
    # (after a commit only its own entry is new, and it exists: the log's start is looked up only to catch up more)
    start = table.commit_log.start() if done + 1 < head else 0
    if done + 1 < start:  # the entries after `done` have expired: the Delta log starts again at a checkpoint
        at_start = table.state(start)
        _checkpoint(table, at_start, FileOperations(table, at_start))
        log.info("Delta log of %s starts at a checkpoint of version %d: our entries %d to %d have expired",
                 table.url, start, done + 1, start - 1)
        done = start
    operations = FileOperations(table, latest)
    specs = _Specs(table, latest)
    interval = int(table.spec.float_property("checkpoint.interval"))
    written = 0
    for entry in table.commit_log.entries(done, head):
        operations.note(entry)
        actions = _actions(table, entry, specs.at(entry), operations, latest)
        if storage.create_bytes(delta_log.version_file(entry.seq), delta_log.encode(actions)):
            written += 1
            faults.reach("mid_publish")  # a version is written, the ones after it are not
            if entry.seq % interval == 0 and entry.seq > 0:
                state = latest if entry.seq == head else table.state(entry.seq)
                _checkpoint(table, state, FileOperations(table, state))
        else:
            log.info("Delta version %d of %s was published by another writer", entry.seq, table.url)
    seconds = time.monotonic() - started
    if written:
        log.info("published %d Delta version(s) of %s up to %d in %.3f s", written, table.url, head, seconds)
    return DeltaPublished(head, written, seconds)


class _Specs:
    """The spec in force after each entry: the latest state's, unless a later entry changed it (then one log read
    per change, through the state's index of the entries that set the spec)."""

    def __init__(self, table: TableMetadata, latest: TableState) -> None:
        self.table = table
        self.latest = latest
        self.changes = latest.spec_changes
        self.cache: dict[int, TableSpec] = {}

    def at(self, entry: LogEntry) -> TableSpec:
        if "spec" in entry.metadata:
            return stored_spec(entry.metadata["spec"])
        if self.changes is None:  # a state from before the index: fold (rare: old checkpoints)
            return stored_spec(self.table.state(entry.seq).spec)
        setter = max((seq for seq in self.changes if seq <= entry.seq), default=None)
        if setter is None or setter == self.changes[-1]:
            return stored_spec(self.latest.spec)
        if setter not in self.cache:
            self.cache[setter] = stored_spec(self.table.commit_log.read(setter).metadata["spec"])
        return self.cache[setter]


def expire(table: TableMetadata, start: int) -> int:
    """After `clean` expired our entries before `start`: a Delta checkpoint at `start` (if published that far), then
    the versions and checkpoints before it deleted, as Delta's log cleanup does; how many files were deleted."""
    storage = table.storage
    if delta_log.published_upto(storage, start) < start:
        return 0  # not published that far: the next publish starts at a checkpoint (`publish`)
    if not storage.exists(delta_log.checkpoint_file(start)):
        state = table.state(start).copy()
        _checkpoint(table, state, FileOperations(table, state))
    deleted = 0
    for name in storage.list_dir(delta_log.DELTA_LOG):
        version = delta_log.version_of(name)
        if version is not None and version < start:
            deleted += storage.delete(f"{delta_log.DELTA_LOG}/{name}")
    if deleted:
        log.info("Delta log of %s: deleted %d file(s) of versions before %d (our log starts there)", table.url,
                 deleted, start)
    return deleted


def _check_ours(table: TableMetadata, version: int, table_id: str | None, data: bytes | None = None) -> None:
    """Version `version` of the Delta log must publish our entry `version`: a `_delta_log/` this table did not write
    (left by a table that was deleted without it, or a Delta table's own) is never taken for ours nor continued, where
    other engines would read the other table's rows. Judged by the table id every version records (no request to our
    log), or for a table without one by the instant (one log read). A version only a checkpoint holds, or older than
    our log's start, is not checked: its commitInfo or our entry is gone."""
    try:
        raw = table.storage.read_bytes(delta_log.version_file(version)) if data is None else data
    except FileNotFoundError:
        return  # the log starts at a checkpoint there (`delta_checkpoint.py`)
    try:
        info = json.loads(raw.split(b"\n", 1)[0])["commitInfo"]["airflowLake"]
        published = info.get("table") if table_id else info["instant"]
    except (KeyError, TypeError, ValueError, AttributeError):
        info, published = None, None
    if table_id:
        ours: str | None = table_id
    else:
        try:
            ours = table.commit_log.read(version).instant
        except LogEntryExpired:
            return
    if published != ours:
        what, mine = ("table", "id") if table_id else ("instant", "entry")
        found = f"publishes {what} {published!r}" if info else "was not written by airflow-lake"
        raise LakeError(f"{table.url}: the Delta log there is not this table's: its version {version} {found}, this "
                        f"table's {mine} is {ours!r} (a `_delta_log` left by a table deleted without it, or another "
                        "Delta table's). Other engines read that log, not this table. Fix: check what it is, move "
                        f"`{table.url.rstrip('/')}/{delta_log.DELTA_LOG}` away, then run "
                        f"`airflow-lake publish {table.url}`.")


def _table_actions(table: TableMetadata, state: TableState) -> tuple[dict[str, Any], dict[str, Any]]:
    """The protocol and metaData of the table in `state`."""
    return _spec_actions(table, stored_spec(state.spec), state.table_id)


def _spec_actions(table: TableMetadata, spec: TableSpec, table_id: str | None
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The protocol and metaData of a table with `spec`."""
    mapping = delta_schema.needs_mapping(spec)
    first = table.commit_log.read(0)
    delta_id = delta_schema.table_uuid(table_id, first.instant)
    return (delta_schema.protocol(spec, mapping),
            delta_schema.metadata(spec, mapping, delta_id, int(first.completed_at * 1000),
                                  table.url.rstrip("/").rsplit("/", 1)[-1]))


def _checkpoint(table: TableMetadata, state: TableState, operations: FileOperations) -> None:
    """A Delta checkpoint of `state` (its version is `state.seq`)."""
    spec = stored_spec(state.spec)
    protocol, metadata = _table_actions(table, state)
    files = [f for f in state.files.values() if visible(f, spec, operations)]
    actions = delta_checkpoint.write(table.storage, state.seq, protocol, metadata, spec, files=files)
    log.info("Delta checkpoint of %s at version %d (%d actions)", table.url, state.seq, actions)


def _actions(table: TableMetadata, entry: LogEntry, spec: TableSpec, operations: FileOperations,
             latest: TableState) -> list[dict[str, Any]]:
    """The actions of `entry`'s version (`spec`: the spec after it). A removed file is named by its path alone: a
    `remove` of a file another engine never saw (a primary-key table's delta file) is a tombstone readers skip."""
    completed_ms = int(entry.completed_at * 1000)
    actions: list[dict[str, Any]] = [{"commitInfo": _commit_info(entry, completed_ms, latest.table_id)}]
    if entry.seq == 0 or "spec" in entry.metadata:
        protocol, metadata = _spec_actions(table, spec, latest.table_id)
        actions += [{"protocol": protocol}, {"metaData": metadata}]
    data_change = entry.operation not in LAYOUT_ONLY
    for path in entry.removed:
        actions.append(delta_actions.remove(path, completed_ms, data_change))
    plan = delta_actions.StatsPlan(spec)
    for data_file in entry.added:
        if visible(data_file, spec, operations):
            actions.append(delta_actions.add(data_file, spec, completed_ms, data_change, plan))
    return actions


def _commit_info(entry: LogEntry, completed_ms: int, table_id: str | None) -> dict[str, Any]:
    # `txnId` (as Delta's writers record one) makes each publisher's bytes its own: a store's create whose answer
    # was lost is judged by reading the key back (`stores.create`), and two publishers' identical bytes would each
    # count as their own
    return {"timestamp": completed_ms, "operation": entry.operation.upper(), "operationParameters": {},
            "engineInfo": ENGINE, "isBlindAppend": False, "txnId": str(uuid.uuid4()),
            "airflowLake": {"seq": entry.seq, "instant": entry.instant, "action": entry.action,
                            "operation": entry.operation, **({"table": table_id} if table_id else {})}}
