"""No path read from metadata leaves its table (issue 33, item 3): planted manifests, markers, log entries, checkpoints
and plans name paths outside the table (`..`, absolute paths, `file:` and `s3://` URLs, the table's own `_lake/`) or
reach outside it through symlinks; recovery (every writer's `begin`), clean, orphan removal, restore and clustering
touch nothing outside the table — a victim directory beside it keeps every file — and the error names the file that
holds the path. Nothing is deleted, not even the valid paths of the same manifest or entry. (No Spark.)
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.clustering.execute import execute_clustering, pending_plans
from airflow_lake.lake.clustering.layout import LINEAR, Layout
from airflow_lake.lake.errors import LakeSpecError, LakeUnsafePath
from airflow_lake.lake.format import checkpoints, instants, paths
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import LogEntry
from tests.lake.lake_core_helpers import append, data_file, make_table, put_file


class Victim:
    """A directory beside the table, with files: nothing the table's maintenance does may touch it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "sub").mkdir(parents=True)
        for rel in ("a.parquet", "b.parquet", "sub/c.parquet"):
            (root / rel).write_bytes(f"victim {rel}".encode())
        self.before = self.files()

    def files(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file()}

    def untouched(self) -> bool:
        return self.root.is_dir() and self.files() == self.before


@pytest.fixture
def victim(tmp_path: Path) -> Victim:
    return Victim(tmp_path / "victim")


def bad_paths(victim: Victim) -> dict[str, str]:
    """Every spelling of a path outside the table's data area, by name."""
    return {
        "dotdot-dir": "../victim/",
        "dotdot-file": "../victim/a.parquet",
        "deep-dotdot": "data/x/../../../victim/",
        "absolute": f"{victim.root}/a.parquet",
        "absolute-dir": f"{victim.root}/",
        "file-url": f"file://{victim.root}/a.parquet",
        "s3-url": "s3://lake-tests/victim/a.parquet",
        "backslash": "..\\victim\\a.parquet",
        "own-log": paths.log_file(0),  # the table's own metadata: entry 0
    }


BAD_NAMES = ["dotdot-dir", "dotdot-file", "deep-dotdot", "absolute", "absolute-dir", "file-url", "s3-url", "backslash",
             "own-log"]  # (the keys of `bad_paths`: its paths need the victim's directory)


def plant_dead_instant(table: LakeTable, manifest: list[str]) -> tuple[str, str]:
    """A writer that died long ago: its requested and inflight files (on another host, 100 s old, no heartbeat),
    one file it really wrote in its write directory, and a manifest naming that directory and `manifest`. Returns
    (instant, the path of its own file)."""
    storage = table.storage
    then = time.time() - 100
    instant = instants.format_id(int(then * 1000))
    writer = {"host": "elsewhere", "pid": 4242}
    storage.write_json(instants.requested_file(instant), {"instant": instant, "action": "commit",
                                                         "operation": "write", "requested_at": then, **writer})
    storage.write_json(instants.inflight_file(instant), {"instant": instant, "base_seq": 0, "started_at": then,
                                                        **writer})
    own_dir = f"data/{instant}-0badcafe"
    own = f"{own_dir}/dt=a/part-00000.parquet"
    instants.write_manifest(storage, instant, [f"{own_dir}/", *manifest])
    if storage.local:
        target = storage.path(own)
        os.makedirs(os.path.dirname(target))
        with open(target, "wb") as handle:
            handle.write(b"PAR1")
        for rel in (instants.requested_file(instant), instants.inflight_file(instant)):
            os.utime(storage.path(rel), (then, then))
    else:
        storage.write_bytes(own, b"PAR1")
    return instant, own


def plant_entry(table: LakeTable, **fields: Any) -> str:
    """Write a log entry at the next sequence number by hand (as someone who can write `_lake/` could), completed
    long ago; returns its file."""
    head = table.commit_log.head()
    then = time.time() - 100
    entry = LogEntry(seq=head + 1, instant=instants.format_id(int(then * 1000) + head), action="commit",
                     operation="write", started_at=then, completed_at=then, base_seq=head, **fields)
    table.storage.write_json(paths.log_file(head + 1), entry.to_dict())
    return paths.log_file(head + 1)


