"""Instants: one action of one writer, requested -> inflight -> completed (or rolled back).

Pending instants live as small files under `_lake/pending/`; a completed or rolled-back instant is
an entry of the commit log, and its pending files are then mere leftovers.

Every requested instant has a writer at work on it, except the plans `schedule_clustering` stores (operation
`PLAN_OPERATION`): those wait, requested, for an executor, and only they are kept when their writer is gone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.format import commit_info, paths
from airflow_lake.lake.format.log import uncarried
from airflow_lake.lake.format.storage import Storage

log = logging.getLogger(__name__)
REQUESTED, INFLIGHT, COMPLETED, ROLLED_BACK = "requested", "inflight", "completed", "rolled_back"
ID_LENGTH = 17  # yyyyMMddHHmmssSSS, as Hudi
# A requested instant of this operation is a stored clustering plan, not a writer's reservation. Told apart by
# the operation its writer recorded, never by the action alone: executions, bucket rewrites and compactions
# are `replace` instants too, and one that died before going inflight is debris like any other.
PLAN_OPERATION = "schedule_clustering"


@dataclass(frozen=True)
class Instant:
    """One instant as the timeline shows it."""

    id: str
    action: str
    state: str
    operation: str = ""
    seq: int | None = None  # position in the commit log, once completed or rolled back
    started_at: float | None = None
    completed_at: float | None = None
    request_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "id": self.id,
            "action": self.action,
            "state": self.state,
            "operation": self.operation,
            "seq": self.seq,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "request_id": self.request_id,
            "metadata": dict(self.metadata),
            "metrics": dict(self.metrics),
        }


def format_id(millis: int) -> str:
    """The instant id of a UNIX time in milliseconds."""
    stamp = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    return stamp.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def id_millis(instant: str) -> int:
    """Inverse of `format_id`."""
    stamp = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
    return int(stamp.timestamp()) * 1000 + int(instant[14:17])


def is_instant_id(text: str) -> bool:
    """True if `text` looks like an instant id."""
    return len(text) == ID_LENGTH and text.isascii() and text.isdigit()


def requested_file(instant: str) -> str:
    """Pending file of a requested instant."""
    return f"{paths.PENDING}/{instant}.requested.json"


def inflight_file(instant: str) -> str:
    """Pending file of an inflight instant."""
    return f"{paths.PENDING}/{instant}.inflight.json"


def heartbeat_file(instant: str) -> str:
    """Heartbeat of an inflight instant's writer."""
    return f"{paths.HEARTBEATS}/{instant}"


def markers_dir(instant: str) -> str:
    """Markers of the data files an instant placed in the table: manifests (and, from older writers, one
    empty marker per file)."""
    return f"{paths.MARKERS}/{instant}"


STAGING = f"{paths.META}/staging"


def staging_dir(instant: str) -> str:
    """Where Spark writes an instant's files before the instant places them in the table (private to it)."""
    return f"{STAGING}/{instant}"


MANIFEST_SUFFIX = ".manifest.json"


def write_manifest(storage: Storage, instant: str, data_paths: list[str]) -> None:
    """Name the table paths an instant is about to write files at (a directory: ending in `/`), before it does."""
    storage.write_json(f"{markers_dir(instant)}/{uuid.uuid4().hex}{MANIFEST_SUFFIX}", data_paths)


def marker_files(storage: Storage, instant: str) -> list[str]:
    """The files under an instant's markers directory (one listing), for `written_files` and `remove_pending` to
    share."""
    return storage.walk_files(markers_dir(instant))


def written_files(storage: Storage, instant: str, markers: Sequence[str] | None = None) -> set[str]:
    """Every table path an instant announced (manifests, and per-file markers of older writers); a path ending in
    `/` is a write directory, standing for every file under it. `markers`: its `marker_files` if the caller listed
    them already.

    Every path is checked (`paths.confined`: inside the table's data area) before the caller deletes anything: a
    manifest or marker naming any other path raises `LakeUnsafePath` naming that file."""
    prefix = markers_dir(instant) + "/"
    out: set[str] = set()
    for marker in marker_files(storage, instant) if markers is None else markers:
        if marker.endswith(MANIFEST_SUFFIX):
            try:
                raw = storage.read_json(marker)
            except (FileNotFoundError, ValueError):  # a manifest is complete or absent: it is replaced atomically
                continue
            out.update(paths.confined(raw if isinstance(raw, list) else [raw], f"manifest {storage.url}/{marker}",
                                      directories=True))
        else:
            named = marker[len(prefix):] if marker.startswith(prefix) else marker
            out.update(paths.confined((named,), f"marker {storage.url}/{marker}"))
    return out


