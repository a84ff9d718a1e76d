"""Orphan removal (`remove_orphan_files`, Iceberg's name; `vacuum` before): delete files under the table root
that no log entry holds (orphans).

`clean` deletes files the log *removed*. Files the log never held are debris nobody else deletes: files of
writers that crashed before recovery existed, of rolled-back instants whose files had no marker, files
dropped into the table directory by hand, and the staging directories of finished instants. The log
decides what is kept; the directory listing only proposes candidates. A subdirectory that holds a `_lake`
of its own is another table's (made by hand, or before `LakeTable.create` refused tables inside tables):
nothing under it is ever deleted, and the result names it (`nested_tables`).

On an object store the same steps run through `Storage`: one paged listing of the table's prefix (never a cached
one; `s3://t` never lists `s3://t2`), and a candidate's age is its LastModified (the store's clock, whole seconds
on S3: an hours-long `older_than_hours` dwarfs both). A file still being uploaded is no object yet (S3 shows a
multipart upload only once it completes), so it is never listed, let alone deleted, and once it is, a pending
writer's file is kept by its name whatever its LastModified says.

Two kinds of S3 debris are no data files and are found too. Hadoop's S3A connector leaves a zero-byte directory
marker (`<dir>/`) for each directory it creates (a write directory, its magic committer's `__magic_job-*/`): a
marker with no kept file under it goes by the same rules as a file. And the magic committer uploads each file as a
multipart upload that only the job's commit completes: a writer killed before leaves uploads that are no objects
(never listed) and whose parts S3 bills until they are aborted. The table's incomplete uploads are listed (one
ListMultipartUploads of its prefix) and those initiated before the cutoff are aborted, except a pending or newer
instant's and another table's, as for files (`uploads` in the result and the metrics).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.format.table_roots import nested_roots
from airflow_lake.lake.maintenance import retention

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)

PATHS_IN_METRICS = 100  # metrics go to XCom and the task log: list at most this many paths
_INSTANT_OF_NAME = re.compile(rf"^part-(\d{{{instants.ID_LENGTH}}})-")
OPERATION = "remove_orphan_files"  # as its log entries record it; "vacuum" in entries written before issue 21


@dataclass(frozen=True)
class OrphanFilesResult:
    """What an orphan removal found and did; `deleted` is False for a dry run or when nothing was found."""

    orphans: tuple[str, ...]  # data files no log entry holds, relative to the table root
    staging: tuple[str, ...]  # staging directories of finished instants
    bytes: int  # total size of both
    deleted: bool
    entry: LogEntry | None  # the `clean` entry that records the deletion
    older_than_hours: float
    dry_run: bool
    nested_tables: tuple[str, ...] = ()  # subdirectories holding another table's `_lake`: left alone
    uploads: tuple[str, ...] = ()  # keys of the incomplete multipart uploads found (S3), one per upload

    def metrics(self) -> dict[str, Any]:
        """Counts and a capped list of the paths; also the metrics stored in the log entry."""
        listed = [*self.orphans, *(f"{d}/" for d in self.staging)]
        return {
            "orphans_found": len(self.orphans),
            "staging_dirs_found": len(self.staging),
            "orphan_bytes": self.bytes,
            "files_deleted": len(self.orphans) if self.deleted else 0,
            "staging_dirs_deleted": len(self.staging) if self.deleted else 0,
            "bytes_freed": self.bytes if self.deleted else 0,
            "dry_run": self.dry_run,
            "older_than_hours": self.older_than_hours,
            "paths": listed[:PATHS_IN_METRICS],
            "paths_truncated": len(listed) > PATHS_IN_METRICS,
            "nested_tables_skipped": list(self.nested_tables[:PATHS_IN_METRICS]),
            "uploads_found": len(self.uploads),
            "uploads_aborted": len(self.uploads) if self.deleted else 0,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the metrics, every path, and the instant and sequence number of the entry."""
        entry = self.entry
        return {**self.metrics(), "orphans": list(self.orphans), "staging": list(self.staging),
                "nested_tables": list(self.nested_tables), "uploads": list(self.uploads),
                "bytes": self.bytes, "deleted": self.deleted,
                "instant": entry.instant if entry else None, "seq": entry.seq if entry else None}


