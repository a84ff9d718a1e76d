"""Orphan removal (`remove_orphan_files`, was `vacuum`): files no log entry holds are found and deleted; everything
the log or a writer needs stays (no Spark)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import DataFile, LakeSpecError, LakeTable
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.instants import STAGING
from airflow_lake.lake.maintenance.orphans import PATHS_IN_METRICS, instant_of, is_hidden, remove_orphan_files
from tests.lake.lake_core_helpers import append, data_file, live_paths, make_table, on_disk

HOUR = 3600.0


def put_parquet(table: LakeTable, data: DataFile, ids: list[int]) -> None:
    """Write `data` as a real Parquet file, marker first as the writer does."""
    table.storage.touch(f"{instants.markers_dir(data.instant)}/{data.path}")
    target = Path(table.storage.path(data.path))
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), target)


def drop(table: LakeTable, rel: str, content: bytes = b"debris", age_hours: float = 2.0) -> str:
    """A file at `rel` that no writer announced, last modified `age_hours` ago."""
    target = Path(table.storage.path(rel))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    age(table, rel, age_hours)
    return rel


def age(table: LakeTable, rel: str, hours: float) -> None:
    """Set the modification time of a file or directory `hours` back."""
    when = time.time() - hours * HOUR
    os.utime(table.storage.path(rel), (when, when))


def rows(table: LakeTable, as_of: int | None = None) -> list[dict[str, Any]]:
    """Every row of a snapshot, read with pyarrow from exactly its live files."""
    snap = table.snapshot(as_of)
    return sorted((r for f in snap.files for r in pq.read_table(table.storage.path(f.path)).to_pylist()),
                  key=lambda r: r["id"])


def every_file(table: LakeTable) -> set[str]:
    return set(table.storage.walk_files(""))


def test_remove_orphan_files_deletes_orphans_and_keeps_what_the_log_and_writers_need(table_path: str) -> None:
    table = make_table(table_path)
    # live files (real Parquet), one of them later replaced: its file is a tombstone until clean
    txn = table.begin("commit", "write")
    f1, f2 = data_file(txn, "a"), data_file(txn, "b")
    put_parquet(table, f1, [1, 2])
    put_parquet(table, f2, [3])
    e1 = txn.commit(added=[f1, f2])
    txn = table.begin("replace", "compact")
    g1 = data_file(txn, "a")
    put_parquet(table, g1, [1, 2])
    e2 = txn.commit(added=[g1], removed=[f1.path])
    # a rolled-back instant whose file has no marker, so its rollback did not find it
    doomed = table.begin("commit", "write")
    lost = drop(table, data_file(doomed, "a").path)
    doomed.abort()
    assert on_disk(table, lost) and doomed.instant in table.state().rolled_back
    # an extra file of a completed instant (a failed task attempt), and files dropped in by hand
    stray = drop(table, f"dt=b/part-{e1.instant}-attempt2-00000.parquet")
    by_hand = [drop(table, "notes.txt"), drop(table, "dt=c/copied.parquet")]
    fresh = drop(table, "dt=a/just-copied.parquet", age_hours=0.1)  # newer than the guard
    # a writer at work: its instant is pending, its file (old or not) is not in any snapshot yet
    pending = instants.request(table.storage, "commit", "write", {}, None,
        not_before=table.state().instant, finished=table.is_finished)
    instants.mark_inflight(table.storage, pending, base_seq=table.state().seq)
    in_flight = drop(table, f"dt=a/part-{pending}-00000.parquet")
    # hidden files: Spark's and Hive's rule
    hidden = [drop(table, "_SUCCESS"), drop(table, "dt=a/.part-x.parquet.crc"), drop(table, "_tmp/x.parquet"),
              drop(table, "dt=a/_temporary/0/part-1.parquet")]
    # staging: of the rolled-back instant (debris), of the pending one and a recent one (kept)
    drop(table, f"{STAGING}/{doomed.instant}/dt=a/part-0.parquet", b"staged")
    age(table, f"{STAGING}/{doomed.instant}", 2)
    staged_pending = drop(table, f"{STAGING}/{pending}/dt=a/part-0.parquet")
    staged_fresh = drop(table, f"{STAGING}/{e1.instant}/dt=a/part-0.parquet", age_hours=0.1)  # newer than the guard
    for item in (f1, f2, g1):
        age(table, item.path, 2)
    orphans = sorted([lost, stray, *by_hand])
    orphan_bytes = sum(os.path.getsize(table.storage.path(p)) for p in orphans) + len(b"staged")
    before, before_first, head = rows(table), rows(table, e1.seq), table.commit_log.head()

    dry = remove_orphan_files(table, 1, dry_run=True)

    assert (dry.orphans, dry.staging) == (tuple(orphans), (f"{STAGING}/{doomed.instant}",))
    assert (dry.bytes, dry.deleted, dry.entry, dry.dry_run) == (orphan_bytes, False, None, True)
    assert all(on_disk(table, p) for p in orphans) and table.storage.exists(f"{STAGING}/{doomed.instant}")
    assert table.commit_log.head() == head

    result = remove_orphan_files(table, 1, force=True, request_id="vac-1")

    assert (result.orphans, result.staging, result.bytes) == (dry.orphans, dry.staging, orphan_bytes)
    assert result.deleted and not result.dry_run
    assert not any(on_disk(table, p) for p in orphans)
    assert not table.storage.exists(f"{STAGING}/{doomed.instant}")
    kept = {f1.path, f2.path, g1.path, fresh, in_flight, staged_pending, staged_fresh, *hidden}
    assert kept <= every_file(table)
    # the log entry: a clean action by the remove_orphan_files operation that lists what went
    entry = result.entry
    assert entry is not None and entry.seq == head + 1 and table.commit_log.head() == entry.seq
    assert (entry.action, entry.operation, entry.request_id) == ("clean", "remove_orphan_files", "vac-1")
    assert entry.metadata["orphans"] == orphans
    assert entry.metadata["staging"] == [f"{STAGING}/{doomed.instant}"]
    assert entry.metadata["older_than_hours"] == 1 and "deleted" not in entry.metadata
    assert entry.metrics == {
        "orphans_found": 4, "staging_dirs_found": 1, "orphan_bytes": orphan_bytes, "files_deleted": 4,
        "staging_dirs_deleted": 1, "bytes_freed": orphan_bytes, "dry_run": False, "older_than_hours": 1,
        "paths": [*orphans, f"{STAGING}/{doomed.instant}/"], "paths_truncated": False, "nested_tables_skipped": [],
        "uploads_found": 0, "uploads_aborted": 0}
    assert table.find_request("vac-1") == entry
    # the table reads the same, now and as of before the replace; clean's bookkeeping is untouched
    assert rows(table) == before == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert rows(table, e1.seq) == before_first
    assert live_paths(table) == {f2.path, g1.path}
    state = table.state()
    assert set(state.tombstones) == {f1.path} and state.tombstones[f1.path][0] == e2.seq
    assert state.cleaned_before == 0
    # nothing left to do: no entry
    again = remove_orphan_files(table, 1, force=True)
    assert (again.orphans, again.staging, again.entry, again.deleted) == ((), (), None, False)
    assert table.commit_log.head() == entry.seq
    # clean still deletes the tombstone afterwards
    cleaned = table.clean(retain_hours=0, force=True)
    assert cleaned is not None and cleaned.metadata["deleted"] == [f1.path] and not on_disk(table, f1)


def test_a_finished_pending_instants_orphans_go_after_it_completes(table_path: str) -> None:
    table = make_table(table_path)
    txn = table.begin("commit", "write")
    item = data_file(txn, "a")
    put_parquet(table, item, [1])
    extra = drop(table, f"dt=a/part-{txn.instant}-extra.parquet")  # written, then left out of the commit
    assert remove_orphan_files(table, 0, force=True, now=time.time() + 1).orphans == ()  # pending: may still commit
    txn.commit(added=[item])
    result = remove_orphan_files(table, 0, force=True, now=time.time() + 1)
    assert result.orphans == (extra,) and not on_disk(table, extra) and on_disk(table, item)


def test_files_of_instants_newer_than_the_removal_are_kept(table_path: str) -> None:
    table = make_table(table_path)
    # a writer that requests its instant after the removal read the pending list is in neither list nor log
    later = instants.format_id(int((time.time() + 60) * 1000))
    newer = drop(table, f"dt=a/part-{later}-00000.parquet")
    drop(table, f"{STAGING}/{later}/part-0.parquet")
    age(table, f"{STAGING}/{later}", 2)
    result = remove_orphan_files(table, 0, force=True, now=time.time() + 1)
    assert (result.orphans, result.staging) == ((), ())
    assert on_disk(table, newer) and table.storage.exists(f"{STAGING}/{later}")


def test_default_age_guard_is_the_retention_property(table_path: str) -> None:
    table = make_table(table_path, {"clean.retain.hours": "3"})
    old = drop(table, "dt=a/old.parquet", age_hours=2)
    assert remove_orphan_files(table).orphans == ()  # two hours old, the guard is three
    assert on_disk(table, old)
    result = remove_orphan_files(table, now=time.time() + 2 * HOUR)
    assert result.orphans == (old,) and result.older_than_hours == 3.0 and not on_disk(table, old)
    assert result.entry is not None and result.entry.metadata["older_than_hours"] == 3.0


def test_zero_hours_takes_every_orphan_and_staging_of_unknown_names_stays(table_path: str) -> None:
    table = make_table(table_path)
    _, (live,) = append(table, "a", disk=True)
    just_now = drop(table, "dt=a/just-now.parquet", age_hours=0)
    drop(table, f"{STAGING}/not-an-instant/x.parquet")
    result = remove_orphan_files(table, 0, force=True, now=time.time() + 1)
    assert result.orphans == (just_now,) and result.staging == ()
    assert on_disk(table, live) and table.storage.exists(f"{STAGING}/not-an-instant/x.parquet")


def test_empty_table_and_bad_hours(table_path: str) -> None:
    table = make_table(table_path)
    result = remove_orphan_files(table, 0, force=True)
    assert (result.orphans, result.staging, result.bytes, result.entry) == ((), (), 0, None)
    assert [i.action for i in table.timeline()] == ["create"]
    for bad in (-1.0, float("nan")):
        with pytest.raises(LakeSpecError, match="older_than_hours"):
            remove_orphan_files(table, bad)


def test_paths_in_the_metrics_are_capped(table_path: str) -> None:
    table = make_table(table_path)
    names = sorted(drop(table, f"dt=a/debris-{n:04d}.parquet") for n in range(PATHS_IN_METRICS + 5))
    result = remove_orphan_files(table, 1, force=True)
    assert result.entry is not None
    assert result.entry.metadata["orphans"] == names  # the log keeps every path
    metrics = result.entry.metrics
    assert metrics["paths"] == names[:PATHS_IN_METRICS] and metrics["paths_truncated"] is True
    assert metrics["files_deleted"] == PATHS_IN_METRICS + 5


def test_name_rules() -> None:
    assert instant_of("dt=a/part-20261121054330123-abc_00003.parquet") == "20261121054330123"
    assert instant_of("part-20261121054330123-x.parquet") == "20261121054330123"
    assert instant_of("dt=part-20261121054330123-/x.parquet") is None  # the file name, not a directory
    assert instant_of("part-2026112105433012-x.parquet") is None
    assert instant_of("notes.txt") is None
    assert is_hidden("_lake/log/0.json") and is_hidden("dt=a/.x.crc") and is_hidden("dt=a/_SUCCESS")
    assert not is_hidden("dt=a/part-1.parquet") and not is_hidden("x_y/a.parquet")
    # write directories: the instant from the directory; Spark's hidden files there are the writer's, not hidden
    written = "data/20261121054330123-ab12cd34-b4/dt=a/part-00000-0a1b-2c3d_00003.c000.snappy.parquet"
    assert instant_of(written) == "20261121054330123"
    assert instant_of("data/20261121054330123-ab12cd34/_temporary/0/x.parquet") == "20261121054330123"
    assert not is_hidden("data/20261121054330123-ab12cd34/dt=a/.part-0.crc")
    assert not is_hidden("data/20261121054330123-ab12cd34/_SUCCESS")
    assert instant_of("data/notes/x.parquet") is None and is_hidden("data/x/_SUCCESS")  # not a write directory


def test_debris_of_a_dead_writer_in_its_write_directory_is_removed(table_path: str) -> None:
    """Spark's leftovers of a writer that died (its `_temporary`, `.crc`, `_SUCCESS`, a data file) go; the files
    of a live write directory, and a recent writer's, stay."""
    table = make_table(table_path)
    dead = instants.format_id(int((time.time() - 3 * HOUR) * 1000))
    debris = [drop(table, f"data/{dead}-deadbeef/{rel}") for rel in (
        "dt=a/part-00000-u_00001.c000.snappy.parquet", "dt=a/.part-00000-u_00001.c000.snappy.parquet.crc",
        "_SUCCESS", "_temporary/0/_temporary/attempt_x/dt=a/part-00001-u.c000.snappy.parquet")]
    recent = instants.format_id(int(time.time() * 1000) - 5_000)
    kept = drop(table, f"data/{recent}-cafe0000/dt=a/part-00000-v.c000.snappy.parquet", age_hours=0.01)
    txn = table.begin("commit", "write")
    live = dataclasses.replace(data_file(txn, "a"),
                               path=f"data/{txn.instant}-00000000/dt=a/part-00000-w.c000.snappy.parquet")
    drop(table, live.path)
    txn.commit(added=[live])
    result = remove_orphan_files(table, older_than_hours=1, force=True)
    assert sorted(result.orphans) == sorted(debris)
    assert not any(Path(table.storage.path(rel)).exists() for rel in debris)
    assert Path(table.storage.path(kept)).exists() and Path(table.storage.path(live.path)).exists()


