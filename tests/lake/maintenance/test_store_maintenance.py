"""Maintenance on object stores (S3, GCS and Azure: real servers on 127.0.0.1, `tests/stores.py`; data files written
to the store through fsspec, no Spark): clean deletes the removed files past the retention on the store and expires
the log, orphan removal walks the prefix and ages files by their LastModified (never a live file, a pending
writer's, another table's or a hidden one), and clustering is planned from metadata alone (not one request for a
data file)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from airflow_lake.jobs.runner import run
from airflow_lake.lake import DataFile, LakeSnapshotNotFound, LakeTable
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.lake.format import instants, paths
from airflow_lake.lake.format.instants import STAGING
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.maintenance.clean import clean
from airflow_lake.lake.maintenance.orphans import remove_orphan_files
from tests.lake.format.test_log_open import build
from tests.lake.lake_core_helpers import data_file, live_paths, make_table
from tests.s3_server import S3Server
from tests.stores import StoreServer

HOUR = 3600.0
MB = 1024 * 1024
CONTENT = b"PAR1 not really parquet PAR1"


def put(table: LakeTable, data: DataFile, content: bytes = CONTENT) -> None:
    """Write `data` on the store as a writer does: its manifest first, then the file under its final name."""
    instants.write_manifest(table.storage, data.instant, [data.path])
    table.storage.write_bytes(data.path, content)


def drop(table: LakeTable, rel: str, content: bytes = b"debris") -> str:
    """A key no writer announced."""
    table.storage.write_bytes(rel, content)
    return rel


def keys(table: LakeTable) -> set[str]:
    return set(table.storage.walk_files(""))


def data_requests(counts: Counter[tuple[str, str]]) -> dict[tuple[str, str], int]:
    return {k: v for k, v in counts.items() if k[1] == "data"}


def next_second() -> float:
    """Wait until the store's clock (whole seconds in LastModified) has moved on; returns a time between the keys
    written before and those written after."""
    before = int(time.time())
    while int(time.time()) <= before + 1:
        time.sleep(0.05)
    return before + 1.0


def dry_run_requests(server: S3Server, counts: Counter[tuple[str, str]], root: str, *, never: list[str], lost: str,
                     orphans: list[str]) -> None:
    """On S3, where requests are counted: an orphan dry run walks the prefix once and asks the store the age and
    size of the candidates only; live data is never asked about."""
    asked = {key for method, key, _ in list(server.counter.recent)[-sum(counts.values()):] if method == "HEAD"}
    print("requests of an orphan dry run on S3:", sum(counts.values()), sorted(counts.items()))
    assert not any(method == "GET" for method, kind in counts if kind == "data"), counts
    prefix = server.key_of(root)
    assert not {f"{prefix}/{p}" for p in never} & asked  # never asked
    assert f"{prefix}/{lost}" in asked
    assert counts[("HEAD", "data")] <= 2 * (len(orphans) + 1), counts  # age (and size) of the candidates only


def test_clean_deletes_removed_files_past_the_retention_on_the_store(store: StoreServer, store_root: str) -> None:
    table = make_table(store_root)
    txn = table.begin("commit", "write")
    f1, f2 = data_file(txn, "a"), data_file(txn, "b")
    for item in (f1, f2):
        put(table, item)
    txn.commit(added=[f1, f2])
    txn = table.begin("replace", "compact")
    g1 = data_file(txn, "a")
    put(table, g1)
    e2 = txn.commit(added=[g1], removed=[f1.path])
    time.sleep(0.05)
    txn = table.begin("replace", "compact")
    g2 = data_file(txn, "b")
    put(table, g2)
    e3 = txn.commit(added=[g2], removed=[f2.path])
    assert {f1.path, f2.path, g1.path, g2.path} <= keys(table)

    # the retention ends between the two replaces: f1 goes, f2 (removed later) stays for time travel
    now = (e2.completed_at + e3.completed_at) / 2 + HOUR
    mark = store.counter.mark() if store.counter else Counter()
    entry = clean(LakeTable.open(store_root), retain_hours=1, force=True, now=now)
    counts = store.counter.since(mark) if store.counter else Counter()
    assert entry is not None and entry.metadata["deleted"] == [f1.path]
    assert entry.metrics["files_deleted"] == 1 and entry.metrics["bytes_freed"] == len(CONTENT)
    present = keys(table)
    assert f1.path not in present and {f2.path, g1.path, g2.path} <= present
    assert live_paths(LakeTable.open(store_root)) == {g1.path, g2.path}
    # a data file is only asked its size and deleted: never read, listed or copied (counted on S3)
    assert set(data_requests(counts)) <= {("HEAD", "data"), ("DELETE", "data")}, counts
    assert clean(LakeTable.open(store_root), retain_hours=1, force=True, now=now) is None  # nothing left to do


def test_orphans_on_the_store_are_aged_by_last_modified(store: StoreServer, store_root: str) -> None:
    table = make_table(store_root, {"clean.retain.hours": "1"})
    txn = table.begin("commit", "write")
    live = data_file(txn, "a")
    put(table, live)
    committed = txn.commit(added=[live])
    txn = table.begin("replace", "compact")
    newer = data_file(txn, "a")
    put(table, newer)
    txn.commit(added=[newer], removed=[live.path])  # `live` is now a tombstone: clean's, not orphan removal's
    doomed = table.begin("commit", "write")
    lost = drop(table, data_file(doomed, "a").path)  # written without a manifest, then rolled back
    doomed.abort()
    stray = drop(table, f"dt=a/part-{committed.instant}-attempt2-00000.parquet")
    by_hand = [drop(table, "notes.txt"), drop(table, "dt=c/copied.parquet"), drop(table, "dt=c/a[1]*?.parquet")]
    pending = instants.request(table.storage, "commit", "write", {}, None, not_before=table.state().instant,
                               finished=table.is_finished)
    instants.mark_inflight(table.storage, pending, base_seq=table.state().seq)
    in_flight = drop(table, f"dt=a/part-{pending}-00000.parquet")
    hidden = [drop(table, "_SUCCESS"), drop(table, "dt=a/.part-x.parquet.crc"), drop(table, "_tmp/x.parquet")]
    staged_done = drop(table, f"{STAGING}/{doomed.instant}/dt=a/part-0.parquet", b"staged")
    staged_pending = drop(table, f"{STAGING}/{pending}/dt=a/part-0.parquet")
    # another table below this one: create_table refuses that, so one made another way (an older release, a copy):
    # its entry 0 put in place by hand
    Storage(f"{store_root}/sub/inner").create_json(paths.log_file(0), table.commit_log.read(0).to_dict())
    inner = LakeTable.open(f"{store_root}/sub/inner")
    inner_file = drop(inner, "part-x.parquet")
    sibling = Storage(f"{store_root}x")  # a prefix sharing the table's leading characters: never listed with it
    sibling.write_bytes("dt=a/part-y.parquet", b"not ours")
    cutoff = next_second()  # what follows is younger than the cutoff
    fresh = drop(table, "dt=a/just-copied.parquet")
    now = cutoff + HOUR  # older_than_hours=1 before `now`: the keys written before `cutoff` are old enough
    orphans = sorted([lost, stray, *by_hand])

    mark = store.counter.mark() if store.counter else Counter()
    dry = remove_orphan_files(LakeTable.open(store_root), dry_run=True, now=now)
    counts = store.counter.since(mark) if store.counter else Counter()
    if store.s3 is not None:
        dry_run_requests(store.s3, counts, store_root, never=[live.path, newer.path, in_flight, *hidden], lost=lost,
                         orphans=orphans)
    assert dry.orphans == tuple(orphans) and dry.staging == (f"{STAGING}/{doomed.instant}",)
    assert dry.nested_tables == ("sub/inner",) and not dry.deleted
    assert dry.bytes == sum(len(table.storage.read_bytes(p)) for p in orphans) + len(b"staged")

    result = remove_orphan_files(LakeTable.open(store_root), now=now, request_id="orphans-1")
    assert result.deleted and result.orphans == dry.orphans and result.entry is not None
    present = keys(table)
    assert not set(orphans) & present and not any(k.startswith(staged_done.rsplit("/", 2)[0]) for k in present)
    kept = {live.path, newer.path, in_flight, fresh, staged_pending, *hidden}
    assert kept <= present
    assert sibling.exists("dt=a/part-y.parquet")
    assert inner.storage.exists(inner_file) and LakeTable.open(f"{store_root}/sub/inner").commit_log.head() == 0
    entry = result.entry
    assert (entry.action, entry.operation, entry.request_id) == ("clean", "remove_orphan_files", "orphans-1")
    assert entry.metadata["orphans"] == orphans
    assert remove_orphan_files(LakeTable.open(store_root), now=now).orphans == ()  # a second run finds nothing


def test_clustering_is_planned_from_metadata_alone(s3_server: S3Server, s3_root: str) -> None:
    table = make_table(s3_root)
    for _ in range(4):
        txn = table.begin("commit", "write")
        item = data_file(txn, "a", size=MB)
        put(table, item)
        txn.commit(added=[item])
    mark = s3_server.counter.mark()
    out = run(None, "schedule_clustering", {"table": s3_root, "request_id": "plan-1"})
    counts = s3_server.counter.since(mark)
    assert out["scheduled"] and out["input_files"] == 4 and out["groups"] == 1
    assert data_requests(counts) == {}, counts  # not one request for a data file
    assert not table.storage.exists("_lake/locks/schedule_clustering.json")  # the lock is released
    [plan] = pending_plans(LakeTable.open(s3_root))
    assert plan.id == out["plan_id"] and plan.plan is not None and len(plan.plan.files) == 4
    again = run(None, "schedule_clustering", {"table": s3_root, "request_id": "plan-1"})
    assert again["plan_id"] == out["plan_id"] and again["existing_plan"]
    print("requests of one schedule_clustering on S3:", sum(counts.values()), sorted(counts.items()))


def start_upload(s3: S3Server, root: str, rel: str) -> str:
    """A multipart upload of `rel` started and given one part, never completed: what a writer killed before its
    commit leaves (no object; its parts billed)."""
    key = f"{s3.key_of(root)}/{rel}"
    upload = s3.client.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    s3.client.upload_part(Bucket=s3.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"part of a file")
    return upload


def in_progress(s3: S3Server, root: str) -> list[str]:
    """Keys (relative to `root`, or absolute ones outside it) of the uploads in progress under `root`'s prefix."""
    prefix = s3.key_of(root)
    answer = s3.client.list_multipart_uploads(Bucket=s3.bucket, Prefix=prefix)
    return sorted(u["Key"][len(prefix) + 1:] if u["Key"].startswith(prefix + "/") else u["Key"]
                  for u in answer.get("Uploads", ()))


