"""The metadata storage layer on S3 (a real S3-protocol server, `tests/s3_server.py`): every operation, the
exclusive create as one conditional PUT (412 -> existed, 409 -> retried), listings that are never stale, no
rename, heartbeats by the writer's clock, and the stores refused for commits."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import pytest
from botocore.exceptions import ClientError

from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSpecError
from airflow_lake.lake.format import instants, stores
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.table import LakeTable
from tests.s3_server import S3Server
from tests.stores import without_gcsfs


def puts(counts: dict[tuple[str, str], int]) -> int:
    return sum(n for (method, _), n in counts.items() if method == "PUT")


def test_files_and_listings_on_s3(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    assert not store.local and store.url == s3_root
    assert store.path("_lake/log") == f"{s3_server.bucket}/{s3_server.key_of(s3_root)}/_lake/log"
    # Spark is handed the S3A form of the URL (its Hadoop file system for S3), Python keeps s3://
    assert store.uri("dt=1/a.parquet") == "s3a://" + s3_root.removeprefix("s3://") + "/dt=1/a.parquet"
    mark = s3_server.counter.mark()
    store.makedirs("_lake/log")  # a key needs no directory: nothing is sent
    assert s3_server.counter.since(mark) == {}
    store.write_json("_lake/pending/a.json", {"v": 1})
    store.write_bytes("_lake/markers/i/m.json", b"[]")
    store.write_bytes("dt=1/a.parquet", b"PAR1")
    assert store.read_json("_lake/pending/a.json") == {"v": 1} and store.read_bytes("dt=1/a.parquet") == b"PAR1"
    assert store.exists("_lake/pending/a.json") and store.exists("_lake/markers")  # a file; a "directory"
    assert not store.exists("_lake/pending/b.json") and not store.exists("_lake/log")
    assert store.size("dt=1/a.parquet") == 4
    assert abs(store.mtime("dt=1/a.parquet") - time.time()) < 5  # the server's clock, whole seconds
    assert store.list_dir("_lake") == ["markers", "pending"] and store.list_dir("_lake/log") == []
    assert store.list_dir("") == ["_lake", "dt=1"]
    assert store.walk_files("_lake") == ["_lake/markers/i/m.json", "_lake/pending/a.json"]
    assert store.walk_files("nothing") == []
    sibling = Storage(s3_root + "x")  # shares the prefix's leading characters: never listed or deleted with it
    sibling.write_json("_lake/pending/z.json", {})
    assert store.walk_files("") == ["_lake/markers/i/m.json", "_lake/pending/a.json", "dt=1/a.parquet"]
    assert store.delete("_lake/pending/a.json") and not store.exists("_lake/pending/a.json")
    mark = s3_server.counter.mark()
    store.delete_tree("_lake")  # one listing, one batch delete
    assert s3_server.counter.since(mark) == {("LIST", "meta"): 1, ("BATCH_DELETE", "bucket"): 1}
    assert store.walk_files("") == ["dt=1/a.parquet"] and sibling.exists("_lake/pending/z.json")
    store.delete_tree("_lake")  # gone already: no error
    with pytest.raises(FileNotFoundError):
        store.read_bytes("_lake/pending/a.json")


def test_delete_tree_takes_glob_characters_literally(s3_root: str) -> None:
    store = Storage(s3_root)
    names = ["_lake/staging/i/day=a[1]/x.parquet", "_lake/staging/i/day=b*/y.parquet", "_lake/staging/i/z?.json"]
    for name in names:
        store.write_bytes(name, b"1")
    store.write_bytes("_lake/staging/j/keep.json", b"1")
    store.delete_tree("_lake/staging/i")
    assert store.walk_files("") == ["_lake/staging/j/keep.json"]


def test_directory_markers_are_listed_on_request_and_deleted_with_their_directory(
        s3_server: S3Server, s3_root: str) -> None:
    """Hadoop's S3A leaves a zero-byte `<dir>/` key for each directory it creates; a deleted directory must not
    keep them (they are objects: listed, and the directory seems to exist)."""
    storage = Storage(s3_root)
    prefix = s3_server.key_of(s3_root)
    storage.write_bytes("data/w1/dt=a/part-0.parquet", b"x")
    for marker in ("data/w1/", "data/w1/__magic_job-1/", "data/w1/__magic_job-1/tasks/__base/", "data/w2/"):
        s3_server.client.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/{marker}", Body=b"")
    assert storage.walk_files("data") == ["data/w1/dt=a/part-0.parquet"]  # files only, as callers expect
    assert storage.walk_files("data/w1", markers=True) == [
        "data/w1/", "data/w1/__magic_job-1/", "data/w1/__magic_job-1/tasks/__base/", "data/w1/dt=a/part-0.parquet"]
    assert storage.mtime("data/w2/") > 0 and storage.size("data/w2/") == 0
    storage.delete_tree("data/w1")
    assert storage.walk_files("", markers=True) == ["data/w2/"]
    assert storage.delete("data/w2/") and storage.walk_files("", markers=True) == []


def test_exclusive_create_is_one_conditional_put(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    mark = s3_server.counter.mark()
    assert store.create_json("_lake/log/00000000000000000000.json", {"who": "first"}) is True
    assert s3_server.counter.since(mark) == {("PUT", "log"): 1}
    before = s3_server.counter.statuses()[("PUT", "log", 412)]
    assert store.create_json("_lake/log/00000000000000000000.json", {"who": "second"}) is False
    assert s3_server.counter.statuses()[("PUT", "log", 412)] == before + 1  # the server refused it
    assert store.read_json("_lake/log/00000000000000000000.json") == {"who": "first"}


def test_a_409_conflict_is_retried(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    key = s3_server.key_of(s3_root)
    sent = s3_server.controls.conflicts_sent
    s3_server.controls.conflicts(f"{key}/_lake/log/a.json", 2)  # another write of the key is in flight, twice
    mark = s3_server.counter.mark()
    assert store.create_json("_lake/log/a.json", {"who": "me"}) is True
    assert s3_server.controls.conflicts_sent == sent + 2 and puts(s3_server.counter.since(mark)) == 3
    # the in-flight write lands meanwhile: the retry finds the key (412), so it existed
    store.write_json("_lake/log/b.json", {"who": "other"})
    s3_server.controls.conflicts(f"{key}/_lake/log/b.json", 1)
    assert store.create_json("_lake/log/b.json", {"who": "me"}) is False
    assert store.read_json("_lake/log/b.json") == {"who": "other"}
    # a conflict that never ends is the retryable conflict, not a silent answer
    s3_server.controls.conflicts(f"{key}/_lake/log/c.json", 1000)
    try:
        with pytest.raises(LakeCommitConflict, match="409 ConditionalRequestConflict"):
            store.create_json("_lake/log/c.json", {"who": "me"})
    finally:
        s3_server.controls.conflicts(f"{key}/_lake/log/c.json", 0)
    assert not store.exists("_lake/log/c.json")


def test_other_errors_are_raised_as_they_come(s3_server: S3Server) -> None:
    store = Storage("s3://no-such-bucket-here/t")
    with pytest.raises(FileNotFoundError):
        store.create_json("_lake/log/a.json", {})


def test_listings_are_never_served_from_a_cache(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    store.write_json("_lake/pending/1.requested.json", {})
    key = s3_server.key_of(s3_root)
    assert store.list_dir("_lake/pending") == ["1.requested.json"] and not store.exists("_lake/pending/2.x")
    # another client (not this process's s3fs) writes and deletes
    s3_server.client.put_object(Bucket=s3_server.bucket, Key=f"{key}/_lake/pending/2.requested.json", Body=b"{}")
    s3_server.client.delete_object(Bucket=s3_server.bucket, Key=f"{key}/_lake/pending/1.requested.json")
    assert store.list_dir("_lake/pending") == ["2.requested.json"]
    assert store.walk_files("_lake") == ["_lake/pending/2.requested.json"]
    assert store.exists("_lake/pending/2.requested.json") and not store.exists("_lake/pending/1.requested.json")
    assert store.list_after("_lake/pending", "") == ["2.requested.json"]
    # what it guards against: s3fs's default listing cache keeps answering the old listing
    cached = fsspec.filesystem("s3", skip_instance_cache=True)
    assert cached.ls(store.path("_lake/pending"), detail=False) == [store.path("_lake/pending/2.requested.json")]
    s3_server.client.put_object(Bucket=s3_server.bucket, Key=f"{key}/_lake/pending/3.requested.json", Body=b"{}")
    assert len(cached.ls(store.path("_lake/pending"), detail=False)) == 1  # stale
    assert store.list_dir("_lake/pending") == ["2.requested.json", "3.requested.json"]


def test_list_after_is_one_paged_listing_from_the_start_point(s3_server: S3Server, s3_root: str,
                                                              tmp_path: Path) -> None:
    store, local = Storage(s3_root), Storage(str(tmp_path))
    key = s3_server.key_of(s3_root)
    names = [f"{seq:020d}.json" for seq in range(1020)]

    def put(name: str) -> None:
        s3_server.client.put_object(Bucket=s3_server.bucket, Key=f"{key}/_lake/log/{name}", Body=b"{}")
        (tmp_path / "_lake" / "log" / name).write_bytes(b"{}")

    (tmp_path / "_lake" / "log").mkdir(parents=True)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, names))
    mark = s3_server.counter.mark()
    assert store.list_after("_lake/log", names[9]) == names[10:]  # 1,010 names: two pages
    assert s3_server.counter.since(mark) == {("LIST", "log"): 2}
    mark = s3_server.counter.mark()
    assert store.list_after("_lake/log", names[1010]) == names[1011:]
    assert s3_server.counter.since(mark) == {("LIST", "log"): 1}
    assert store.list_after("_lake/log", names[-1]) == [] and store.list_after("_lake/none", "") == []
    for start in ("", names[0], names[1010], names[-1], "zzz"):  # the same answers as on local disk
        assert store.list_after("_lake/log", start) == local.list_after("_lake/log", start)


def test_liveness_is_judged_by_the_writers_clock(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    before = time.time()
    instant = instants.request(store, "commit", "write", {}, None, not_before=None, finished=None)
    instants.mark_inflight(store, instant, 0)  # writes the inflight file and the first heartbeat
    after = time.time()
    beat = store.touched_at(instants.heartbeat_file(instant))
    assert before <= beat <= after  # the writer's own time, to the microsecond
    assert store.mtime(instants.heartbeat_file(instant)) == int(store.mtime(instants.heartbeat_file(instant)))
    mark = s3_server.counter.mark()
    [item] = instants.pending(store)
    assert item.id == instant and item.inflight and before <= item.last_beat <= after
    # one listing and one read per pending file; no HEAD asks the server's clock
    assert s3_server.counter.since(mark) == {("LIST", "pending"): 1, ("GET", "pending"): 2, ("GET", "heartbeats"): 1}
    time.sleep(0.05)
    store.touch(instants.heartbeat_file(instant))
    assert instants.pending(store)[0].last_beat > after


def test_a_store_without_a_conditional_write_is_refused() -> None:
    store = Storage("memory://lake/refused")
    with pytest.raises(LakeSpecError, match=r"memory://\) has no atomic create-if-absent: two writers could both "
                                            r"commit log entry N"):
        store.create_json("_lake/log/00000000000000000000.json", {})
    assert not store.exists("_lake/log/00000000000000000000.json")
    problem, fix = stores.refusal("http://host/t", None) or ("", "")
    assert "http://" in problem and "s3fs>=2024.12.0" in fix and "gcsfs>=2024.12.0" in fix and "adlfs" in fix


def test_old_store_packages_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    problem, fix = stores.refusal("s3://bucket/t", "2024.6.0") or ("", "")
    assert "Amazon S3 through s3fs 2024.6.0 has no atomic create-if-absent" in problem
    assert fix == "pip install 's3fs>=2024.12.0' (the extra airflow-lake[s3])."
    problem, fix = stores.refusal("s3a://bucket/t", "2026.9.0", if_none_match_known=False) or ("", "")
    assert "botocore does not know PutObject's IfNoneMatch" in problem and "botocore" in fix
    problem, _ = stores.refusal("gs://bucket/t", None) or ("", "")
    assert "Google Cloud Storage through no gcsfs" in problem
    assert stores.refusal("abfss://c@a.dfs.core.windows.net/t", "2024.12.0") is None
    assert stores.refusal("s3://bucket/t", "2025.3.0rc1") is None and stores.version_tuple("2024.12.0") == (2024, 12, 0)
    with pytest.raises(LakeSpecError, match=r"pip install 'airflow-lake\[gcs\]' \(gcsfs>=2024.12.0\)"):
        without_gcsfs(monkeypatch)
        Storage("gs://bucket/t")


def test_the_installed_s3fs_passes(s3_root: str) -> None:
    Storage(s3_root).check_commits(probe=True)  # s3fs and botocore new enough; the server honours If-None-Match
    assert Storage(s3_root).walk_files("") == []  # the probe key is gone


def test_a_server_that_ignores_if_none_match_is_refused_at_create(s3_server: S3Server, s3_root: str) -> None:
    with s3_server.controls.ignoring_conditions(), \
            pytest.raises(LakeError, match="the server ignores the conditional write"):
        LakeTable.create(s3_root, {"schema": "id BIGINT"})
    assert Storage(s3_root).walk_files("") == []  # nothing written: no log entry, no probe key left
    assert not LakeTable.exists(s3_root)


def test_s3a_urls_use_s3fs_and_keep_their_scheme_for_spark(s3_root: str) -> None:
    s3a = "s3a://" + s3_root.removeprefix("s3://")
    Storage(s3_root).write_json("_lake/pending/a.json", {"v": 1})
    store = Storage(s3a)
    assert store.read_json("_lake/pending/a.json") == {"v": 1} and store.uri("x") == f"{s3a}/x"
    assert store.create_json("_lake/log/a.json", {"who": "one"})
    assert not Storage(s3_root).create_json("_lake/log/a.json", {"who": "other"})


def test_the_server_cannot_give_a_double_win(s3_server: S3Server) -> None:
    """The premise of every race test here: moto's conditional PUT is made atomic by the fixture. With the window
    between moto's check and its store widened, 16 racing conditional PUTs of one key give exactly one 200 and
    fifteen 412s; without the fixture's lock the same race gives several 200s (so this test can see a server's
    double win, and the lock is what prevents it)."""

    def race(key: str) -> list[int]:
        barrier = threading.Barrier(16)

        def put(i: int) -> int:
            barrier.wait()
            try:
                s3_server.client.put_object(Bucket=s3_server.bucket, Key=key, Body=f"{i}".encode(), IfNoneMatch="*")
                return 200
            except ClientError as err:
                return int(err.response["ResponseMetadata"]["HTTPStatusCode"])

        with ThreadPoolExecutor(16) as pool:
            return sorted(pool.map(put, range(16)))

    with s3_server.controls.widen("proof/", 0.3):
        assert race("proof/locked") == [200] + [412] * 15
        with s3_server.controls.unlocked():
            unlocked = race("proof/unlocked")
    assert unlocked.count(200) > 1, unlocked
