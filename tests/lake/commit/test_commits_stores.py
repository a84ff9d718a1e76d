"""The commit protocol on object stores — S3, Google Cloud Storage and Azure Blob Storage, each a real server on
127.0.0.1 (`tests/stores.py`: moto's S3 server, fake-gcs-server, Azurite); data files only described in log
entries, as `benchmarks/bench_lake_page.py` builds tables: create, commit, checkpoints, time travel, recovery of a
dead writer, a live writer kept alive by its heartbeat — and 16 writers racing for the same log entry, in threads
over several rounds and across 4 processes, forced to collide: each writer reads the head, then all wait at a barrier
between that read and their append, so all 16 append the same sequence number. Exactly one wins each time; the
others retry at the next number (appends) or get the retryable conflict (replaces of one file); nothing is lost or
doubled. (No server can give a double win by itself: `test_storage_s3.test_the_server_cannot_give_a_double_win`,
`test_storage_emulators.test_*_gives_exactly_one_win_to_racing_conditional_creates`.) The race across processes
runs on S3 alone (each process pays its interpreter's start; the protocol is the same on every store).
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections import Counter
from typing import Any

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeTable
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.log import LogEntry
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table
from tests.s3_server import S3Server
from tests.stores import StoreServer

WRITERS = 16
ROUNDS = 2  # of racing appends; then one round of racing replaces of one file
PROCESSES = 4  # the 16 writers of the race across processes: 4 threads in each of 4 processes
RACE = {"heartbeat.timeout.seconds": "120"}  # no writer may look dead on a busy 2-core machine


def leftovers(table: LakeTable) -> list[str]:
    """Pending files, heartbeats, markers and staging left in the table (none once every writer finished)."""
    return [f for d in (paths.PENDING, paths.HEARTBEATS, paths.MARKERS, instants.STAGING)
            for f in table.storage.walk_files(d)]


def gate_first_append(table: LakeTable, barrier: Any, firsts: dict[str, tuple[int, bool]], key: str) -> None:
    """Make this writer's next log append wait at `barrier` after it read the head, then record (seq, won) of
    that append under `key`; later appends go straight through."""
    log = table.commit_log
    original = log.try_append

    def first(entry: LogEntry) -> bool:
        del log.try_append  # later attempts: the method itself
        barrier.wait(timeout=120)
        won = original(entry)
        firsts[key] = (entry.seq, won)
        return won

    log.try_append = first  # type: ignore[method-assign]


def requests_per_commit(server: S3Server, table: LakeTable, commits: int) -> Counter[tuple[str, str]]:
    mark = server.counter.mark()
    for _ in range(commits):
        append(table, "a")
    return server.counter.since(mark)


def test_a_table_on_a_store_commits_checkpoints_and_reads_back(store: StoreServer, store_root: str) -> None:
    table = make_table(store_root, {"checkpoint.interval": "3"})
    assert table.storage.walk_files("") == [  # and no probe key left (the create is published as Delta version 0)
        "_delta_log/00000000000000000000.json", "_lake/log/00000000000000000000.json"]
    added = [append(table, day)[1][0].path for day in ("a", "b", "c", "a")]
    reopened = LakeTable.open(store_root)  # a fresh client
    assert reopened.commit_log.head() == 4 and live_paths(reopened) == set(added)
    assert live_paths(reopened, 2) == set(added[:2])  # time travel
    assert reopened.storage.list_dir(paths.CHECKPOINTS) == ["00000000000000000003.parquet"]
    assert reopened.storage.read_json(paths.LAST_CHECKPOINT)["seq"] == 3
    assert [i.state for i in reopened.timeline()] == ["completed"] * 5
    assert leftovers(reopened) == []
    if store.s3 is None:
        return
    counts = requests_per_commit(store.s3, table, 5)
    per_commit = {k: round(v / 5, 1) for k, v in sorted(counts.items())}
    print(f"requests per append commit on S3: {sum(counts.values()) / 5:.1f} {per_commit}")
    assert not any(kind == "data" for _, kind in counts)  # metadata only: nothing moved, copied or renamed
    assert sum(counts.values()) <= 5 * 40


def test_a_dead_writer_is_rolled_back_and_a_live_one_kept(s3_server: S3Server, s3_root: str) -> None:
    """On S3 alone (it waits out a real timeout); every store rolls a dead writer back in
    `test_a_dead_writer_is_rolled_back_once_its_heartbeat_stood_still_for_the_timeout`, on an injected clock."""
    # heartbeats every 0.2 s, dead after 3 s without one (a beat on S3 is two requests: room for a busy machine)
    table = make_table(s3_root, {"heartbeat.timeout.seconds": "3"})
    dead = instants.request(table.storage, "commit", "write", {}, None, not_before=None, finished=table.is_finished)
    instants.mark_inflight(table.storage, dead, 0)
    instants.write_manifest(table.storage, dead, ["dt=a/part-dead.parquet"])
    table.storage.write_bytes("dt=a/part-dead.parquet", b"PAR1")  # written, never committed
    live = table.begin("commit", "write")  # beats on its own thread
    time.sleep(3.5)
    entry, _ = append(table, "b")  # begin() recovers: the dead writer is rolled back, the live one kept
    fresh = LakeTable(s3_root)
    [rollback] = [e for e in fresh.commit_log.entries(0) if e.action == "rollback"]
    assert rollback.rolled_back == (dead,) and "writer dead" in rollback.metadata["reason"]
    assert not fresh.storage.exists("dt=a/part-dead.parquet")
    assert fresh.storage.list_dir(paths.PENDING) == [f"{live.instant}.inflight.json",
                                                    f"{live.instant}.requested.json"]
    mine = data_file(live, "a")
    assert live.commit(added=[mine]).seq == entry.seq + 1
    assert mine.path in live_paths(LakeTable(s3_root)) and leftovers(fresh) == []


def test_the_clustering_schedule_lock_excludes_on_a_store(store_root: str) -> None:
    from airflow_lake.lake.clustering import schedule

    table = make_table(store_root)
    acquired = threading.Event()

    def second_scheduler() -> None:
        with schedule._schedule_lock(LakeTable(store_root)):
            acquired.set()

    with schedule._schedule_lock(table):  # an exclusive create of the lock's key
        other = threading.Thread(target=second_scheduler)
        other.start()
        assert not acquired.wait(0.8) and table.storage.exists(schedule.LOCK)  # it waits
    assert acquired.wait(30)
    other.join()
    assert not table.storage.exists(schedule.LOCK)


def test_sixteen_writers_racing_in_threads(store: StoreServer, store_root: str) -> None:
    LakeTable.create(store_root, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"], "properties": RACE})
    rounds = ROUNDS + 1
    start, end = threading.Barrier(WRITERS, timeout=300), threading.Barrier(WRITERS, timeout=300)
    firsts: dict[str, tuple[int, bool]] = {}
    outcomes: dict[tuple[int, int], int | str] = {}  # (round, writer) -> seq, or the conflict
    instants_of: dict[tuple[int, int], str] = {}
    shared: dict[str, str] = {}
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        table = LakeTable(store_root)  # its own client (fsspec keeps one per thread)
        for r in range(rounds):
            start.wait()
            try:
                txn = table.begin("commit" if r < ROUNDS else "replace", "write", request_id=f"r{r}-w{i}")
                instants_of[(r, i)] = txn.instant
                gate_first_append(table, barrier, firsts, f"{r}-{i}")
                removed = [shared["victim"]] if r == ROUNDS else []
                try:
                    outcomes[(r, i)] = txn.commit(added=[data_file(txn, f"d{r}")], removed=removed).seq
                except LakeCommitConflict as err:
                    outcomes[(r, i)] = str(err)
                    txn.abort(str(err))
            except BaseException as err:
                errors.append(err)
            if i == 0 and r == 0:
                shared["victim"] = sorted(live_paths(table))[0]
            end.wait()

    barrier = threading.Barrier(WRITERS)
    mark = store.counter.mark() if store.counter else Counter()
    started = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    assert errors == []
    for r in range(rounds):  # every round: all 16 appended the same number first, exactly one won it
        tried = [firsts[f"{r}-{i}"] for i in range(WRITERS)]
        assert len({seq for seq, _ in tried}) == 1, tried
        assert sum(won for _, won in tried) == 1, tried
    table = LakeTable(store_root)
    head = table.commit_log.head()
    entries = list(table.commit_log.entries(0))
    commits = [e for e in entries if e.action in ("commit", "replace")]
    for r in range(ROUNDS):  # appends: all 16 landed, at 16 distinct numbers
        seqs = [outcomes[(r, i)] for i in range(WRITERS)]
        assert all(isinstance(s, int) for s in seqs) and len(set(seqs)) == WRITERS
    winners = [i for i in range(WRITERS) if isinstance(outcomes[(ROUNDS, i)], int)]
    assert len(winners) == 1  # replaces of one file: one wins, the others get the retryable conflict
    losers = [outcomes[(ROUNDS, i)] for i in range(WRITERS) if i not in winners]
    assert all("replaced 1 file(s) this job read or replaces" in str(m) for m in losers)
    # the log: every writer's commit exactly once, 15 rollbacks, nothing else; no gap
    assert [e.seq for e in entries] == list(range(1, head + 1))
    assert head == ROUNDS * WRITERS + 1 + (WRITERS - 1)  # appends, the replace, the rollbacks of the others
    assert Counter(e.request_id for e in commits) == Counter(
        [f"r{r}-w{i}" for r in range(ROUNDS) for i in range(WRITERS)] + [f"r{ROUNDS}-w{winners[0]}"])
    rolled = sorted(i for e in entries if e.action == "rollback" for i in e.rolled_back)
    assert rolled == sorted(instants_of[(ROUNDS, i)] for i in range(WRITERS) if i not in winners)
    assert len(live_paths(table)) == ROUNDS * WRITERS  # one of the appended files replaced by one
    assert shared["victim"] not in live_paths(table) and leftovers(table) == []
    counts = store.counter.since(mark) if store.counter else Counter()
    print(f"16 racing writers in threads on {store.name}: {head} entries in {elapsed:.1f} s, "
          f"{sum(counts.values())} requests ({sum(counts.values()) / head:.0f} per entry)", sorted(counts.items()))


def process_writers(url: str, writers: list[int], barrier: Any, results: Any) -> None:
    """Racing writers in a process of their own, a thread each with its own s3fs client: read the head, wait
    for all the others, append; each reports (writer, (seq, won) of that first append, the seq it landed at, or
    the error)."""

    def write(writer: int) -> None:
        firsts: dict[str, tuple[int, bool]] = {}
        try:
            table = LakeTable(url)
            txn = table.begin("commit", "write", request_id=f"p-w{writer}")
            gate_first_append(table, barrier, firsts, "first")
            entry = txn.commit(added=[data_file(txn, "p")])
            results.put((writer, firsts["first"], entry.seq, None))
        except BaseException as err:
            results.put((writer, firsts.get("first"), None, repr(err)))

    threads = [threading.Thread(target=write, args=(writer,)) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_sixteen_writers_racing_in_four_processes(s3_server: S3Server, s3_root: str) -> None:
    LakeTable.create(s3_root, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"], "properties": RACE})
    append(LakeTable(s3_root), "a")
    context = multiprocessing.get_context("spawn")  # a fresh interpreter each: no client inherited by a fork
    barrier, results = context.Barrier(WRITERS), context.Queue()
    processes = [context.Process(target=process_writers,
                                 args=(s3_root, list(range(p, WRITERS, PROCESSES)), barrier, results))
                 for p in range(PROCESSES)]
    for p in processes:
        p.start()
    got = []
    try:
        for _ in range(WRITERS):
            got.append(results.get(timeout=300))
    except queue.Empty:
        pytest.fail(f"only {len(got)} of {WRITERS} writers reported: {got}")
    finally:
        for p in processes:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert [err for *_, err in got if err] == []
    assert {first for _, first, _, _ in got} <= {(2, True), (2, False)}  # all appended entry 2 first
    assert sum(first[1] for _, first, _, _ in got) == 1  # one won it
    assert sorted(seq for _, _, seq, _ in got) == list(range(2, 2 + WRITERS))
    table = LakeTable(s3_root)
    assert table.commit_log.head() == 1 + WRITERS
    assert Counter(e.request_id for e in table.commit_log.entries(1)) == Counter(f"p-w{i}" for i in range(WRITERS))
    assert len(live_paths(table)) == 1 + WRITERS and leftovers(table) == []


def test_a_table_is_never_created_inside_or_above_another_on_a_store(store_root: str) -> None:
    """As on disk: a table under another table's prefix, or above one, would share its files (and a vacuum of
    either would delete the other's data); refused before anything is written."""
    from airflow_lake.lake.errors import LakeSpecError
    from airflow_lake.lake.format.storage import Storage

    spec = {"schema": "id BIGINT"}
    LakeTable.create(f"{store_root}/outer", spec)
    with pytest.raises(LakeSpecError, match=r"lies inside the lake table .*/outer'"):
        LakeTable.create(f"{store_root}/outer/inner", spec)
    with pytest.raises(LakeSpecError, match=r"holds the lake table .*/outer"):
        LakeTable.create(store_root, spec)
    assert not Storage(f"{store_root}/outer/inner").exists(paths.META)  # nothing written for the refused tables
    assert Storage(store_root).list_dir(paths.META) == []
    LakeTable.create(f"{store_root}/sibling", spec)  # a sibling prefix is fine (s3://.../outer is not its parent)
    LakeTable.create(f"{store_root}/outer2", spec)