def request(storage: Storage, action: str, operation: str, metadata: Mapping[str, Any],
            request_id: str | None, *, not_before: str | None,
            finished: Callable[[str], bool] | None) -> str:
    """Reserve a new unique instant id by exclusively creating its requested file.

    A finished instant has no pending files any more, so `finished` (asked after the create, when its
    log entry is surely visible) tells whether the id is already in the log and must not be reused, and
    `not_before` (the newest completed instant the caller knows) keeps ids increasing. Both are required:
    without them an id taken in the same millisecond as the last commit could be reused. `finished` looks at
    the log as it is now, even inside a `log.carrying` section: the create proves nothing about a carried head.
    """
    millis = int(time.time() * 1000)
    if not_before is not None:
        millis = max(millis, id_millis(not_before) + 1)
    while True:
        instant = format_id(millis)
        payload = {
            "instant": instant,
            "action": action,
            "operation": operation,
            "requested_at": time.time(),
            "request_id": request_id,
            "metadata": commit_info.stamp(metadata),  # a pending plan or write shows who holds it
            # who reserved it: a writer that dies before going inflight is then known dead at once
            "host": socket.gethostname(),
            "pid": os.getpid(),
            # unique to this reservation: a create whose answer was lost finds these bytes and knows the id is its
            # own (`stores.create`); two writers' payloads never compare equal, even in one process and millisecond
            "nonce": uuid.uuid4().hex,
        }
        if storage.create_json(requested_file(instant), payload):
            if finished is None:
                return instant
            with uncarried():
                taken = finished(instant)
            if not taken:
                return instant
            storage.delete(requested_file(instant))  # the id of a completed or rolled-back instant
        millis += 1


def mark_inflight(storage: Storage, instant: str, base_seq: int) -> None:
    """Record that a writer started working on an instant (who, from which snapshot), and its first heartbeat
    (`Heartbeat.start` beats next after one interval)."""
    storage.write_json(
        inflight_file(instant),
        {"instant": instant, "base_seq": base_seq, "started_at": time.time(),
         "host": socket.gethostname(), "pid": os.getpid()},
    )
    storage.touch(heartbeat_file(instant))


