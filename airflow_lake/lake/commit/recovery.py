"""Rolling back instants whose writer died or gave up, and removing what they left behind.

A rollback is itself a log entry naming the instants it rolls back, appended *before* any file is
deleted. A writer that was only slow and later tries to complete finds that entry among the ones
completed since it started and aborts, so a live commit can never lose its files.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.log import COMPLETES, LogEntry, LogEntryExpired
from airflow_lake.lake.format.snapshots import TableState
from airflow_lake.lake.format.storage import Storage

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
# per Storage: the pending instants its last `recover` judged alive, so the next one (this writer's next begin)
# does not read their files again while their beats are fresh (`instants.judge`)
_SEEN: weakref.WeakKeyDictionary[Storage, dict[str, instants.Sighting]] = weakref.WeakKeyDictionary()
# per Storage: the heartbeats this process watched and when it first saw their tokens (`instants.watch`), so a
# later recover in this process goes on from there instead of watching again from the start
_OBSERVED: weakref.WeakKeyDictionary[Storage, instants.Observations] = weakref.WeakKeyDictionary()
_SEEN_LOCK = threading.Lock()


def delete_written_files(table: TableMetadata, instant: str, keep: Collection[str] = (), *,
                         markers: Sequence[str] | None = None, written: set[str] | None = None) -> int:
    """Delete the data files an instant wrote, except `keep` (what its commit holds): its staging area (older
    writers), every file under the write directories its manifests name and every file they name (`markers`: its
    `instants.marker_files`, if the caller listed them already; `written`: `to_delete`'s answer, if the caller
    checked them already).

    Nothing is deleted unless every path is safe (`to_delete`): a manifest naming a path outside the table's data
    area, or one reaching outside through a symlink, raises `LakeUnsafePath` naming it first."""
    storage = table.storage
    if written is None:
        written = to_delete(table, instant, markers)
    storage.delete_tree(instants.staging_dir(instant))
    kept = set(keep)
    deleted = 0
    for data_path in sorted(written - kept):
        if data_path.endswith("/"):  # a write directory (data/<instant>-<write id>...): every file under it
            # and, on S3, the directory markers Hadoop's S3A left there (its own, its committer's): those above a
            # kept file stay with it
            listed = storage.walk_files(data_path[:-1], markers=True)
            above_kept = {d for f in kept for d in paths.parent_dirs(f)}
            doomed = [f for f in listed if f not in kept and f not in above_kept]
            if len(doomed) == len(listed):
                storage.delete_tree(data_path[:-1], listed=listed)
            else:
                for rel in doomed:
                    storage.delete(rel)
            deleted += sum(1 for f in doomed if not f.endswith("/"))
        elif storage.delete(data_path):
            deleted += 1
    return deleted


def to_delete(table: TableMetadata, instant: str, markers: Sequence[str] | None = None) -> set[str]:
    """The table paths an instant's manifests and markers name (`instants.written_files`: each inside the data
    area), and none of them reaching outside the table through a symlink (`Storage.refuse_escapes`); raises
    `LakeUnsafePath` naming the manifest otherwise. Checked for all before anything is deleted."""
    written = instants.written_files(table.storage, instant, markers)
    table.storage.refuse_escapes([instants.staging_dir(instant) + "/", *written],
                                 f"the manifests of instant {instant} in {table.url}")
    return written


def tidy_finished(table: TableMetadata, instant: str, state: TableState) -> None:
    """Remove what a finished instant left: files it wrote but did not commit, then its pending files."""
    seq = state.instants.get(instant)
    if seq is not None:
        try:
            kept = {f.path for f in table.commit_log.read(seq).added}
        except LogEntryExpired:  # finished long ago; what it committed is unknown: orphan removal takes the rest
            log.info("instant %s of %s left pending files; its log entry expired, so only those are removed",
                     instant, table.url)
        else:
            finish(table, instant, keep=kept)
            return
    elif instant in state.rolled_back:
        finish(table, instant)
        return
    instants.remove_pending(table.storage, instant)


def finish(table: TableMetadata, instant: str, keep: Collection[str] = ()) -> int:
    """`delete_written_files`, then `instants.remove_pending`, listing the staging area and the markers once
    (not once each); returns the number of data files deleted."""
    markers = instants.marker_files(table.storage, instant)
    deleted = delete_written_files(table, instant, keep, markers=markers, written=to_delete(table, instant, markers))
    instants.remove_pending(table.storage, instant, markers=markers, staging=False)
    return deleted


def tidy_if_left(table: TableMetadata, entry: LogEntry) -> None:
    """Tidy what the writer of `entry` left if it died after the entry landed — its pending files, heartbeat,
    markers, staging, and those of the plan the entry completes: called where a job finds its request
    already committed, so a retry leaves nothing behind for the next writer. Never raises: the commit
    stands either way."""
    completes = entry.metadata.get(COMPLETES)
    # (only an instant id names pending files: an entry's text never becomes a path of its own)
    instant_ids = [i for i in (entry.instant, completes) if isinstance(i, str) and instants.is_instant_id(i)]
    try:
        left = [i for i in instant_ids if table.storage.is_file(instants.requested_file(i))]
        if not left:  # the requested file goes last (`instants.remove_pending`): nothing else is left either
            return
        state = table.state()
        for instant in left:
            if instant in state.instants or instant in state.rolled_back:
                log.info("instant %s is finished; removing what its writer left", instant)
                tidy_finished(table, instant, state)
    except Exception:
        log.warning("tidying the leftovers of instants %s failed (the next writer retries)", instant_ids,
                    exc_info=True)


def rollback_unchecked(table: TableMetadata, ids: Iterable[str], reason: str,
                       request_id: str | None = None) -> LogEntry | None:
    """Roll back unfinished instants (no liveness check: callers decide they are dead)."""
    todo = list(dict.fromkeys(ids))
    state = table.state()
    finished = [i for i in todo if i in state.instants or i in state.rolled_back]
    todo = [i for i in todo if i not in finished]
    entry = None
    # every path the writers' manifests name is checked before the rollback is recorded and anything deleted: a
    # damaged or planted manifest stops here (`LakeUnsafePath` naming it), with nothing recorded or deleted
    for instant in todo:
        to_delete(table, instant)
    if todo:
        info = {p.id: {"action": p.action, "operation": p.operation, "request_id": p.request_id}
                for p in instants.pending(table.storage, only=set(todo))}

        def still_todo(since: list[LogEntry]) -> bool:
            done = {e.instant for e in since} | {i for e in since for i in e.rolled_back}
            todo[:] = [i for i in todo if i not in done]
            return bool(todo)

        entry = table.append_entry("rollback", "rollback_pending", rolled_back=todo, precheck=still_todo,
                                   metadata={"reason": reason, "instants": info},
                                   request_id=request_id, base=state,
                                   metrics_of=lambda: {"rolled_back": list(todo)})
    files_deleted = 0
    for instant in todo:  # (listed again: a writer judged dead may have named more since the check)
        files_deleted += delete_written_files(table, instant)
        instants.remove_pending(table.storage, instant)
    for instant in finished:
        tidy_finished(table, instant, state)
    if todo:
        log.info("rolled back instants %s (%s): %d file(s) deleted", todo, reason, files_deleted)
    return entry


def recover(table: TableMetadata, timeout: float | None = None, request_id: str | None = None) -> LogEntry | None:
    """Roll back every unfinished instant whose writer is dead: its heartbeat did not change for `timeout` seconds
    while this process watched it (only instants whose writer's own time stamps look stale are watched:
    `instants.judge`), or its process gone from this host.

    Clustering plans (requested instants of `instants.PLAN_OPERATION`) wait to be executed: they are not
    debris and are kept. Every other requested instant is a writer's reservation — one that died before
    going inflight (an execution, bucket rewrite or compaction too, though their action is `replace`) is
    rolled back like any dead writer.
    """
    limit = table.spec.float_property("heartbeat.timeout.seconds") if timeout is None else timeout
    state = table.state()
    storage = table.storage
    with _SEEN_LOCK:
        seen = _SEEN.get(storage)
        observed = _OBSERVED.setdefault(storage, {})
    judged = instants.judge(storage, limit, lambda i: i in state.instants or i in state.rolled_back, seen,
                            observed=observed)
    with _SEEN_LOCK:
        _SEEN[storage] = judged.alive
    dead = judged.dead
    for instant in judged.leftovers:  # finished instants whose writer died before tidying up
        tidy_finished(table, instant, state)
    if not dead:
        return None
    log.info("instants %s have no heartbeat for over %.0f s: rolling them back", dead, limit)
    return rollback_unchecked(table, dead, reason=f"writer dead (no heartbeat for {limit:.0f} s)",
                             request_id=request_id)


def rollback(table: TableMetadata, ids: Iterable[str], request_id: str | None = None) -> LogEntry | None:
    """Roll back the named pending instants; refuse completed ones and ones whose writer is alive (judged as
    `recover` judges: a writer whose stamps look stale is watched, and refused if its heartbeat changes)."""
    limit = table.spec.float_property("heartbeat.timeout.seconds")
    ids = list(ids)
    pending = {p.id: p for p in instants.pending(table.storage)}
    state = table.state()
    now = time.time()
    watched = []
    for instant in ids:
        if instant in state.rolled_back:
            continue
        if instant in state.instants:
            raise LakeError(f"instant {instant} is completed; only pending instants can be rolled back. "
                            "Fix: to undo its data, overwrite the affected partitions.")
        item = pending.get(instant)
        if item is None:
            raise LakeError(f"instant {instant} is not pending on this table. Fix: pick one from "
                            "`airflow-lake timeline`.")
        if item.is_plan or item.writer_gone():
            continue
        if abs(now - item.last_beat) <= limit:
            raise LakeError(f"instant {instant} is alive (heartbeat {now - item.last_beat:.0f} s ago, timeout "
                            f"{limit:.0f} s); a live writer is never rolled back. Fix: stop its job or wait.")
        watched.append(instant)
    if watched:
        with _SEEN_LOCK:
            observed = _OBSERVED.setdefault(table.storage, {})
        beating = set(watched) - instants.watch(table.storage, watched, limit, observed)
        if beating:
            raise LakeError(f"instant(s) {sorted(beating)} are alive: their heartbeat changed while this process "
                            f"watched it (their writer's time stamps are off from this machine's clock); a live "
                            "writer is never rolled back. Fix: stop its job or wait.")
    return rollback_unchecked(table, ids, reason="requested", request_id=request_id)
