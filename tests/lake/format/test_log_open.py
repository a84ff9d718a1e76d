"""Opening a log without listing it: the checkpoint pointer names where to start, and only the entries after it
are looked for — by existence checks on local disk, by one listing that starts after it on a store. A missing,
stale or damaged pointer falls back to what works (no Spark)."""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import DataFile, LakeTable
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.log import CommitLog, LogEntry, checkpoint_pointer
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.format.table_metadata import TableMetadata
from tests.lake.lake_core_helpers import make_table

DAYS = 3


def build(path: str, commits: int, *, interval: int = 10, keep: int = 2, hours_apart: float = 0.0,
          properties: dict[str, str] | None = None,
          special: Callable[[TableMetadata, int], dict[str, Any] | None] | None = None) -> LakeTable:
    """A table of `commits` appends of one described file each (no Spark, no files on disk), a checkpoint every
    `interval` entries as writers make them. With `hours_apart`, entry i completed (commits - i) * hours_apart
    hours ago (entry 0 too: it is rewritten), so log retention can be tested with the real clock. `special(table,
    seq)` may give other fields for entry `seq`."""
    table = make_table(path, {"checkpoint.interval": str(interval), "checkpoint.retain.count": str(keep),
                              **(properties or {})})
    now = time.time()

    def completed(seq: int) -> float:
        return now - (commits - seq) * hours_apart * 3600 if hours_apart else time.time()

    first = table.commit_log.read(0)
    raw = first.to_dict()
    raw["started_at"] = raw["completed_at"] = completed(0)
    table.storage.write_json(paths.log_file(0), raw)  # (a fixture: the create, as if made back then)
    table = LakeTable(path)
    base = instants.id_millis(first.instant)
    for seq in range(1, commits + 1):
        append_entry(table, seq, base, completed(seq), **((special(table, seq) if special else None) or {}))
    return LakeTable(path)


def append_entry(table: TableMetadata, seq: int, base_millis: int, completed_at: float, **fields: Any) -> LogEntry:
    """Log entry `seq`: one file appended to one of `DAYS` days, completed at `completed_at` (`fields`: other
    fields of the entry); then the checkpoint a writer makes."""
    instant = instants.format_id(base_millis + seq)
    day = f"2024-01-{seq % DAYS + 1:02d}"
    added = DataFile(f"dt={day}/part-{instant}-00000.parquet", {"dt": day}, 10, 100, instant=instant)
    entry = LogEntry(**{"seq": seq, "instant": instant, "action": "commit", "operation": "write",
                        "started_at": completed_at, "completed_at": completed_at, "base_seq": seq - 1,
                        "added": (added,), "metrics": {"files_added": 1, "rows_added": 10}, **fields})
    assert table.commit_log.try_append(entry), f"entry {seq} exists"
    table.after_commit(entry)
    return entry


@contextmanager
def counted(storage: Storage) -> Iterator[collections.Counter[tuple[str, str]]]:
    """Count the storage calls made within (per method and the folder they address); they still run."""
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    originals: dict[str, Callable[..., Any]] = {}
    for name in ("exists", "read_bytes", "list_dir", "list_after"):
        original = getattr(storage, name)
        originals[name] = original

        def spy(rel: str, *args: Any, _name: str = name, _original: Callable[..., Any] = original) -> Any:
            calls[(_name, rel.rsplit("/", 1)[0] if _name in ("exists", "read_bytes") else rel)] += 1
            return _original(rel, *args)

        setattr(storage, name, spy)
    try:
        yield calls
    finally:
        for name in originals:
            delattr(storage, name)


def live(table: TableMetadata) -> set[str]:
    return set(table.state().files)