# -- through the job runner --------------------------------------------------------------------------
def test_runner_operation(table_path: str) -> None:
    table = make_table(table_path)
    orphan = drop(table, "dt=a/orphan.parquet")
    dry = run(None, "remove_orphan_files", {"table": table_path, "older_than_hours": 1, "dry_run": True})
    assert dry == {"table": table.url, "operation": "remove_orphan_files", "orphans_found": 1, "staging_dirs_found": 0,
                   "orphan_bytes": 6, "files_deleted": 0, "staging_dirs_deleted": 0, "bytes_freed": 0,
                   "dry_run": True, "older_than_hours": 1.0, "paths": [orphan], "paths_truncated": False,
                   "nested_tables_skipped": [], "uploads_found": 0, "uploads_aborted": 0,
                   "published_seq": 0, "unpublished_commits": 0}  # (the runner adds where publishing stands)
    assert on_disk(table, orphan)
    done = run(None, "remove_orphan_files", {"table": table_path, "older_than_hours": 1, "force": True,
                                             "request_id": "r-1"})
    assert (done["files_deleted"], done["bytes_freed"], done["dry_run"]) == (1, 6, False)
    assert (done["action"], done["seq"], done["request_id"]) == ("clean", 1, "r-1")
    assert not on_disk(table, orphan)
    noop = run(None, "remove_orphan_files", {"table": table_path, "older_than_hours": 1, "force": True})
    assert (noop["orphans_found"], noop["files_deleted"]) == (0, 0) and "seq" not in noop


@pytest.mark.parametrize(("spec", "field"), [
    ({"older_than_hours": -1}, "older_than_hours"),
    ({"older_than_hours": "1"}, "older_than_hours"),
    ({"dry_run": "yes"}, "dry_run"),
    ({"dry_run": 1}, "dry_run"),
    ({"retain_hours": 1}, "retain_hours"),
    ({"table": None}, "table"),
])
def test_runner_rejects_bad_specs(table_path: str, spec: dict[str, Any], field: str) -> None:
    with pytest.raises(LakeSpecError) as caught:
        run(None, "remove_orphan_files", {"table": table_path, **spec})
    assert caught.value.field == field
