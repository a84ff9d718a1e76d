"""Our log stays the truth and the Delta log follows it: a publish that fails or is killed (at each step, SIGKILL
at the fault points `before_publish` and `mid_publish`) is caught up, in order, by the next commit or by
`LakeTable.publish()`; two publishers interleaved at the exact step both finish without a gap; 8 writers at once
leave versions 0..head, each naming its own seq. Commits are real (Parquet files written with pyarrow:
`arrow_commits`), so many of them cost little; other engines' reads are delta-rs's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.publish import delta_log, delta_publisher, publisher
from airflow_lake.lake.table import LakeTable
from tests.lake.publish.arrow_commits import commit, delta_rows, make_table, rows
from tests.support import wait_for_file

ROOT = Path(__file__).resolve().parents[3]


def versions(path: str) -> list[int]:
    """The published versions (the numbers of `_delta_log/*.json`)."""
    return sorted(int(p.name.split(".")[0]) for p in Path(path, delta_log.DELTA_LOG).glob("*.json"))


def check_follows_log(table: LakeTable, *, upto: int | None = None) -> None:
    """Versions 0..upto (default our head) exist and no other; each names its own seq and instant; each version's
    rows (delta-rs, time travel) are our snapshot's at that seq."""
    table = LakeTable.open(table.url)
    head = table.commit_log.head() if upto is None else upto
    assert versions(table.url) == list(range(head + 1))
    for version in range(head + 1):
        text = Path(table.url, delta_log.version_file(version)).read_text()
        info = json.loads(text.splitlines()[0])["commitInfo"]["airflowLake"]
        entry = table.commit_log.read(version)
        assert (info["seq"], info["instant"]) == (version, entry.instant)
        assert (version, delta_rows(table.url, version)) == (version, rows(table, as_of=version))


@pytest.fixture
def table(tmp_path: Path) -> LakeTable:
    table = make_table(str(tmp_path / "table"))
    commit(table, [1, 2])
    return table