# -- liveness without comparing clocks ---------------------------------------------------------------------------
BEHIND = 3600.0  # how far the skewed writer's clock runs behind


def skewed_writer(root: str, go: Any, results: Any) -> None:
    """A writer process whose clock runs an hour behind (every time stamp it writes, its heartbeat's included):
    it begins, reports its instant, and commits one file when told to (or reports the error)."""
    real = time.time
    time.time = lambda: real() - BEHIND  # (the code reads `time.time()` at each call)
    table = LakeTable(root)
    txn = table.begin("commit", "write")
    results.put(txn.instant)
    go.get(timeout=120)
    try:
        results.put(txn.commit(added=[data_file(txn, "a")]).seq)
    except Exception as err:
        results.put(f"{type(err).__name__}: {err}")


def test_a_live_writer_whose_clock_runs_behind_is_never_rolled_back(s3_server: S3Server, s3_root: str) -> None:
    """Its stamps look an hour old by this reader's clock, but its heartbeat changes: another writer's begin
    watches it change (under one heartbeat interval, not the timeout) and leaves it alone; it then commits. (Judged
    by its stamps, it was rolled back at once by every begin.)"""
    table = make_table(s3_root, {"heartbeat.timeout.seconds": "5"})  # beats every 0.2 s
    context = multiprocessing.get_context("spawn")
    go, results = context.Queue(), context.Queue()
    writer = context.Process(target=skewed_writer, args=(s3_root, go, results))
    writer.start()
    try:
        instant = results.get(timeout=120)
        [item] = instants.pending(table.storage)
        assert item.id == instant and time.time() - item.last_beat > BEHIND - 60  # it looks dead by its stamps
        started = time.monotonic()
        mine = LakeTable(s3_root).begin("commit", "write")  # recovery runs here
        assert time.monotonic() - started < 5  # it did not wait out the timeout
        assert [e.action for e in LakeTable(s3_root).commit_log.entries(0)] == []  # no rollback
        entry = mine.commit(added=[data_file(mine, "b")])
        go.put("commit")
        assert results.get(timeout=120) == entry.seq + 1  # the skewed writer commits after us
    finally:
        writer.join(timeout=60)
        if writer.is_alive():
            writer.kill()
    fresh = LakeTable(s3_root)
    assert [e.action for e in fresh.commit_log.entries(0)] == ["commit", "commit"] and leftovers(fresh) == []