def attempt(action: Callable[[], object]) -> LakeUnsafePath | None:
    """Run `action`; the `LakeUnsafePath` it raised, or None. (The harm is asserted first, then the error.)"""
    try:
        action()
    except LakeUnsafePath as err:
        return err
    return None


def planted_file(path: str) -> DataFile:
    return DataFile(path=path, partition={"dt": "a"}, rows=1, bytes=4, instant="20200101000000000")


# -- recovery: every writer's begin --------------------------------------------------------------------------
@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_dead_writers_manifest_naming_a_path_outside_deletes_nothing(table_path: str, victim: Victim,
                                                                       name: str) -> None:
    table = make_table(table_path)
    bad = bad_paths(victim)[name]
    instant, own = plant_dead_instant(table, [bad])
    head = table.commit_log.head()

    error = attempt(lambda: table.begin("commit", "write"))  # recovery would roll the dead writer back
    assert victim.untouched()
    assert error is not None and error.path == bad
    assert str(error).startswith(f"manifest {table.url}/{paths.MARKERS}/{instant}/")
    reopened = LakeTable.open(table_path)
    assert reopened.commit_log.head() == head  # no rollback recorded ...
    assert reopened.storage.exists(own) and reopened.storage.exists(paths.log_file(0))  # ... nothing deleted
    assert instant in reopened.storage.list_dir(paths.PENDING)[0]

    # the fix the error names: remove the planted manifest; then the dead writer is rolled back as any other
    for manifest in reopened.storage.walk_files(instants.markers_dir(instant)):
        if bad in json.loads(reopened.storage.read_bytes(manifest)):
            reopened.storage.delete(manifest)
    instants.write_manifest(reopened.storage, instant, [f"data/{instant}-0badcafe/"])
    append(reopened, "a")
    assert not reopened.storage.exists(own) and victim.untouched()
    assert reopened.commit_log.read(head + 1).rolled_back == (instant,)


def test_an_old_writers_marker_naming_the_log_deletes_nothing(table_path: str, victim: Victim) -> None:
    """Per-file markers of writers before manifests: the marker's own path names the data file."""
    table = make_table(table_path)
    instant, own = plant_dead_instant(table, [])
    table.storage.touch(f"{instants.markers_dir(instant)}/{paths.log_file(0)}")
    with pytest.raises(LakeUnsafePath, match=rf"marker .*{instant}/_lake/log/.* metadata directory"):
        table.begin("commit", "write")
    assert table.storage.exists(paths.log_file(0)) and table.storage.exists(own)


@pytest.mark.parametrize("how", ["write-directory", "directory-above-a-file", "partition-directory", "staging"])
def test_a_dead_writers_symlink_out_of_the_table_is_never_followed(table_path: str, victim: Victim,
                                                                   how: str) -> None:
    table = make_table(table_path)
    instant, own = plant_dead_instant(table, [])
    root = Path(table_path)
    if how == "write-directory":  # the write directory a manifest names is a symlink out
        os.symlink(victim.root, root / "data" / f"{instant}-link")
        named = [f"data/{instant}-link/"]
    elif how == "directory-above-a-file":
        os.symlink(victim.root, root / "data" / f"{instant}-link")
        named = [f"data/{instant}-link/a.parquet"]
    elif how == "partition-directory":  # an older writer's file in a partition directory that is a symlink out
        os.symlink(victim.root, root / "dt=x")
        named = ["dt=x/sub/c.parquet"]
    else:
        os.makedirs(root / paths.META / "staging")
        os.symlink(victim.root, root / instants.staging_dir(instant))
        named = []
    if named:
        instants.write_manifest(table.storage, instant, named)
    error = attempt(lambda: table.begin("commit", "write"))
    assert victim.untouched() and table.storage.exists(own)  # nothing deleted, its own file neither
    assert error is not None and "reaches outside the table through a symlink" in str(error)
    assert f"instant {instant}" in str(error)


