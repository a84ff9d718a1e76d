"""Requests per commit and per open on S3 (a real S3-protocol server that counts what it answers,
`tests/s3_server.py`), as upper bounds so a regression fails — and the safety of each saving: a writer resolves the
log's head once per step and carries it (`log.carrying`), so an append at a stale head must fail and land after
the entry it missed, conflicts included; an instant id is never reused although the head is carried; recovery
reads only what decides a pending instant and not again while it is surely alive, yet still rolls back a writer
that died after it was seen alive.

Measured before these savings (the same table and commit; `benchmarks/bench_store_commits.py --before`): an append
or replace commit 22 requests (13 LISTs: 8 of the log looking for its head, staging and markers twice each; the
heartbeat written twice); the open and latest snapshot of a table with a checkpoint 7 + one GET per entry after it
(the pointer read twice, the head looked for three more times).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeTable
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.log import LogEntry, carrying
from airflow_lake.lake.format.storage import Storage
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table
from tests.s3_server import S3Server

QUIET = {"heartbeat.interval.seconds": "60", "heartbeat.timeout.seconds": "120"}  # no beat within a test
Counts = collections.Counter[tuple[str, str]]

# the bounds: an append or replace commit (begin + commit) between checkpoints
COMMIT_MAX = 11
PUBLISH_MAX = 3  # after the commit (`lake/publish/delta_log.newest`): GET the new version (missing), GET the one
# before (present: ours), PUT the new one
COMMIT_LISTS_MAX = 3  # pending (recovery), the instant's staging and its markers: once each
COMMIT_HEAD_LOOKUPS_MAX = 2  # the head at begin, and whether the new instant id is in the log: HEADs of one key
OPEN_FIXED_MAX = 4  # the pointer, one listing after it, the head's probe, the checkpoint; + one GET per entry after


def counted(server: S3Server, action: Callable[[], Any]) -> tuple[Any, Counts]:
    mark = server.counter.mark()
    result = action()
    return result, server.counter.since(mark)


def lists(counts: Counts) -> int:
    return sum(n for (method, _), n in counts.items() if method == "LIST")


def head_lookups(counts: Counts) -> int:
    return sum(n for (method, kind), n in counts.items() if kind == "log" and method in ("HEAD", "LIST"))


def check_commit(counts: Counts) -> None:
    published = collections.Counter({key: n for key, n in counts.items() if key[1] == "delta_log"})
    # publishing the entry as a Delta version: the version and the one before read outright, then one create
    assert sum(published.values()) <= PUBLISH_MAX and published[("PUT", "delta_log")] == 1, published
    counts = collections.Counter({key: n for key, n in counts.items() if key[1] != "delta_log"})
    assert sum(counts.values()) <= COMMIT_MAX, counts
    assert lists(counts) <= COMMIT_LISTS_MAX, counts
    assert head_lookups(counts) <= COMMIT_HEAD_LOOKUPS_MAX, counts
    assert counts[("PUT", "heartbeats")] == 1, counts  # one first beat, not two
    assert counts[("LIST", "staging")] <= 1 and counts[("LIST", "markers")] <= 1, counts
    assert counts[("PUT", "log")] == 1 and counts[("GET", "log")] == 0, counts  # nothing read back
    assert not any(kind == "data" for _, kind in counts), counts


def test_an_append_commit_makes_at_most_eleven_requests(s3_server: S3Server, s3_root: str) -> None:
    table = make_table(s3_root, QUIET)
    for day in ("a", "b", "c"):
        append(table, day)
    (entry, _), counts = counted(s3_server, lambda: append(table, "a"))
    print(f"append commit on S3: {sum(counts.values())} requests {sorted(counts.items())}")
    check_commit(counts)
    assert entry.seq == 4 and table.state().seq == 4  # the resolver folded the entry it wrote, without a read
    fresh = LakeTable(s3_root)
    assert fresh.commit_log.read(4) == table.commit_log.read(4) == entry
    assert fresh.storage.walk_files(paths.PENDING) == [] and fresh.storage.walk_files(paths.HEARTBEATS) == []


def test_a_replace_commit_makes_at_most_eleven_requests(s3_server: S3Server, s3_root: str) -> None:
    table = make_table(s3_root, QUIET)
    _, (old,) = append(table, "a")
    append(table, "b")

    def replace() -> LogEntry:
        txn = table.begin("replace", "cluster")
        return txn.commit(added=[data_file(txn, "a")], removed=[old.path], reads=[old.path])

    entry, counts = counted(s3_server, replace)
    print(f"replace commit on S3: {sum(counts.values())} requests {sorted(counts.items())}")
    check_commit(counts)
    assert old.path not in live_paths(LakeTable(s3_root)) and entry.action == "replace"


def test_a_commit_with_a_request_id_and_staged_files_keeps_the_bound(s3_server: S3Server, s3_root: str) -> None:
    """What a real writer adds: a request id (its idempotency check reads the state begin resolved anyway), a
    manifest and a staged file (listed once, deleted in one batch with the heartbeat and the inflight file)."""
    table = make_table(s3_root, QUIET)
    append(table, "a")

    def write() -> LogEntry:
        txn = table.begin("commit", "write", request_id="job-1")
        item = data_file(txn, "b")
        instants.write_manifest(table.storage, txn.instant, [item.path])
        table.storage.write_bytes(f"{instants.staging_dir(txn.instant)}/part-0.parquet", b"PAR1")
        table.storage.write_bytes(item.path, b"PAR1")
        return txn.commit(added=[item])

    entry, counts = counted(s3_server, write)
    counts.subtract({("PUT", "markers"): 1, ("PUT", "staging"): 1, ("PUT", "data"): 1})  # the writer's own
    counts = +counts
    print(f"commit with a manifest and a staged file: {sum(counts.values())} requests {sorted(counts.items())}")
    own = sum(n for (_, kind), n in counts.items() if kind != "delta_log")  # (publishing: check_commit's bound)
    assert own <= COMMIT_MAX + 2, counts  # + the manifest's read, the staged file's delete
    assert lists(counts) <= COMMIT_LISTS_MAX and head_lookups(counts) <= COMMIT_HEAD_LOOKUPS_MAX, counts
    assert table.storage.walk_files(paths.META) == [paths.log_file(s) for s in range(3)]  # nothing left behind
    assert table.find_request("job-1") == entry


@pytest.mark.parametrize("entries_after", [0, 5])
def test_an_open_and_latest_snapshot_reads_the_pointer_once(s3_server: S3Server, s3_root: str,
                                                            entries_after: int) -> None:
    table = make_table(s3_root, {**QUIET, "checkpoint.interval": "10"})
    for i in range(20 + entries_after):
        append(table, "ab"[i % 2])
    snapshot, counts = counted(s3_server, lambda: LakeTable.open(s3_root).snapshot())
    print(f"open + latest snapshot, {entries_after} entries after the checkpoint: {sum(counts.values())} requests "
          f"{sorted(counts.items())}")
    assert snapshot.seq == 20 + entries_after and len(snapshot.files) == 20 + entries_after
    assert sum(counts.values()) <= OPEN_FIXED_MAX + entries_after, counts
    assert counts[("GET", "last_checkpoint")] == 1 and counts[("GET", "checkpoints")] == 1, counts
    assert counts[("GET", "log")] == entries_after and head_lookups(counts) <= 2, counts


def test_a_stale_carried_head_costs_a_failed_create_never_a_missed_entry(s3_server: S3Server, s3_root: str) -> None:
    """Another writer commits between this writer's begin and its commit: the first append (at the head carried
    from begin) is refused by the store, then the head is looked up, the entry it missed checked, and the commit
    lands after it; had the other entry replaced a file this one read, the commit is refused."""
    table = make_table(s3_root, QUIET)
    _, (shared,) = append(table, "a")
    mine, theirs = table.begin("commit", "write"), LakeTable(s3_root)
    assert theirs.commit_log.head() == 1
    other, _ = append(theirs, "b")  # lands at 2, unseen by `table`
    refused = s3_server.counter.statuses()[("PUT", "log", 412)]
    entry = mine.commit(added=[data_file(mine, "a")])
    assert entry.seq == other.seq + 1 == 3
    assert s3_server.counter.statuses()[("PUT", "log", 412)] == refused + 1  # the carried head's attempt
    assert [e.instant for e in LakeTable(s3_root).commit_log.entries(0)] == [table.commit_log.read(1).instant,
                                                                             other.instant, mine.instant]

    reader = table.begin("replace", "cluster")
    replacer = theirs.begin("replace", "cluster")
    replacer.commit(added=[data_file(replacer, "a")], removed=[shared.path])
    with pytest.raises(LakeCommitConflict):
        reader.commit(added=[data_file(reader, "a")], removed=[shared.path])
    reader.abort()
    assert shared.path not in live_paths(LakeTable(s3_root))


def test_an_instant_id_in_the_log_after_the_carried_head_is_not_reused(s3_root: str) -> None:
    """The id check after a requested file's create looks at the log as it is now, even inside a carrying section:
    an entry that landed after the carried head (here with an id ahead of this clock, as a writer whose clock runs
    ahead makes them) is seen, and its id skipped."""
    table = make_table(s3_root, QUIET)
    append(table, "a")
    assert table.commit_log.head() == 1
    other = LakeTable(s3_root)
    ahead = instants.format_id(int(time.time() * 1000) + 60_000)
    txn = other.begin("commit", "write")
    entry = LogEntry(seq=2, instant=ahead, action="commit", operation="write", started_at=time.time(),
                     completed_at=time.time(), base_seq=1, added=(data_file(txn, "b"),))
    assert other.commit_log.try_append(entry)  # its pending files were never `ahead`'s: none left to clash with
    txn.discard()
    with carrying():
        assert table.commit_log.head() == 1  # carried: entry 2 unseen
        got = instants.request(table.storage, "commit", "write", {}, None,
                               not_before=instants.format_id(instants.id_millis(ahead) - 1),
                               finished=table.is_finished)
    assert got != ahead and instants.id_millis(got) == instants.id_millis(ahead) + 1
    table.storage.delete(instants.requested_file(got))


def test_recovery_reads_a_live_writer_once_and_not_again_while_it_is_surely_alive(s3_server: S3Server,
                                                                                  s3_root: str) -> None:
    table = make_table(s3_root, QUIET)
    other = LakeTable(s3_root)
    alive = other.begin("commit", "write")
    _, first = counted(s3_server, lambda: table.begin("commit", "write").discard())
    assert first[("GET", "pending")] == 1 and first[("GET", "heartbeats")] == 0, first  # its inflight file only
    _, second = counted(s3_server, lambda: table.begin("commit", "write").discard())
    assert second[("GET", "pending")] == 0 and second[("GET", "heartbeats")] == 0, second
    entry = alive.commit(added=[data_file(alive, "a")])
    assert entry.instant == alive.instant and alive.instant not in LakeTable(s3_root).state().rolled_back


def test_a_writer_seen_alive_is_rolled_back_once_its_beat_is_stale(s3_server: S3Server, s3_root: str) -> None:
    """The memory of a live writer lasts only while its last beat seen is within the timeout: a writer that dies
    right after it was seen alive is read again, found dead and rolled back."""
    table = make_table(s3_root, {"heartbeat.interval.seconds": "0.2", "heartbeat.timeout.seconds": "1"})
    other = LakeTable(s3_root)
    doomed = other.begin("commit", "write")
    table.begin("commit", "write").commit(added=[])  # sees `doomed` alive
    doomed._heartbeat.stop()  # dies: no more beats (its process lives on, so only the timeout tells)
    time.sleep(1.5)
    entry, _ = append(table, "b")
    fresh = LakeTable(s3_root)
    [rollback] = [e for e in fresh.commit_log.entries(0) if e.action == "rollback"]
    assert rollback.rolled_back == (doomed.instant,) and rollback.seq < entry.seq
    with pytest.raises(LakeCommitConflict):
        doomed.commit(added=[data_file(doomed, "a")])


def test_a_file_check_on_s3_is_one_head(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    store.write_bytes("_lake/markers/i/m.json", b"[]")
    checks, counts = counted(s3_server, lambda: [store.is_file("_lake/markers/i/m.json"),
                                                  store.is_file("_lake/markers/i"),  # a "directory": no file
                                                  store.is_file("_lake/markers/i/x.json")])
    assert checks == [True, False, False]
    assert counts == {("HEAD", "markers"): 3}