@dataclass(frozen=True)
class PendingInstant:
    """An instant with pending files and no log entry (yet, or because its writer died)."""

    id: str
    action: str
    operation: str
    inflight: bool
    requested_at: float
    request_id: str | None
    metadata: Mapping[str, Any]
    base_seq: int | None
    last_beat: float  # last sign of life: heartbeat, else the newest pending file
    host: str | None = None  # where its writer runs (from the inflight file, else the requested one)
    pid: int | None = None

    @property
    def is_plan(self) -> bool:
        """A clustering plan waiting for an executor (never debris, whoever wrote it)."""
        return not self.inflight and self.operation == PLAN_OPERATION

    def writer_gone(self) -> bool:
        """True if the writer ran on this host and its process no longer exists (so it died for sure,
        whatever its last heartbeat says). Another host's writer is judged by its heartbeat alone; a plan
        has no writer left to lose."""
        if self.is_plan or self.pid is None or self.host != socket.gethostname():
            return False
        return not process_alive(self.pid)


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (a zombie — dead, not yet reaped by its parent — does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (owned by someone else)
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:  # no /proc (not Linux): trust the signal check
        return True


def pending(storage: Storage, only: Collection[str] | None = None) -> list[PendingInstant]:
    """All instants that have pending files, oldest first (`only`: of these ids alone; the others' files are not
    read).

    A pending file that cannot be read (cut short, not JSON, a wrong shape) does not stop anyone: its
    instant is listed with action "unknown", ages like any other and is rolled back once its last beat is
    older than the heartbeat timeout. Files in `_lake/pending/` whose name is no instant id are ignored.
    """
    names = storage.list_dir(paths.PENDING)
    out = []
    for instant in _pending_ids(names):
        if only is not None and instant not in only:
            continue
        try:
            req = _read_pending(storage, requested_file(instant))
            # after the read: a finished instant is skipped
            beats = [_written_at(storage, requested_file(instant), req.get("requested_at"))]
        except FileNotFoundError:
            continue  # finished meanwhile
        has_inflight = f"{instant}.inflight.json" in names
        base_seq = None
        host, pid = _writer(req)
        if has_inflight:
            try:
                inflight = _read_pending(storage, inflight_file(instant))
                beats.append(_written_at(storage, inflight_file(instant), inflight.get("started_at")))
                raw_base = inflight.get("base_seq")
                base_seq = raw_base if isinstance(raw_base, int) and not isinstance(raw_base, bool) else None
                if _writer(inflight)[1] is not None:
                    host, pid = _writer(inflight)
            except FileNotFoundError:
                has_inflight = False
        with contextlib.suppress(FileNotFoundError):
            beats.append(storage.touched_at(heartbeat_file(instant)))
        action = _text(req.get("action"), UNKNOWN)
        metadata = req.get("metadata")
        requested_at = req.get("requested_at")
        out.append(PendingInstant(
            id=instant, action=action, operation=_text(req.get("operation"), action),
            inflight=has_inflight,
            requested_at=float(requested_at) if isinstance(requested_at, int | float) else beats[0],
            request_id=req.get("request_id") if isinstance(req.get("request_id"), str) else None,
            metadata=metadata if isinstance(metadata, Mapping) else {},
            base_seq=base_seq, last_beat=max(beats), host=host, pid=pid,
        ))
    return out


UNKNOWN = "unknown"


def _pending_ids(names: Collection[str]) -> list[str]:
    """The instant ids of the requested files among the names of `_lake/pending/`, oldest first (a stray name is
    warned about and skipped)."""
    out = []
    for instant in sorted({n.split(".", 1)[0] for n in names if n.endswith(".requested.json")}):
        if is_instant_id(instant):
            out.append(instant)
        else:
            log.warning("ignoring %s/%s.requested.json: not an instant id", paths.PENDING, instant)
    return out


@dataclass(frozen=True)
class Sighting:
    """What a reader learnt of a pending instant it judged alive (or a plan): enough to judge it again without
    reading its files while its last beat, a lower bound of the true one (beats only move forward), is within the
    heartbeat timeout and its pending files are the same (`judge`)."""

    inflight: bool
    plan: bool
    host: str | None
    pid: int | None
    last_beat: float


@dataclass(frozen=True)
class Judgement:
    """`judge`'s verdict on the pending instants: finished ones whose writer left files (`leftovers`), unfinished
    ones whose writer is dead (`dead`), and the rest (`alive`, plans included) as seen, oldest first."""

    leftovers: list[str]
    dead: list[str]
    alive: dict[str, Sighting]


def judge(storage: Storage, timeout: float, finished: Callable[[str], bool],
          seen: Mapping[str, Sighting] | None = None, *, now: float | None = None,
          observed: Observations | None = None) -> Judgement:
    """Which pending instants are finished, dead or alive — the decision `recovery.recover` makes from `pending`,
    reading only what decides it.

    Dead: not a plan, and either its writer ran on this host and its process is gone, or its heartbeat stood still
    for `timeout` while this reader watched it, by this reader's own clock (`watch`). Whether to watch is decided by
    the writer's own time stamps (its last beat: the newest of its requested file, inflight file and heartbeat, as
    `pending` takes them): within `timeout` of this reader's clock, it is alive without watching (the common case:
    nothing waits); otherwise it is watched, and a writer whose clock is merely off is seen beating and kept.
    A finished instant's files are not read at all; of the others the inflight file first (its writer, a beat),
    else the requested file, then the other files only while no beat read so far is within `timeout` (one read
    of a live writer's instant, where `pending` takes three). An instant in `seen` (an earlier `alive`) whose beat
    there is still within `timeout` and whose pending files are the same is not read again (a plan: while it is
    not inflight); its process is checked again. `observed`: what this process saw of heartbeats before
    (`watch`), kept by the caller.
    """
    now = time.time() if now is None else now
    names = set(storage.list_dir(paths.PENDING))
    leftovers: list[str] = []
    dead: list[str] = []
    alive: dict[str, Sighting] = {}
    suspects: dict[str, Sighting] = {}
    ids = _pending_ids(names)
    if observed:  # forget the heartbeats of instants no longer pending
        for instant in set(observed) - set(ids):
            observed.pop(instant, None)
    for instant in ids:
        if finished(instant):
            leftovers.append(instant)
            continue
        inflight = f"{instant}.inflight.json" in names
        known = (seen or {}).get(instant)
        if known is None or known.inflight != inflight or (not known.plan and not _fresh(known.last_beat, now,
                                                                                          timeout)):
            known = _sight(storage, instant, inflight, timeout, now)
            if known is None:  # finished meanwhile
                continue
        if known.plan:
            alive[instant] = known
        elif _gone(known.host, known.pid):
            dead.append(instant)
        elif _fresh(known.last_beat, now, timeout):
            alive[instant] = known
        else:
            suspects[instant] = known
    if suspects:
        still = watch(storage, list(suspects), timeout, {} if observed is None else observed)
        for instant, known in suspects.items():
            if instant in still:
                dead.append(instant)
            else:
                log.warning("instant %s looked dead by its writer's own time stamps (last beat %.0f s before this "
                            "reader's clock), but its heartbeat changed: it is alive, and one of the two clocks is "
                            "off by about that much (fix the machines' time sync)", instant, now - known.last_beat)
                alive[instant] = known
    return Judgement(leftovers, sorted(dead), alive)


# what a reader saw of heartbeats: instant -> (its heartbeat's token, None if it had none; when this reader first
# saw that token, by its monotonic clock)
Observations = dict[str, tuple[str | None, float]]


def watch(storage: Storage, ids: Sequence[str], timeout: float, observed: Observations) -> set[str]:
    """The instants of `ids` whose heartbeat did not change for `timeout` seconds while this reader watched it, by
    this reader's monotonic clock (Hudi's heartbeat client judges the same way): never comparing the writer's
    clock with the reader's, so a live writer whose clock runs behind is not taken for dead.

    An instant already in `observed` (this process saw its token before) has been watched since then; the others
    from now. The heartbeat is read every `timeout / 10` seconds (0.05 to 2) until each instant changed or stood
    still for `timeout`: a writer beats at least twice per timeout (`check_heartbeat`), so a live one changes
    within one interval. `observed` is updated (a dead one keeps its entry until it is rolled back).
    """
    start = _monotonic()
    waiting: dict[str, tuple[str | None, float]] = {}
    for instant in ids:
        token = _token(storage, instant)
        known = observed.get(instant)
        if known is not None and known[0] == token:
            waiting[instant] = known
        else:
            waiting[instant] = observed[instant] = (token, start)
    poll = min(2.0, max(0.05, timeout / 10))
    still: set[str] = set()
    while waiting:
        clock = _monotonic()
        for instant, (_, since) in list(waiting.items()):
            if clock - since >= timeout:
                still.add(instant)
                del waiting[instant]
        if not waiting:
            break
        _pause(poll)
        for instant, (token, _since) in list(waiting.items()):
            now_token = _token(storage, instant)
            if now_token != token:
                observed[instant] = (now_token, _monotonic())
                del waiting[instant]
    return still


def _token(storage: Storage, instant: str) -> str | None:
    """The token of an instant's heartbeat (`Storage.touched`); None while it has none (a writer not inflight
    yet: its first beat changes that)."""
    try:
        return storage.touched(heartbeat_file(instant))[1]
    except FileNotFoundError:
        return None


def _fresh(last_beat: float, now: float, timeout: float) -> bool:
    """Whether a writer's last beat, by its own clock, lies within `timeout` of this reader's clock (either way: a
    stamp far in the future is a clock that is off, too)."""
    return abs(now - last_beat) <= timeout


def _monotonic() -> float:
    """This reader's clock for watching heartbeats (a seam for tests that must not wait)."""
    return time.monotonic()


def _pause(seconds: float) -> None:
    """Wait between two looks at watched heartbeats (a seam for tests that must not wait)."""
    time.sleep(seconds)


def _sight(storage: Storage, instant: str, inflight: bool, timeout: float, now: float) -> Sighting | None:
    """Read an unfinished instant's pending files until its verdict is clear (see `judge`); None if it finished
    meanwhile (its requested file is gone)."""
    beats: list[float] = []
    host: str | None = None
    pid: int | None = None
    if inflight:
        try:
            raw = _read_pending(storage, inflight_file(instant))
            beats.append(_written_at(storage, inflight_file(instant), raw.get("started_at")))
            host, pid = _writer(raw)
        except FileNotFoundError:
            inflight = False
    requested: Mapping[str, Any] | None = None
    if not inflight or pid is None:  # a plan is told by its requested file; the writer too, unless inflight names it
        try:
            requested = _read_pending(storage, requested_file(instant))
            beats.append(_written_at(storage, requested_file(instant), requested.get("requested_at")))
        except FileNotFoundError:
            return None
        if pid is None:
            host, pid = _writer(requested)
        action = _text(requested.get("action"), UNKNOWN)
        if not inflight and _text(requested.get("operation"), action) == PLAN_OPERATION:
            return Sighting(False, True, host, pid, max(beats))
    if not _fresh(max(beats), now, timeout) and not _gone(host, pid):
        with contextlib.suppress(FileNotFoundError):
            beats.append(storage.touched_at(heartbeat_file(instant)))
        if not _fresh(max(beats), now, timeout) and requested is None:
            try:
                beats.append(_written_at(storage, requested_file(instant),
                                         _read_pending(storage, requested_file(instant)).get("requested_at")))
            except FileNotFoundError:
                return None
    return Sighting(inflight, False, host, pid, max(beats))


def _gone(host: str | None, pid: int | None) -> bool:
    """`PendingInstant.writer_gone` for a writer that is no plan's."""
    return pid is not None and host == socket.gethostname() and not process_alive(pid)


def _written_at(storage: Storage, rel: str, stamp: Any) -> float:
    """When a pending file was written: its mtime locally; on a store the writer's own time stamp in it (the
    store's LastModified is the server's clock, to the second, while liveness is judged by the reader's clock;
    heartbeats, see `Storage.touched_at`, are read the same way), its LastModified if the stamp is missing."""
    if not storage.local and isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return float(stamp)
    return storage.mtime(rel)


def _writer(raw: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The host and process id a pending file records (None if absent or not well formed)."""
    host, pid = raw.get("host"), raw.get("pid")
    return (host if isinstance(host, str) else None,
            pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None)


def _read_pending(storage: Storage, rel: str) -> Mapping[str, Any]:
    """A pending file's JSON object; {} (and a warning naming the file) if it is damaged."""
    try:
        raw = storage.read_json(rel)
    except ValueError as err:
        log.warning("pending file %s/%s is damaged (%s); its instant is treated as an unknown action, rolled "
                    "back once stale", storage.url, rel, err)
        return {}
    if not isinstance(raw, Mapping):
        log.warning("pending file %s/%s holds no JSON object; treated as damaged", storage.url, rel)
        return {}
    return raw


def _text(value: Any, default: str) -> str:
    return value if isinstance(value, str) and value else default


def remove_pending(storage: Storage, instant: str, *, markers: Sequence[str] | None = None,
                   staging: bool = True) -> None:
    """Delete the staging area, markers, heartbeat and pending files of a finished instant (in that order:
    the requested file goes last, so a crash in between leaves it findable).

    `markers`: its `marker_files` if the caller listed them already (not listed again); `staging=False`: the
    caller deleted the staging area already. On a store the markers, heartbeat and inflight file go in one batch
    delete, then the requested file."""
    if staging:
        storage.delete_tree(staging_dir(instant))
    storage.delete_tree(markers_dir(instant), listed=markers, also=(heartbeat_file(instant), inflight_file(instant)))
    storage.delete(requested_file(instant))