def marker(s3: S3Server, root: str, rel: str) -> str:
    """A directory marker (a zero-byte key ending in '/'), as Hadoop's S3A connector leaves for a directory."""
    s3.client.put_object(Bucket=s3.bucket, Key=f"{s3.key_of(root)}/{rel}", Body=b"")
    return rel


def test_orphan_removal_aborts_old_incomplete_uploads_and_deletes_empty_directory_markers(
        s3_server: S3Server, s3_root: str) -> None:
    table = make_table(s3_root, {"clean.retain.hours": "1"})
    txn = table.begin("commit", "write")
    live = f"data/{txn.instant}-live/dt=a/part-0.parquet"
    instants.write_manifest(table.storage, txn.instant, [f"data/{txn.instant}-live/"])
    table.storage.write_bytes(live, CONTENT)
    txn.commit(added=[DataFile(path=live, partition={"dt": "a"}, rows=1, bytes=len(CONTENT), instant=txn.instant)])
    live_markers = [marker(s3_server, s3_root, f"data/{txn.instant}-live/"),
                    marker(s3_server, s3_root, f"data/{txn.instant}-live/dt=a/")]
    doomed = table.begin("commit", "write")  # a dead writer's attempt, rolled back: its uploads and markers stay
    dead_dir = f"data/{doomed.instant}-dead"
    dead_upload = f"{dead_dir}/dt=a/part-0.parquet"
    start_upload(s3_server, s3_root, dead_upload)
    dead_markers = [marker(s3_server, s3_root, f"{dead_dir}/"),
                    marker(s3_server, s3_root, f"{dead_dir}/__magic_job-1/"),
                    marker(s3_server, s3_root, f"{dead_dir}/__magic_job-1/tasks/attempt_1/__base/")]
    doomed.abort()
    start_upload(s3_server, s3_root, "notes/big.bin")  # any upload under the root: debris once old
    hidden = marker(s3_server, s3_root, "_tmp/")  # hidden, as for files
    pending = instants.request(table.storage, "commit", "write", {}, None, not_before=table.state().instant,
                               finished=table.is_finished)
    instants.mark_inflight(table.storage, pending, base_seq=table.state().seq)
    pending_upload = f"data/{pending}-w/dt=a/part-0.parquet"  # a writer at work: kept whatever its age
    start_upload(s3_server, s3_root, pending_upload)
    pending_marker = marker(s3_server, s3_root, f"data/{pending}-w/")
    Storage(f"{s3_root}/sub/inner").create_json(paths.log_file(0), table.commit_log.read(0).to_dict())
    inner_upload = "sub/inner/data/x/part-0.parquet"  # another table's
    start_upload(s3_server, s3_root, inner_upload)
    sibling = f"{s3_server.key_of(s3_root)}x/data/part-0.parquet"  # a prefix sharing the root's characters
    sibling_id = s3_server.client.create_multipart_upload(Bucket=s3_server.bucket, Key=sibling)["UploadId"]
    cutoff = next_second()
    fresh_upload = "data/later/part-0.parquet"  # younger than the cutoff
    start_upload(s3_server, s3_root, fresh_upload)
    now = cutoff + HOUR

    dry = remove_orphan_files(LakeTable.open(s3_root), dry_run=True, now=now)
    assert sorted(dry.uploads) == sorted([dead_upload, "notes/big.bin"]) and not dry.deleted
    assert sorted(dry.orphans) == sorted(dead_markers)
    assert dry.metrics()["uploads_found"] == 2 and dry.metrics()["uploads_aborted"] == 0
    assert len(in_progress(s3_server, s3_root)) == 6  # a dry run aborts nothing

    result = remove_orphan_files(LakeTable.open(s3_root), now=now, request_id="orphans-uploads")
    assert in_progress(s3_server, s3_root) == sorted([pending_upload, inner_upload, fresh_upload, sibling])
    assert sorted(result.orphans) == sorted(dead_markers) and result.uploads == dry.uploads
    assert result.metrics()["uploads_aborted"] == 2 and result.metrics()["files_deleted"] == 3
    assert result.entry is not None and sorted(result.entry.metadata["uploads"]) == sorted(dry.uploads)
    present = set(table.storage.walk_files("", markers=True))
    assert not set(dead_markers) & present
    assert {live, *live_markers, hidden, pending_marker} <= present  # markers above live files, hidden, pending
    assert live_paths(LakeTable.open(s3_root)) == {live}
    s3_server.client.abort_multipart_upload(Bucket=s3_server.bucket, Key=sibling, UploadId=sibling_id)