def is_hidden(rel: str) -> bool:
    """True if a segment of `rel` starts with '_' or '.' (Spark's and Hive's rule: `_lake/`, `_SUCCESS`, `.crc`),
    except inside a write directory: everything there is its writer's, Spark's `.crc`, `_SUCCESS` and
    `_temporary` of a writer that died too."""
    parts = rel.split("/")
    if _write_dir_instant(parts) is not None:
        return False
    return any(part.startswith(("_", ".")) for part in parts)


def instant_of(rel: str) -> str | None:
    """The instant that wrote a data file: from its write directory `data/<instant>-<write id>.../`, or from the
    name `part-<instant>-...` of a file written before write directories; None for other paths."""
    written = _write_dir_instant(rel.split("/"))
    if written is not None:
        return written
    match = _INSTANT_OF_NAME.match(rel.rsplit("/", 1)[-1])
    return match.group(1) if match else None


def _write_dir_instant(parts: list[str]) -> str | None:
    if len(parts) < 3 or parts[0] != paths.DATA:
        return None
    instant = parts[1].split("-", 1)[0]
    return instant if instants.is_instant_id(instant) and "-" in parts[1] else None


def remove_orphan_files(table: TableMetadata, older_than_hours: float | None = None, dry_run: bool = False,
                        request_id: str | None = None, now: float | None = None, *,
                        force: bool = False) -> OrphanFilesResult:
    """Delete files under the table root that no log entry holds and that are older than `older_than_hours`.

    Kept: files live in the latest snapshot, removed files not yet cleaned (`clean` deletes those), files
    of pending instants and of instants newer than this call, hidden files, and files modified within
    `older_than_hours` (default: the table property `clean.retain.hours`). Staging directories of instants
    that are no longer pending go too, by the same age rule. Unless `dry_run`, the orphans are deleted and
    one `clean` entry (operation `remove_orphan_files`) records them; nothing found writes no entry.

    An `older_than_hours` shorter than the table's `clean.retain.hours` is refused unless `force`
    (`retention.guard`), except for a dry run, which deletes nothing.
    """
    configured = table.spec.float_property(retention.PROPERTY)
    hours = configured if older_than_hours is None else older_than_hours
    retention.check_hours(hours, "older_than_hours")
    forced = False if dry_run else retention.guard(
        table.url, "older_than_hours", hours, configured, force=force, operation="orphan removal",
        risk="a file younger than that may be one a running writer has written and is about to commit")
    cutoff = (time.time() if now is None else now) - hours * 3600
    # A writer that requests its instant after the pending list below is read is missing from it, and its
    # files are in no snapshot yet. Instant ids follow the clock, so its files carry an id >= `fence`.
    fence = instants.format_id(int(time.time() * 1000))
    # Pending instants BEFORE the state: an instant completing between the two reads is then seen as
    # pending (first read) or as live (second read), never as neither. The other order could miss it in
    # both (not yet completed for the state, no longer pending for the listing) and delete its files.
    pending = {item.id for item in instants.pending(table.storage)}
    state = table.state()
    # An instant in the log is finished, whatever pending files a writer killed past its commit left: the
    # log alone decides which of its files are kept.
    pending = {i for i in pending if i not in state.instants and i not in state.rolled_back}

    def keep_instant(instant: str | None) -> bool:
        return instant is not None and (instant in pending or instant >= fence)

    orphans, size = [], 0
    listed = table.storage.walk_files("", markers=True)
    files = [rel for rel in listed if not rel.endswith("/")]
    other_table = _OtherTables(table.storage, nested_roots(files))

    def candidate(rel: str) -> bool:
        if is_hidden(rel) or rel in state.files or rel in state.tombstones or keep_instant(instant_of(rel)):
            return False
        return not other_table.holds(rel)  # another table's file: its log, not ours, says whether it is live

    for rel in files:
        if not candidate(rel):
            continue
        try:
            if table.storage.mtime(rel) > cutoff:
                continue
            size += table.storage.size(rel)
        except FileNotFoundError:
            continue  # gone meanwhile
        orphans.append(rel)
    # S3A's directory markers: debris once no kept file lies below (a marker of a live directory stays)
    doomed = set(orphans)
    occupied = {d for rel in files if rel not in doomed for d in paths.parent_dirs(rel)}
    for rel in listed:
        if rel.endswith("/") and rel not in occupied and candidate(rel):
            try:
                if table.storage.mtime(rel) > cutoff:
                    continue
            except FileNotFoundError:
                continue
            orphans.append(rel)
    uploads = [u for u in table.storage.incomplete_uploads()
               if u.initiated <= cutoff and candidate(u.rel)]
    staging, staging_size = _finished_staging(table.storage, keep_instant, cutoff)
    nested = tuple(sorted(other_table.roots))
    result = OrphanFilesResult(tuple(orphans), tuple(staging), size + staging_size, deleted=False, entry=None,
                          older_than_hours=hours, dry_run=dry_run, nested_tables=nested,
                          uploads=tuple(u.rel for u in uploads))
    if nested:
        log.warning("orphan removal in %s: %d subdirector(ies) hold a table of their own (%s); nothing under them is "
                    "deleted. Move such tables out of %s: a table never lies inside another.", table.url,
                    len(nested), ", ".join(nested[:10]), table.url)
    if not orphans and not staging and not uploads:
        log.info("orphan removal in %s: no orphans older than %g h", table.url, hours)
        return result
    for rel in [*orphans, *(f"{d}/" for d in staging)][:PATHS_IN_METRICS]:
        log.info("orphan removal in %s: %s %s", table.url, "would delete" if dry_run else "deleting", rel)
    for upload in uploads[:PATHS_IN_METRICS]:
        log.info("orphan removal in %s: %s the incomplete upload of %s (initiated %s)", table.url,
                 "would abort" if dry_run else "aborting", upload.rel, time.ctime(upload.initiated))
    if dry_run:
        log.info("orphan removal in %s (dry run): %d orphan file(s), %d staging dir(s), %d bytes would be deleted, "
                 "%d incomplete upload(s) aborted", table.url, len(orphans), len(staging), result.bytes, len(uploads))
        return result
    for upload in uploads:  # first, then the files: a crash before the entry only leaves work for the next run
        table.storage.abort_upload(upload)
    for rel in orphans:
        table.storage.delete(rel)
    for rel in staging:
        table.storage.delete_tree(rel)
    done = replace(result, deleted=True)
    # Not the metadata key "deleted": the snapshot fold reads it as the tombstones a clean deleted.
    entry = table.append_entry("clean", OPERATION, request_id=request_id,
                               metadata={"orphans": list(orphans), "staging": list(staging),
                                         **({"uploads": list(result.uploads)} if uploads else {}),
                                         "older_than_hours": hours, "cutoff": cutoff,
                                         **({"forced": True} if forced else {})},
                               metrics_of=done.metrics)
    log.info("orphan removal in %s deleted %d orphan file(s) and %d staging dir(s), %d bytes, and aborted %d "
             "incomplete upload(s)", table.url, len(orphans), len(staging), result.bytes, len(uploads))
    return replace(done, entry=entry)