def test_opening_reads_the_pointer_and_probes_only_after_it(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    build(path, 57)
    assert checkpoint_pointer(Storage(path)) == (50, "parquet")
    table = TableMetadata(path)
    with counted(table.storage) as calls:
        assert table.commit_log.head() == 57
        state = table.state()
    assert state.seq == 57 and len(state.files) == 57
    assert not [c for c in calls if c[0] in ("list_dir", "list_after")]  # neither the log nor checkpoints listed
    # entry 50 (the pointer's), then 51..58 (58 is not there); resolving probes 58 once more
    assert calls[("exists", paths.LOG)] == 1 + 8 + 1
    assert calls[("read_bytes", paths.LOG)] == 7  # entries 51..57 folded into checkpoint 50
    assert calls[("read_bytes", paths.CHECKPOINTS)] == 1
    # later calls probe forward from the head they know
    append_entry(table, 58, instants.id_millis(table.commit_log.read(0).instant), time.time())
    with counted(table.storage) as calls:
        assert table.commit_log.head() == 58
    assert calls == {("exists", paths.LOG): 1}


def test_a_stray_file_far_ahead_is_not_seen_by_a_log_opened_from_its_pointer(tmp_path: Path) -> None:
    """Proof that the open lists nothing: a listing would take the stray entry for the head."""
    path = str(tmp_path / "t")
    build(path, 23)
    Path(path, paths.log_file(900)).write_text("{}")
    assert TableMetadata(path).commit_log.head() == 23
    os.unlink(Path(path, paths.LAST_CHECKPOINT))  # without the pointer: the listing, as before
    assert TableMetadata(path).commit_log.head() == 900


@pytest.mark.parametrize("pointer", ["missing", "damaged", "not an object", "a bool", "ahead", "stale", "zero",
                                     "legacy json"])
def test_a_missing_stale_or_damaged_pointer_falls_back(tmp_path: Path, pointer: str) -> None:
    path = str(tmp_path / "t")
    build(path, 34, keep=5)
    want = live(TableMetadata(path))
    target = Path(path, paths.LAST_CHECKPOINT)
    if pointer == "missing":
        target.unlink()
    elif pointer == "damaged":
        target.write_text('{"seq": 3')
    elif pointer == "not an object":
        target.write_text("[30]")
    elif pointer == "a bool":
        target.write_text('{"seq": true, "format": "parquet"}')
    elif pointer == "ahead":  # names an entry that does not exist
        target.write_text('{"seq": 99, "format": "parquet"}')
    elif pointer == "stale":  # a crash between a checkpoint and its pointer leaves the one before
        target.write_text('{"seq": 10, "format": "parquet"}')
    elif pointer == "zero":
        target.write_text('{"seq": 0, "format": "parquet"}')
    else:  # written before checkpoints were Parquet: no format
        target.write_text('{"seq": 30}')
    table = TableMetadata(path)
    assert table.commit_log.head() == 34
    assert live(table) == want and table.state().seq == 34
    append_entry(table, 35, instants.id_millis(table.commit_log.read(0).instant), time.time())
    assert TableMetadata(path).commit_log.head() == 35


def test_a_pointer_naming_an_expired_entry_is_not_trusted(tmp_path: Path) -> None:
    """Left stale by a crash, the pointer may name an entry `clean` expired since: probing from it would stop
    there. The entry it names must exist."""
    path = str(tmp_path / "t")
    build(path, 45, keep=5)
    for seq in range(1, 40):  # as a clean would: checkpoint 40 covers them
        os.unlink(Path(path, paths.log_file(seq)))
    Path(path, paths.LAST_CHECKPOINT).write_text('{"seq": 20, "format": "parquet"}')
    table = TableMetadata(path)
    assert table.commit_log.head() == 45
    assert table.commit_log.start() == 40
    assert table.state().seq == 45 and len(table.state().files) == 45


def test_start_finds_where_the_log_begins_after_expiry(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    build(path, 300, interval=100, keep=3)
    log = CommitLog(Storage(path))
    assert log.start() == 0
    for seq in range(1, 200):
        os.unlink(Path(path, paths.log_file(seq)))
    fresh = CommitLog(Storage(path))
    assert fresh.start() == 200
    assert log.start() == 200  # the earlier object too (its remembered start was 1)
    with counted(fresh.storage) as calls:
        assert fresh.start() == 200
    assert calls == {("exists", paths.LOG): 2}  # the head's probe, and the remembered start


def test_the_open_of_a_store_is_one_read_and_one_listing(tmp_path: Path, s3_root: str, s3_server: Any) -> None:
    """On S3: the pointer (one GET) and the entries from the one it names on (one LIST with StartAfter), then the
    checkpoint and the entries after it — whatever the length of the log."""
    path = str(tmp_path / "t")
    build(path, 57)
    local = Storage(path)
    remote = Storage(s3_root)
    for rel in local.walk_files(paths.META):
        remote.write_bytes(rel, local.read_bytes(rel))
    mark = s3_server.counter.mark()
    table = TableMetadata(s3_root)
    assert table.commit_log.head() == 57
    opened = s3_server.counter.since(mark)
    assert opened == {("GET", "last_checkpoint"): 1, ("LIST", "log"): 1}
    state = table.state()
    assert state.seq == 57 and set(state.files) == set(TableMetadata(path).state().files)
    resolved = s3_server.counter.since(mark)
    resolved.subtract(opened)
    resolved = +resolved
    # its checkpoint (named by the pointer the open read: not read again), entries 51..57; and the head's forward
    # probe for entry 58 (an existence check: whatever `Storage.exists` costs on the store)
    probe = {k: v for k, v in resolved.items() if k in (("HEAD", "log"), ("LIST", "log"))}
    assert resolved - collections.Counter(probe) == {("GET", "checkpoints"): 1, ("GET", "log"): 7}
    assert sum(probe.values()) <= 2