def test_clean_expires_the_log_on_the_store(store: StoreServer, store_root: str) -> None:
    """Log retention on a store: entries older than `log.retain.hours` that a checkpoint covers are deleted, oldest
    first (entry 0 kept); a fresh reader opens from the checkpoint, time travel within the retention works, and a
    snapshot before it is the named error."""
    # entry i completed 40 - i hours ago: entries 1..19 are older than 20.5 h; a checkpoint every 10, 2 kept
    build(store_root, 40, interval=10, keep=2, hours_apart=1.0,
          properties={"log.retain.hours": "20.5", "clean.retain.hours": "1"})
    table = LakeTable(store_root)
    expected = {seq: set(table.state(seq).files) for seq in (19, 25, 40)}
    entry = clean(table)
    assert entry is not None and entry.metadata["log_starts_at"] == 19
    assert entry.metrics["log_entries_expired"] == 18
    logged = sorted(s for s in map(paths.seq_of, table.storage.list_dir(paths.LOG)) if s is not None)
    assert logged == [0, *range(19, 42)]
    fresh = LakeTable(store_root)
    assert fresh.commit_log.start() == 19 and fresh.commit_log.head() == 41
    assert all(set(fresh.state(seq).files) == files for seq, files in expected.items())
    with pytest.raises(LakeSnapshotNotFound, match="older than the log keeps"):
        fresh.snapshot(5)