# -- clean ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BAD_NAMES)
def test_clean_never_deletes_a_path_a_log_entry_names_outside(table_path: str, victim: Victim, name: str) -> None:
    table = make_table(table_path)
    append(table, "a", disk=True)
    _, (doomed,) = append(table, "a", disk=True)
    txn = table.begin("replace", "rewrite")  # `doomed` replaced: a tombstone clean would delete
    txn.commit(added=[data_file(txn, "a")], removed=[doomed.path])
    bad = bad_paths(victim)[name].rstrip("/")
    added_at = plant_entry(table, added=(planted_file(bad),))  # a file "added" there ...
    plant_entry(table, removed=(bad,))  # ... and "removed": clean's tombstone

    error = attempt(lambda: LakeTable.open(table_path).clean(retain_hours=0, force=True))
    assert victim.untouched()
    assert os.path.exists(table.storage.path(doomed.path))  # not even the valid tombstone was deleted
    assert error is not None and str(error).startswith(f"log entry {table.url}/{added_at} (added) names the path")
    assert os.path.exists(table.storage.path(paths.log_file(0)))


def test_clean_never_deletes_through_a_symlink(table_path: str, victim: Victim) -> None:
    """A path that looks right (a partition directory) but is a symlink out of the table."""
    table = make_table(table_path)
    _, (doomed,) = append(table, "a", disk=True)
    os.symlink(victim.root, Path(table_path) / "dt=s")
    txn = table.begin("commit", "write")
    linked = DataFile(path="dt=s/a.parquet", partition={"dt": "s"}, rows=1, bytes=4, instant=txn.instant)
    txn.commit(added=[linked])
    txn = table.begin("replace", "rewrite")
    txn.commit(added=[data_file(txn, "a")], removed=[doomed.path, linked.path])
    error = attempt(lambda: table.clean(retain_hours=0, force=True))
    assert victim.untouched() and os.path.exists(table.storage.path(doomed.path))
    assert error is not None and "names the path 'dt=s/a.parquet', which reaches outside" in str(error)
    assert [e.action for e in table.commit_log.entries(0)][-1] == "replace"  # no clean entry recorded


def test_a_clean_entry_naming_deleted_paths_outside_is_refused(table_path: str, victim: Victim) -> None:
    table = make_table(table_path)
    planted = plant_entry(table)
    entry = json.loads(table.storage.read_bytes(planted))
    entry.update(action="clean", operation="clean", metadata={"deleted": ["../victim/a.parquet"]})
    table.storage.write_json(planted, entry)
    with pytest.raises(LakeUnsafePath, match=r"\(metadata\.deleted\) names the path '../victim/a.parquet'"):
        LakeTable.open(table_path).snapshot()


# -- orphan removal ------------------------------------------------------------------------------------------
def test_orphan_removal_with_a_planted_entry_deletes_nothing(table_path: str, victim: Victim) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write")
    orphan = data_file(txn, "a")
    put_file(table, orphan)
    txn.abort()  # (its rollback deleted it: put it back, a real orphan)
    put_file(table, orphan)
    planted = plant_entry(table, added=(planted_file("../victim/sub/c.parquet"),))
    with pytest.raises(LakeUnsafePath, match=rf"log entry .*{planted} \(added\)"):
        LakeTable.open(table_path).remove_orphan_files(older_than_hours=0, force=True)
    assert victim.untouched() and os.path.exists(table.storage.path(orphan.path))


