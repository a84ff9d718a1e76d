"""The metadata storage layer on local paths: exclusive create, atomic replace, listings."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from airflow_lake.lake import LakeError
from airflow_lake.lake.format.storage import Storage, is_local, normalize_url


def leftovers(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def test_create_json_is_exclusive_and_keeps_the_first(tmp_path: Path) -> None:
    store = Storage(str(tmp_path))
    assert store.create_json("_lake/log/x.json", {"who": "first"}) is True
    assert store.create_json("_lake/log/x.json", {"who": "second"}) is False
    assert store.read_json("_lake/log/x.json") == {"who": "first"}
    assert leftovers(tmp_path / "_lake" / "log") == []


def test_create_json_under_contention_has_one_winner(tmp_path: Path) -> None:
    store = Storage(str(tmp_path))
    barrier = threading.Barrier(8)
    results: dict[int, bool] = {}

    def race(i: int) -> None:
        barrier.wait()
        results[i] = store.create_json("slot.json", {"writer": i})

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(results) == 8 and len(winners) == 1
    assert store.read_json("slot.json") == {"writer": winners[0]}
    assert leftovers(tmp_path) == []


def test_a_link_done_but_answered_eexist_is_our_create(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On NFS a LINK whose reply was lost is sent again and answered EEXIST although it was done: the exclusive
    create then finds its own file (the same inode) and succeeds; another writer's file is still a lost race."""
    storage = Storage(str(tmp_path))
    real_link = os.link

    def link_reply_lost(src: str, dst: str) -> None:
        real_link(src, dst)  # done on the server ...
        raise FileExistsError(17, "File exists", dst)  # ... and the retransmission fails

    monkeypatch.setattr(os, "link", link_reply_lost)
    assert storage.create_json("x.json", {"writer": "a"}) is True
    assert storage.create_json("x.json", {"writer": "b"}) is False
    assert storage.read_json("x.json") == {"writer": "a"}
    assert sorted(os.listdir(tmp_path)) == ["x.json"]  # no temporary file left


def test_write_json_replaces_atomically(tmp_path: Path) -> None:
    store = Storage(str(tmp_path))
    store.write_json("a/b/state.json", {"v": 0})
    assert store.read_json("a/b/state.json") == {"v": 0}
    big = "x" * 200_000
    stop = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []
    reading = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                raw = store.read_json("a/b/state.json")
            except BaseException as err:  # a torn or missing file would land here
                errors.append(err)
                return
            if raw["v"] != 0 and raw.get("pad") != big:
                errors.append(AssertionError(f"partial content {raw['v']}"))
            seen.append(raw["v"])
            reading.set()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert reading.wait(10)
        for v in range(1, 40):
            store.write_json("a/b/state.json", {"v": v, "pad": big})
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert seen
    assert seen == sorted(seen)  # never goes back to an older version
    assert store.read_json("a/b/state.json")["v"] == 39
    assert leftovers(tmp_path / "a" / "b") == []


def test_list_missing_dir_is_empty_and_listing_is_sorted(tmp_path: Path) -> None:
    store = Storage(str(tmp_path))
    assert store.list_dir("nope") == []
    assert store.list_dir("nope/deeper") == []
    for name in ("c.json", "a.json", "b.json"):
        store.write_json(f"d/{name}", {})
    assert store.list_dir("d") == ["a.json", "b.json", "c.json"]
    assert store.walk_files("nope") == []


def test_walk_files_touch_delete_and_sizes(tmp_path: Path) -> None:
    store = Storage(str(tmp_path))
    store.touch("_lake/markers/1/dt=a/f1.parquet")
    store.touch("_lake/markers/1/dt=b/f2.parquet")
    assert store.walk_files("_lake/markers/1") == ["_lake/markers/1/dt=a/f1.parquet",
                                                   "_lake/markers/1/dt=b/f2.parquet"]
    rel = "_lake/markers/1/dt=a/f1.parquet"
    old = time.time() - 100
    os.utime(store.path(rel), (old, old))
    store.touch(rel)
    assert store.mtime(rel) > old + 50  # touching bumps the modification time
    store.write_bytes("data.bin", b"12345")
    assert store.size("data.bin") == 5 and store.read_bytes("data.bin") == b"12345"
    assert store.exists("data.bin")
    assert store.delete("data.bin") is True
    assert store.delete("data.bin") is False
    assert not store.exists("data.bin")
    store.delete_tree("_lake/markers/1")
    store.delete_tree("_lake/markers/1")  # no error when gone
    assert store.walk_files("_lake/markers") == []


def test_json_is_compact_and_sorted(tmp_path: Path) -> None:
    store = Storage(str(tmp_path))
    store.write_json("x.json", {"b": 1, "a": [1, 2]})
    assert store.read_bytes("x.json") == b'{"a":[1,2],"b":1}'
    assert json.loads(store.read_bytes("x.json")) == {"a": [1, 2], "b": 1}


def test_urls(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert normalize_url(path) == path
    assert normalize_url(f"file://{path}") == path
    assert normalize_url(f"  {path}/  ") == path
    assert normalize_url("s3://bucket/t/") == "s3://bucket/t"
    assert is_local(path) and is_local(f"file://{path}") and not is_local("s3://bucket/t")
    store = Storage(f"file://{path}")
    assert store.local and store.url == path
    assert store.path("_lake/log") == f"{path}/_lake/log"
    assert store.uri("dt=a/f.parquet") == f"{path}/dt=a/f.parquet"
    with pytest.raises(LakeError):
        normalize_url("   ")