class _OtherTables:
    """Whether a file lies under a subdirectory holding a `_lake` of its own: one found in the listing, or
    (for a table made there since) on disk now, looked up once per directory."""

    def __init__(self, storage: Storage, roots: set[str]) -> None:
        self.storage = storage
        self.roots = set(roots)
        self._checked: dict[str, bool] = {root: True for root in roots}

    def holds(self, rel: str) -> bool:
        parts = rel.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directory = "/".join(parts[:depth])
            if directory not in self._checked:
                self._checked[directory] = self.storage.exists(f"{directory}/{paths.META}")
                if self._checked[directory]:
                    self.roots.add(directory)
            if self._checked[directory]:
                return True
        return False


def _finished_staging(storage: Storage, keep_instant: Callable[[str | None], bool], cutoff: float
                      ) -> tuple[list[str], int]:
    """Staging directories of instants that are no longer pending, untouched since `cutoff`, and their size."""
    found, total = [], 0
    for name in storage.list_dir(instants.STAGING):
        rel = f"{instants.STAGING}/{name}"
        if not instants.is_instant_id(name) or keep_instant(name):
            continue  # not a writer's staging directory, or its writer may still be at work
        try:
            files = storage.walk_files(rel)
            times = [storage.mtime(f) for f in files] or [storage.mtime(rel)]
            if max(times) > cutoff:
                continue
            total += sum(storage.size(f) for f in files)
        except FileNotFoundError:
            continue
        found.append(rel)
    return found, total



# The names before issue 21, kept for code that imports them (docs/api.md, "Names").
VacuumResult = OrphanFilesResult
vacuum = remove_orphan_files