def test_orphan_removal_never_follows_a_symlink_out_of_the_table(table_path: str, victim: Victim) -> None:
    table = make_table(table_path)
    root = Path(table_path)
    os.symlink(victim.root, root / "dt=z")  # a partition directory that is a symlink: not walked
    os.makedirs(root / "dt=a")
    os.symlink(victim.root / "a.parquet", root / "dt=a" / "part-x.parquet")  # a file that is one: the link goes
    result = table.remove_orphan_files(older_than_hours=0, force=True)
    assert result.orphans == ("dt=a/part-x.parquet",)
    assert not os.path.lexists(root / "dt=a" / "part-x.parquet") and os.path.islink(root / "dt=z")
    assert victim.untouched()
    # a finished instant's staging directory that is a symlink out: refused, nothing deleted
    os.makedirs(root / paths.META / "staging")
    os.symlink(victim.root, root / instants.staging_dir("20200101000000000"))
    with pytest.raises(LakeUnsafePath, match="reaches outside the table through a symlink"):
        table.remove_orphan_files(older_than_hours=0, force=True)
    assert victim.untouched()


# -- restore ---------------------------------------------------------------------------------------------------
def test_restore_over_a_planted_entry_is_refused_and_reads_nothing_outside(table_path: str, victim: Victim) -> None:
    table = make_table(table_path)
    append(table, "a", disk=True)
    planted = plant_entry(table, added=(planted_file(f"file://{victim.root}/a.parquet"),))
    append_at = table.commit_log.head()
    with pytest.raises(LakeUnsafePath, match=rf"{planted} \(added\) names the path 'file://"):
        LakeTable.open(table_path).restore(to_seq=1)
    with pytest.raises(LakeUnsafePath, match=rf"{planted} \(added\)"):
        LakeTable.open(table_path).restore(to_seq=append_at)  # the target itself holds the path
    assert victim.untouched() and LakeTable.open(table_path).commit_log.head() == append_at


# -- checkpoints -----------------------------------------------------------------------------------------------
def test_a_planted_checkpoint_is_not_used_and_clean_deletes_nothing_outside(
        table_path: str, victim: Victim, caplog: pytest.LogCaptureFixture) -> None:
    table = make_table(table_path)
    _, (live,) = append(table, "a", disk=True)
    state = table.state()
    state.tombstones["../victim/b.parquet"] = [1, 0.0]  # removed long ago: clean's to delete
    state.files[f"{victim.root}/a.parquet"] = planted_file(f"{victim.root}/a.parquet")
    checkpoints.write(table.storage, state)  # and the pointer names it
    source = f"checkpoint {table.url}/{paths.checkpoint_file(state.seq)}"
    with caplog.at_level(logging.WARNING):
        reopened = LakeTable.open(table_path)
        reopened.clean(retain_hours=0, force=True)
    assert victim.untouched() and os.path.exists(table.storage.path(live.path))
    assert {f.path for f in reopened.snapshot().files} == {live.path}  # folded from the log, the truth
    assert any(source in r.getMessage() and "is not used" in r.getMessage() for r in caplog.records)
    with pytest.raises(LakeUnsafePath, match=rf"{source} \(files\) names the path '{victim.root}/a.parquet'"):
        checkpoints.read(table.storage, state.seq, "parquet")


# -- clustering plans ------------------------------------------------------------------------------------------
def test_a_plan_naming_a_path_outside_is_refused_as_damaged(table_path: str, victim: Victim) -> None:
    table = make_table(table_path)
    append(table, "a", disk=True)
    plan = {"format": 1, "base_seq": 1, "layout": Layout(LINEAR, ("id",)).to_dict(), "strategy": {},
            "groups": [{"partition": {"dt": "a"}, "files": ["../victim/a.parquet"], "bytes": 1, "rows": 1,
                        "output_files": 1}]}
    plan_id = instants.request(table.storage, "replace", instants.PLAN_OPERATION, {"plan": plan}, None,
                               not_before=None, finished=table.is_finished)
    [pending] = pending_plans(table)
    assert pending.plan is None and "groups[0].files names the path '../victim/a.parquet'" in pending.problem
    with pytest.raises(LakeSpecError, match=rf"{plan_id}: the plan's groups\[0\]\.files names the path"):
        execute_clustering(table, cast(Any, None))  # refused before any Spark is needed
    assert victim.untouched()