def fail_publishing(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(table: Any, upto: int | None = None) -> Any:
        raise OSError("the store is unreachable (test)")
    monkeypatch.setattr(delta_publisher, "publish", broken)


def test_a_failed_publish_is_caught_up_by_the_next_commit(table: LakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        fail_publishing(patch)
        commit(table, [3], "b")  # committed: the failed publish does not fail the commit
        commit(table, [4])
    assert table.commit_log.head() == 3 and rows(table) == [(1, "v1", "a"), (2, "v2", "a"), (3, "v3", "b"),
                                                           (4, "v4", "a")]
    assert versions(table.url) == [0, 1]  # nothing beyond what was published before
    assert publisher.status(table).delta_seq == 1
    assert delta_rows(table.url) == rows(table, as_of=1)  # other engines see an older state, never another one
    commit(table, [5], "b")
    check_follows_log(table)


def test_publish_by_hand_catches_up(table: LakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        fail_publishing(patch)
        commit(table, [3], "b")
        commit(table, [4], removed=[table.snapshot().files[0].path])
        with pytest.raises(OSError, match="unreachable"):
            table.publish()  # by hand, what goes wrong is raised
    done = table.publish()
    assert (done.seq, done.delta_seq, done.delta_written) == (3, 3, 2)
    check_follows_log(table)
    again = table.publish()
    assert (again.delta_seq, again.delta_written) == (3, 0)


def test_a_publisher_failing_midway_leaves_whole_versions_in_order(table: LakeTable,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The store fails after the first version of a catch-up of three: that version stays, the others follow."""
    with monkeypatch.context() as patch:
        fail_publishing(patch)
        commit(table, [3], "b")
        commit(table, [4])
    original = Storage.create_bytes
    created: list[str] = []

    def create_then_fail(self: Storage, rel: str, data: bytes) -> bool:
        if rel.startswith(delta_log.DELTA_LOG) and created:
            raise OSError("the store failed (test)")
        done = original(self, rel, data)
        if rel.startswith(delta_log.DELTA_LOG):
            created.append(rel)
        return done

    with monkeypatch.context() as patch:
        patch.setattr(Storage, "create_bytes", create_then_fail)
        commit(table, [5])  # publishes versions 2, 3, 4: only 2 lands
    assert created == [delta_log.version_file(2)]
    check_follows_log(table, upto=2)
    commit(table, [6], "b")
    check_follows_log(table)


def _commit_in_a_process(table: LakeTable, ids: list[int], point: str, flag: Path) -> None:
    """A real commit in a process of its own, stopped at fault point `point` and SIGKILLed there."""
    code = ("import sys; from airflow_lake.lake.table import LakeTable; "
            "from tests.lake.publish.arrow_commits import commit; "
            "commit(LakeTable.open(sys.argv[1]), [int(i) for i in sys.argv[2:]])")
    env = {**os.environ, "AIRFLOW_LAKE_FAULT_POINT": point, "AIRFLOW_LAKE_FAULT_FLAG": str(flag),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code, table.url, *map(str, ids)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_file(flag, proc, timeout=120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def test_sigkill_before_publish(table: LakeTable, tmp_path: Path) -> None:
    _commit_in_a_process(table, [3], "before_publish", tmp_path / "reached")
    table = LakeTable.open(table.url)
    assert table.commit_log.head() == 2 and versions(table.url) == [0, 1]  # landed, not published
    assert delta_rows(table.url) == rows(table, as_of=1)
    commit(table, [4])  # the next commit catches up
    check_follows_log(table)


def test_sigkill_midway_through_a_catch_up(table: LakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        fail_publishing(patch)
        commit(table, [3], "b")
        commit(table, [4])
    _commit_in_a_process(table, [5], "mid_publish", tmp_path / "reached")  # publishes 2, 3, 4: killed after 2
    table = LakeTable.open(table.url)
    assert table.commit_log.head() == 4
    check_follows_log(table, upto=2)  # whole versions only, in order, each one a state of our log
    done = table.publish()
    assert (done.delta_seq, done.delta_written) == (4, 2)
    check_follows_log(table)


def test_two_publishers_interleaved_at_the_exact_step(table: LakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publisher A finds the newest published version, then publisher B writes the next one before A creates it:
    A's create finds it there and A goes on; both finish, the versions in order without a gap."""
    with monkeypatch.context() as patch:
        fail_publishing(patch)
        for ids in ([3], [4], [5]):
            commit(table, ids)
    original = delta_log.published_upto
    interleaved: list[int] = []

    def search_then_other_publisher(storage: Storage, head: int) -> int:
        found = original(storage, head)
        if not interleaved:  # the first search is A's: B publishes the next version (only) right after it
            interleaved.append(found)
            other = delta_publisher.publish(LakeTable.open(table.url), found + 1)
            assert other.written == 1
        return found

    monkeypatch.setattr(delta_log, "published_upto", search_then_other_publisher)
    done = delta_publisher.publish(LakeTable.open(table.url))
    assert interleaved == [1]
    assert (done.version, done.written) == (4, 2)  # A wrote 3 and 4; B wrote 2
    check_follows_log(table)


def test_eight_writers_at_once(table: LakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 threads commit appends at once; their publishes start together (a barrier in the search), so they race for
    the same versions. Afterwards versions 0..head exist, each naming its own seq, and read as our snapshots."""
    writers, commits_each = 8, 3
    original = delta_log.published_upto
    barrier = threading.Barrier(writers, timeout=60)
    first_search: set[int] = set()
    lock = threading.Lock()

    def search_together(storage: Storage, head: int) -> int:
        ident = threading.get_ident()
        with lock:
            wait = ident not in first_search
            first_search.add(ident)
        if wait:
            barrier.wait()  # each writer's first publish starts once all 8 have committed once
        return original(storage, head)

    monkeypatch.setattr(delta_log, "published_upto", search_together)
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            mine = LakeTable.open(table.url)
            for n in range(commits_each):
                commit(mine, [100 * index + n], "ab"[n % 2])
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not barrier.broken
    table = LakeTable.open(table.url)
    assert table.commit_log.head() == 1 + writers * commits_each
    assert delta_rows(table.url) == rows(table)
    check_follows_log(table)


def test_a_publish_after_clean_expired_unpublished_entries_starts_at_a_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishing failed for a while, then a clean expired old log entries, unpublished ones included (the table's
    retention is kept whatever publishing does): the next publish starts the Delta log again at a checkpoint of our
    log's new start and publishes every entry after it, so other engines read our rows. (Before: every later publish
    failed with LogEntryExpired.)"""
    table = LakeTable.create(str(tmp_path / "table"), {
        "schema": "id BIGINT, v STRING, dt STRING", "partition_by": ["dt"],
        "properties": {"checkpoint.interval": "2", "log.retain.hours": "0.000001", "clean.retain.hours": "0.000001"}})
    commit(table, [1])
    with monkeypatch.context() as patch:
        fail_publishing(patch)
        for i in range(2, 8):
            commit(table, [i])
        assert publisher.status(table).delta_seq == 1
        table.clean(retain_hours=0, force=True)  # every entry is older than the log retention
    table = LakeTable.open(table.url)
    start = table.commit_log.start()
    assert start > 2  # expired past the published version 1
    done = table.publish()
    assert done.delta_seq == table.commit_log.head() >= 7
    assert table.storage.exists(delta_log.checkpoint_file(start))
    assert delta_rows(table.url) == rows(table)
    for version in range(start + 1, table.commit_log.head() + 1):  # after the checkpoint: every version, ours
        first = Path(table.url, delta_log.version_file(version)).read_text().splitlines()[0]
        assert json.loads(first)["commitInfo"]["airflowLake"]["seq"] == version
        assert delta_rows(table.url, version) == rows(table, as_of=version)


def test_a_delta_log_left_by_another_table_is_never_continued(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                               ) -> None:
    """A table deleted without its `_delta_log/`, a new one created in its directory: the old log's versions are
    not taken for the new table's (before: publishing found version 0 there and stopped, so other engines read the
    old table's rows). Publishing refuses, naming the directory to move away; after that it publishes from 0."""
    old = make_table(str(tmp_path / "table"))
    commit(old, [1, 2])
    commit(old, [3])
    shutil.rmtree(Path(old.url, "_lake"))
    table = make_table(old.url)
    commit(table, [7])
    assert "not this table's" in caplog.text  # each commit logs it (a commit never fails for its publish)
    with pytest.raises(LakeError, match=r"version 1 publishes table .*move .*_delta_log.* away"):
        table.publish()
    shutil.move(str(Path(table.url, delta_log.DELTA_LOG)), str(tmp_path / "old_delta_log"))
    done = table.publish()
    assert (done.delta_seq, done.delta_written) == (1, 2)
    check_follows_log(table)
    assert delta_rows(table.url) == rows(table) == [(7, "v7", "a")]