def test_a_dead_writer_is_rolled_back_once_its_heartbeat_stood_still_for_the_timeout(
        store: StoreServer, store_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer (of this host's live process: only its heartbeat tells) that stopped beating, its stamps an hour
    old: the next begin watches its heartbeat stand still for the timeout on the reader's own clock (injected:
    the test does not wait), then rolls it back."""
    table = make_table(store_root, {"heartbeat.timeout.seconds": "30"})
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - BEHIND)  # the dead writer's clock, while it writes
    dead = instants.request(table.storage, "commit", "write", {}, None, not_before=None, finished=table.is_finished)
    instants.mark_inflight(table.storage, dead, 0)
    instants.write_manifest(table.storage, dead, ["dt=a/part-dead.parquet"])
    table.storage.write_bytes("dt=a/part-dead.parquet", b"PAR1")  # written, never committed
    monkeypatch.setattr(time, "time", real)
    clock = [0.0]
    looks: list[float] = []

    def pause(seconds: float) -> None:
        looks.append(clock[0])
        clock[0] += seconds

    monkeypatch.setattr(instants, "_monotonic", lambda: clock[0])
    monkeypatch.setattr(instants, "_pause", pause)
    append(LakeTable(store_root), "a")  # begin() watches, then rolls it back
    [rollback, _] = LakeTable(store_root).commit_log.entries(0)
    assert rollback.rolled_back == (dead,) and "writer dead" in rollback.metadata["reason"]
    assert clock[0] >= 30 and len(looks) >= 10  # it watched the heartbeat for the whole timeout
    fresh = LakeTable(store_root)
    assert fresh.storage.list_dir(paths.PENDING) == [] and not fresh.storage.exists("dt=a/part-dead.parquet")
    assert leftovers(fresh) == []
