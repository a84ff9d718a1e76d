"""A commit whose answer was lost is a commit (issue 33, item 4), on a real S3-protocol server (`tests/s3_server.py`).

The server stores the conditional PUT of a log entry, then loses its answer — a 500 InternalError, or a connection
closed without an answer (`ServerControls.lose_answer`). botocore resends the PUT by itself (its retries of 500s and
of dropped connections), the server answers 412 (the key exists: it is ours), and the writer must take that for the
success it is: one commit, 10 rows, no `LakeCommitConflict` — where a caller that retries after a conflict without a
request id (the `LakeTable` API, a user's loop) would otherwise commit the same data twice. A real race (another
writer's entry at that number) is still lost by the writer that came second. The same holds for the other
conditional creates that decide a race: requested instants (the reservation of an instant id) and the clustering
schedule lock.
"""

from __future__ import annotations

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeTable
from airflow_lake.lake.format import paths, stores
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.storage import Storage
from tests.lake.commit.test_commits_stores import leftovers
from tests.lake.lake_core_helpers import append, data_file, make_table
from tests.s3_server import S3Server


def rows(table: LakeTable) -> int:
    return sum(f.rows for f in LakeTable.open(table.url).snapshot().files)


def commit_with_retry(table: LakeTable) -> int:
    """What a caller without a request id does: write 10 rows, and write them again on a retryable conflict.
    Returns the number of attempts."""
    for attempt in range(1, 4):
        try:
            append(table, "a", rows=10)
            return attempt
        except LakeCommitConflict:
            continue
    raise AssertionError("three conflicts in a row")


@pytest.mark.parametrize("how", ["500", "reset"])
def test_a_log_entry_whose_answer_was_lost_is_committed_once(s3_server: S3Server, s3_root: str, how: str) -> None:
    table = make_table(s3_root)
    head = table.commit_log.head()
    key = s3_server.key_of(f"{s3_root}/{paths.log_file(head + 1)}")
    lost = len(s3_server.controls.answers_lost)
    s3_server.controls.lose_answer(key, how)
    mark = s3_server.counter.statuses()

    attempts = commit_with_retry(table)

    assert s3_server.controls.answers_lost[lost:] == [key]  # the PUT landed and its answer was lost ...
    statuses = s3_server.counter.statuses()
    statuses.subtract(mark)
    assert statuses[("PUT", "log", 412)] >= 1  # ... and botocore's resend met the entry
    reopened = LakeTable.open(s3_root)
    commits = [e.operation for e in reopened.commit_log.entries(head) if e.action == "commit"]
    # one attempt (no LakeCommitConflict: the writer knows its entry landed), one commit, 10 rows (not 20)
    assert (attempts, len(commits), rows(table)) == (1, 1, 10)
    assert reopened.commit_log.head() == head + 1  # and nothing else: no rollback of the committed instant
    assert leftovers(reopened) == []  # the commit tidied up as any other


def test_another_writers_entry_at_that_number_is_still_a_lost_race(s3_server: S3Server, s3_root: str) -> None:
    """The read-back compares exactly: another writer's entry (another instant) is no success of ours."""
    table = make_table(s3_root)
    rival = LakeTable.open(s3_root)
    head = table.commit_log.head()
    txn = table.begin("replace", "rewrite")  # a replace of nothing it read: it retries at the next number
    rival_entry, _ = append(rival, "a", rows=7)  # takes head + 1 first
    assert rival_entry.seq == head + 1
    entry = txn.commit(added=[data_file(txn, "a", rows=10)])
    assert entry.seq == head + 2  # this writer saw the number taken, and appended after it
    reopened = LakeTable.open(s3_root)
    assert [e.instant for e in reopened.commit_log.entries(head)] == [rival_entry.instant, txn.instant]
    assert rows(table) == 17


def test_a_conditional_create_reads_back_what_it_wrote(s3_server: S3Server, s3_root: str) -> None:
    """The store layer itself, for every conditional create (log entries, requested instants, locks): our bytes
    after a lost answer are a success; other bytes under the key are not; a fresh key is created."""
    storage = Storage(s3_root)
    fs, root = stores.open_fs(s3_root)
    key = f"{root}/_lake/locks/x.json"
    lost = len(s3_server.controls.answers_lost)
    s3_server.controls.lose_answer(s3_server.key_of(f"{s3_root}/_lake/locks/x.json"))
    assert storage.create_bytes("_lake/locks/x.json", b'{"writer":"a"}') is True
    assert len(s3_server.controls.answers_lost) == lost + 1  # the answer really was lost
    assert storage.create_bytes("_lake/locks/x.json", b'{"writer":"b"}') is False  # another writer's create
    assert storage.create_bytes("_lake/locks/x.json", b'{"writer":"a"}') is True  # our bytes: ours (an exact match)
    assert fs.cat_file(key) == b'{"writer":"a"}'


def test_a_reservation_whose_answer_was_lost_is_the_writers(s3_server: S3Server, s3_root: str) -> None:
    """The requested file that reserves an instant id: a lost answer must not make the writer reserve another id
    and leave the first one pending (a reservation nobody holds, which would look alive while this process runs)."""
    table = make_table(s3_root)
    head = table.commit_log.head()
    lost = len(s3_server.controls.answers_lost)
    s3_server.controls.lose_answer(s3_server.key_of(f"{s3_root}/{paths.PENDING}/"))
    entry, _ = append(table, "a", rows=10)
    reserved = s3_server.controls.answers_lost[lost:]
    assert [k.rsplit("/", 1)[-1] for k in reserved] == [f"{entry.instant}.requested.json"]  # the id it reserved
    reopened = LakeTable.open(s3_root)
    assert reopened.commit_log.head() == head + 1 and rows(table) == 10
    assert leftovers(reopened) == []


def test_a_rival_entry_landing_between_check_and_create_is_still_a_conflict(s3_server: S3Server,
                                                                             s3_root: str) -> None:
    """Two replaces of one file: the rival's entry lands at the very number this writer creates (made to happen
    between its conflict check and its conditional PUT). The 412 is read back, the bytes are the rival's: a lost
    race, then the retryable conflict — never a success, never a second entry."""
    table = make_table(s3_root)
    _, (shared,) = append(table, "a", rows=10)
    rival = LakeTable.open(s3_root)
    rival_txn = rival.begin("replace", "rewrite")
    txn = table.begin("replace", "rewrite")
    head = table.commit_log.head()
    original = table.commit_log.try_append
    statuses = s3_server.counter.statuses()

    def rival_first(entry: LogEntry) -> bool:
        del table.commit_log.try_append  # later attempts: the method itself
        rival_txn.commit(added=[data_file(rival_txn, "a", rows=10)], removed=[shared.path])  # lands at head + 1
        assert entry.seq == head + 1
        return original(entry)

    table.commit_log.try_append = rival_first  # type: ignore[method-assign]
    with pytest.raises(LakeCommitConflict, match="replaced 1 file"):
        txn.commit(added=[data_file(txn, "a", rows=10)], removed=[shared.path])
    txn.abort()
    now = s3_server.counter.statuses()
    now.subtract(statuses)
    assert now[("PUT", "log", 412)] == 1  # the create did meet the rival's entry
    reopened = LakeTable.open(s3_root)
    assert [e.instant for e in reopened.commit_log.entries(head) if e.action != "rollback"] == [rival_txn.instant]
    assert rows(reopened) == 10  # the rival's rewrite of the 10 rows, once
