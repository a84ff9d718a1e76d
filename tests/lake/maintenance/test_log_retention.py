"""Log retention: `clean` expires log entries older than `log.retain.hours` that a checkpoint covers, oldest
first; time travel within the retention keeps working, and a reader of an expired entry gets an error naming
the retention and the oldest snapshot still reachable (no Spark).

The tables are written with entries that completed hours apart in the past (`build`), so the retention is
judged by the real clock, as checkpoint retention after every commit judges it too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake import reports
from airflow_lake.lake import LakeSnapshotNotFound, LakeSpecError, LakeTable
from airflow_lake.lake.clustering.timeline import START, commits_since
from airflow_lake.lake.format import history, instants, paths
from airflow_lake.lake.format.log import LogEntryExpired
from airflow_lake.lake.format.table_metadata import TableMetadata
from airflow_lake.lake.maintenance import restore
from airflow_lake.lake.maintenance.clean import clean
from airflow_lake.lake.upsert import versions
from tests.lake.format.test_log_open import append_entry, build

COMMITS = 300
# entry i completed COMMITS - i hours ago: entries 1..99 are older than 200.5 h. Checkpoint retention keeps the
# newest two (one every 10); clean writes one at 99, where the log starts once expired, and retention keeps it.
RETAIN = {"log.retain.hours": "200.5", "clean.retain.hours": "24"}
FLOOR = 99


def live(table: TableMetadata, seq: int | None = None) -> set[str]:
    return set(table.state(seq).files)


def log_names(path: str) -> list[int]:
    return sorted(s for s in map(paths.seq_of, os.listdir(Path(path, paths.LOG))) if s is not None)


def checkpoint_seqs(path: str) -> list[int]:
    return sorted(c[0] for c in map(paths.checkpoint_of, os.listdir(Path(path, paths.CHECKPOINTS))) if c)


@pytest.fixture
def old_table(tmp_path: Path) -> str:
    """A table of COMMITS entries an hour apart, the last one now; every 10th checkpointed, 2 kept."""
    path = str(tmp_path / "t")
    build(path, COMMITS, hours_apart=1.0, properties=RETAIN)
    return path


def test_checkpoint_retention_keeps_the_checkpoint_at_the_logs_start(old_table: str) -> None:
    assert checkpoint_seqs(old_table) == [290, 300]
    table = LakeTable(old_table)
    clean(table)
    assert checkpoint_seqs(old_table) == [FLOOR, 290, 300]  # clean wrote the one its expiry starts from
    assert table.storage.read_json(paths.LAST_CHECKPOINT)["seq"] == 300  # ... without pointing the pointer at it
    base = instants.id_millis(table.commit_log.read(0).instant)
    for seq in range(COMMITS + 2, 311):
        append_entry(table, seq, base, time.time())
    assert checkpoint_seqs(old_table) == [FLOOR, 300, 310]  # the newest two, and the one at the log's start


def test_a_busy_table_whose_checkpoints_never_aged_expires_too(tmp_path: Path) -> None:
    """Checkpoints a writer makes are deleted beyond `checkpoint.retain.count` before they age past the horizon:
    clean writes the checkpoint its expiry starts from (folded from the log here: there is no older one)."""
    path = str(tmp_path / "t")

    def shorten(table: TableMetadata, seq: int) -> dict[str, Any] | None:
        if seq != COMMITS:
            return None
        spec = table.spec.to_dict()
        spec["properties"] = {**spec.get("properties", {}), **RETAIN}
        return {"action": "alter", "operation": "alter_table", "added": (), "metadata": {"spec": spec}}

    build(path, COMMITS, hours_apart=1.0, properties={"log.retain.hours": "100000"}, special=shorten)
    assert checkpoint_seqs(path) == [290, 300]
    expected = {seq: live(LakeTable(path), seq) for seq in (FLOOR, 150, COMMITS)}
    entry = clean(LakeTable(path))
    assert entry is not None and entry.metadata["log_starts_at"] == FLOOR and entry.metadata["log_expired"] == 98
    assert checkpoint_seqs(path) == [FLOOR, 290, 300]
    for seq, files in expected.items():
        assert live(LakeTable(path), seq) == files


def test_clean_expires_the_log_before_the_horizon_and_time_travel_within_it_works(old_table: str) -> None:
    table = LakeTable(old_table)
    expected = {seq: live(table, seq) for seq in (99, 100, 150, 299, 300)}
    entry = clean(table)
    assert entry is not None and entry.seq == COMMITS + 1 and entry.action == "clean"
    assert entry.metadata["log_expired"] == FLOOR - 1 and entry.metadata["log_starts_at"] == FLOOR
    assert entry.metadata["log_retain_hours"] == 200.5 and entry.metadata["deleted"] == []
    assert "cleaned_before" not in entry.metadata  # no data file was cleaned: snapshots keep their files
    assert entry.metrics["log_entries_expired"] == FLOOR - 1 and entry.metrics["files_deleted"] == 0
    assert log_names(old_table) == [0, *range(FLOOR, COMMITS + 2)]  # oldest first, entry 0 kept

    for reader in (table, LakeTable(old_table)):  # this process, and a fresh one
        assert reader.commit_log.start() == FLOOR and reader.oldest_reachable() == FLOOR
        for seq in (99, 100, 150, 299, 300):  # every snapshot within the retention, and the one before
            assert live(reader, seq) == expected[seq], seq
        assert reader.snapshot(reader.commit_log.read(150).instant).seq == 150
        assert live(reader, 0) == set()  # the table as created: entry 0 is kept
        for seq in (1, 2, 89, 90, 98):
            with pytest.raises(LogEntryExpired) as info:
                reader.snapshot(seq)
            message = str(info.value)
            assert f"snapshot {seq} is older than the log keeps" in message
            assert "log.retain.hours = 200.5 h" in message
            assert f"oldest snapshot still reachable is seq {FLOOR}" in message
            assert isinstance(info.value, LakeSnapshotNotFound)
        assert live(reader) == expected[300]

    # the same clean again: nothing left to expire, nothing to record
    assert clean(table) is None and LakeTable(old_table).commit_log.head() == COMMITS + 1


def test_readers_of_expired_entries_get_the_named_error(old_table: str) -> None:
    table = LakeTable(old_table)
    instant_50 = table.commit_log.read(50).instant
    clean(table)
    fresh = LakeTable(old_table)
    with pytest.raises(LogEntryExpired, match=r"log entry 50 of .* has expired: `clean` deleted the log entries "
                       r"before 99, older than the table's log retention \(log.retain.hours = 200.5 h\)") as info:
        fresh.commit_log.read(50)
    assert f"The oldest snapshot still reachable is seq {FLOOR} (instant {fresh.commit_log.read(FLOOR).instant}" \
        in str(info.value) and "airflow-lake timeline" in str(info.value)
    assert (info.value.seq, info.value.start) == (50, FLOOR)
    with pytest.raises(LogEntryExpired):
        fresh.entries_since(10)
    with pytest.raises(LogEntryExpired):
        fresh.snapshot(instant_50)
    assert [e.seq for e in fresh.entries_since(298)] == [299, 300, 301]
    fresh.commit_log.read(0)  # the create is kept

    # restore: by seq or instant the same error; by time, one before the log refused naming the retention
    latest = fresh.state()
    with pytest.raises(LogEntryExpired):
        restore.plan(fresh, restore.target_of(to_seq=50))
    start_at = fresh.commit_log.read(FLOOR).completed_at
    with pytest.raises(LakeSpecError, match=r"before the oldest snapshot the log still holds \(seq 99.*log.retain"):
        restore.resolve(fresh, restore.target_of(to_timestamp=start_at - 1800), latest)
    target = fresh.commit_log.read(150)
    assert restore.resolve(fresh, restore.target_of(to_timestamp=target.completed_at + 1), latest) == 150
    assert restore.resolve(fresh, restore.target_of(to_timestamp=start_at), latest) == FLOOR


def test_the_timeline_and_reports_show_the_log_that_is_left(old_table: str) -> None:
    clean(LakeTable(old_table))
    table = LakeTable(old_table)
    timeline = table.timeline()
    assert [i.seq for i in timeline] == list(range(FLOOR, COMMITS + 2))
    assert [i.seq for i in table.timeline(limit=3)] == [299, 300, 301]
    assert [i.seq for i in table.timeline(limit=1000)] == list(range(FLOOR, COMMITS + 2))
    assert [r["seq"] for r in reports.timeline_data(table, 0)["instants"]] == list(range(FLOOR, COMMITS + 2))
    summary = reports.summary_data(table)
    assert summary["seq"] == COMMITS + 1 and summary["last_commit"]["action"] == "clean"
    # counting commits since the table's start counts those the log holds (a lower bound), without failing
    assert commits_since(table, START).count == COMMITS - FLOOR + 1


def test_log_retention_below_the_data_retention_is_raised_to_it(tmp_path: Path) -> None:
    """log.retain.hours shorter than clean.retain.hours would let the log forget snapshots whose files clean
    keeps: the log retention is raised to the data retention."""
    path = str(tmp_path / "t")
    build(path, COMMITS, hours_apart=1.0, properties={"log.retain.hours": "1", "clean.retain.hours": "200.5"})
    assert checkpoint_seqs(path) == [290, 300]
    entry = clean(LakeTable(path))
    assert entry is not None and entry.metadata["log_starts_at"] == FLOOR
    with pytest.raises(LogEntryExpired, match=r"log.retain.hours = 1 h, raised to clean.retain.hours = 200.5 h"):
        LakeTable(path).commit_log.read(5)


def test_a_clean_killed_mid_expiry_leaves_a_readable_table_and_a_retry_finishes(old_table: str,
                                                                                 monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    table = LakeTable(old_table)
    expected = {seq: live(table, seq) for seq in (FLOOR, 120, COMMITS)}
    deleted: list[str] = []
    original = type(table.storage).delete

    def killed_after_40(storage: Any, rel: str) -> bool:
        if len(deleted) == 40:
            raise KeyboardInterrupt("killed")  # the clean dies here, after 40 deletes (oldest first)
        deleted.append(rel)
        return original(storage, rel)

    monkeypatch.setattr(type(table.storage), "delete", killed_after_40)
    with pytest.raises(KeyboardInterrupt):
        clean(table)
    monkeypatch.undo()
    assert deleted == [paths.log_file(seq) for seq in range(1, 41)]
    halfway = LakeTable(old_table)
    assert halfway.commit_log.start() == 41 and checkpoint_seqs(old_table) == [FLOOR, 290, 300]
    for seq in (FLOOR, 120, COMMITS):
        assert live(halfway, seq) == expected[seq]
    assert [i.seq for i in halfway.timeline()][:2] == [41, 42]
    with pytest.raises(LogEntryExpired, match=f"oldest snapshot still reachable is seq {FLOOR}"):
        halfway.snapshot(50)  # entry 50 is there, but 41..50 fold from no checkpoint
    entry = clean(halfway, request_id="clean-1")  # the retry
    assert entry is not None and entry.metadata["log_expired"] == FLOOR - 41
    assert entry.metadata["log_starts_at"] == FLOOR and log_names(old_table)[:2] == [0, FLOOR]
    assert halfway.find_request("clean-1") == entry
    for seq in (FLOOR, 120, COMMITS):
        assert live(LakeTable(old_table), seq) == expected[seq]


def test_nothing_expires_within_the_retention_or_from_a_damaged_log(tmp_path: Path,
                                                                                   caplog: pytest.LogCaptureFixture
                                                                                   ) -> None:
    young = str(tmp_path / "young")
    build(young, 40)  # all of it completed now
    assert clean(LakeTable(young), retain_hours=0, force=True, now=time.time()) is None
    assert log_names(young) == list(range(41))

    damaged = str(tmp_path / "damaged")  # an entry the checkpoint at 99 would be folded from
    build(damaged, COMMITS, hours_apart=1.0, properties=RETAIN)
    Path(damaged, paths.log_file(95)).write_text('{"seq": 95')
    with caplog.at_level(logging.WARNING):
        assert clean(LakeTable(damaged)) is None
    assert "expires no log entries" in caplog.text and "00000000000000000095.json is damaged" in caplog.text
    assert log_names(damaged) == list(range(COMMITS + 1)) and checkpoint_seqs(damaged) == [290, 300]
    assert len(live(LakeTable(damaged), 5)) == 5  # the log still folds from the start


def test_requests_versions_and_specs_of_expired_entries(tmp_path: Path) -> None:
    """A retry of a request whose entry expired is refused (it ran; what it did cannot be read back), an upsert
    of a version applied by an expired entry is refused, and the daily `create(exist_ok)` of a table whose spec
    was changed by an expired entry still passes (the create, entry 0, is kept)."""
    path = str(tmp_path / "t")

    def special(table: TableMetadata, seq: int) -> dict[str, Any] | None:
        if seq == 5:
            return {"request_id": "req-5"}
        if seq == 6:
            return {"action": "upsert", "operation": "versioned_upsert", "metadata": {"versions": [7]}}
        if seq == 7:
            spec = table.spec.to_dict()
            spec["properties"] = {**spec.get("properties", {}), "user.note": "altered"}
            return {"action": "alter", "operation": "alter_table", "added": (), "metadata": {"spec": spec}}
        return None

    build(path, COMMITS, hours_apart=1.0, properties=RETAIN, special=special)
    created = LakeTable(path).commit_log.read(0).metadata["spec"]
    table = LakeTable(path)
    assert table.find_request("req-5") is not None and versions.applied(table, [7])[7].entry.seq == 6
    clean(table)
    fresh = LakeTable(path)
    with pytest.raises(LakeSpecError, match=r"'req-5' was committed as log entry 5, which `clean` has expired.*new "
                                            r"request id"):
        fresh.find_request("req-5")
    with pytest.raises(LakeSpecError, match=r"version\(s\) \[7\] were applied by log entry 6, which `clean` has "
                                            r"expired"):
        versions.applied(fresh, [7])
    assert versions.applied(fresh, [8]) == {}
    again = LakeTable.create(path, created, exist_ok=True)  # entry 0 holds the spec it was created with
    assert again.spec.properties.get("user.note") == "altered"


def test_the_command_line_shows_the_log_that_is_left_and_names_the_retention(old_table: str,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    from airflow_lake.cli import main

    assert main(["clean", old_table, "--json"]) == 0
    capsys.readouterr()
    assert main(["timeline", old_table, "--limit", "0", "--json"]) == 0  # (0: all)
    shown = json.loads(capsys.readouterr().out)["instants"]
    assert [i["seq"] for i in shown] == list(range(FLOOR, COMMITS + 2))
    assert main(["files", old_table, "--as-of", "50"]) == 2
    error = capsys.readouterr().err
    assert "snapshot 50 is older than the log keeps" in error and "log.retain.hours = 200.5 h" in error
    assert f"oldest snapshot still reachable is seq {FLOOR}" in error
    assert main(["files", old_table, "--as-of", str(FLOOR), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seq"] == FLOOR


def test_the_lake_page_shows_the_log_that_is_left(tmp_path: Path) -> None:
    """The Lake page reads old entries for its charts (the files a replace removed) and draws the layout before the
    last clustering: both stop where the log starts instead of failing."""
    from airflow_lake.lake.format.log import COMPLETES
    from airflow_lake.ui import app, data, pages, roots

    path = str(tmp_path / "t")

    def clustering(table: TableMetadata, seq: int) -> dict[str, Any] | None:
        if seq != FLOOR:  # a clustering exactly where the log will start, of files added by entries it expires
            return None
        old = [table.commit_log.read(s).added[0] for s in (3, 6, 9)]
        merged = dataclasses.replace(old[0], path=old[0].path.replace("-00000.", "-merged."))
        plan = instants.format_id(instants.id_millis(table.commit_log.read(0).instant) + 10**6)
        return {"action": "replace", "operation": "execute_clustering", "added": (merged,),
                "removed": tuple(f.path for f in old), "metadata": {COMPLETES: plan}}

    build(path, COMMITS, hours_apart=1.0, properties=RETAIN, special=clustering)
    clean(LakeTable(path))
    ref = roots.TableRef(0, "t", path)
    opened = data.Opened.of(ref)
    detail = data.table_detail(ref, 250, opened)
    assert [i["seq"] for i in detail["instants"]][-1] == FLOOR  # newest first, down to where the log starts
    assert detail["clustered_at"] == FLOOR and detail["total_instants"] == COMMITS + 2
    assert detail["charts"]["complete"] is False  # the files entry 99 removed were added by expired entries
    pictures = app._layouts(opened, detail["clustered_at"])
    assert len(pictures) == 1  # no "before the last clustering": snapshot 98 is older than the log keeps
    html = pages.table_page(detail, pictures)
    assert detail["instants"][0]["id"] in html and detail["instants"][-1]["id"] in html


def append_now(table: TableMetadata, seqs: range) -> None:
    base = instants.id_millis(table.commit_log.read(0).instant)
    for seq in seqs:
        append_entry(table, seq, base, time.time())


def test_a_clean_that_keeps_more_than_the_log_retention_keeps_those_snapshots_readable(old_table: str) -> None:
    """clean(retain_hours=250.5) keeps the files of snapshots 49..98, beyond the table's 200.5 h: the checkpoint
    it starts the log from is never deleted by the checkpoint retention of the commits after it."""
    table = LakeTable(old_table)
    expected = {seq: live(table, seq) for seq in (49, 60, 98, 150, COMMITS)}
    entry = clean(table, retain_hours=250.5)
    assert entry is not None and entry.metadata["log_starts_at"] == 49 and entry.metadata["log_retain_hours"] == 250.5
    append_now(table, range(COMMITS + 2, 321))  # two ordinary checkpoints (310, 320), each with its retention
    for reader in (table, LakeTable(old_table)):
        for seq, files in expected.items():
            assert live(reader, seq) == files, seq
        assert reader.oldest_reachable() == 49
    assert checkpoint_seqs(old_table) == [49, 310, 320]
    clean(LakeTable(old_table))  # the table's own retention: the log moves on to 99, and so does its checkpoint
    append_now(table, range(322, 331))
    assert checkpoint_seqs(old_table) == [FLOOR, 320, 330] and LakeTable(old_table).oldest_reachable() == FLOOR


def test_a_writers_checkpoint_retention_in_the_middle_of_a_clean_keeps_the_cleans_checkpoint(
        old_table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer's commit lands, with its checkpoint and retention, after clean wrote the checkpoint it starts the
    log from and before it deleted the entries (the log's start is still entry 0 then): the clean's mark keeps
    that checkpoint."""
    from airflow_lake.lake.maintenance import clean as clean_module

    table = LakeTable(old_table)
    expected = {seq: live(table, seq) for seq in (49, 60, 150, COMMITS)}
    original = clean_module._checkpoint_at

    def then_a_writer(at: TableMetadata, seq: int) -> None:
        original(at, seq)
        append_now(LakeTable(old_table), range(COMMITS + 1, 311))  # another process: checkpoint 310, retention

    monkeypatch.setattr(clean_module, "_checkpoint_at", then_a_writer)
    entry = clean(table, retain_hours=250.5)
    assert entry is not None and entry.metadata["log_starts_at"] == 49 and entry.seq == 311
    for seq, files in expected.items():
        assert live(LakeTable(old_table), seq) == files
    assert checkpoint_seqs(old_table) == [49, 300, 310]


def test_times_that_go_back_between_entries_are_never_skipped(tmp_path: Path) -> None:
    """Writers' clocks disagree: an entry may carry a time later than the entries after it. Log expiry keeps every
    snapshot current within the retention by the log's own times (up to the first young entry), and a restore to a
    time finds the snapshot current then — neither assumes times only grow (a binary search skipped the entry)."""
    path = str(tmp_path / "t")
    built = build(path, COMMITS, hours_apart=1.0, properties=RETAIN)
    for seq, hours_ago in ((40, 199), (125, 1)):  # written by writers whose clocks ran ahead
        raw = built.commit_log.read(seq).to_dict()
        raw["completed_at"] = time.time() - hours_ago * 3600
        built.storage.write_json(paths.log_file(seq), raw)
    table = LakeTable(path)
    snapshot_39 = live(table, 39)
    latest = table.state()
    target = table.commit_log.read(130).completed_at + 1  # entry 125 "completed" after that time: 124 was current
    assert restore.resolve(table, restore.target_of(to_timestamp=target), latest) == 124
    entry = clean(table)
    assert entry is not None and entry.metadata["log_starts_at"] == 39  # 39 was current until "199 h ago"
    assert live(LakeTable(path), 39) == snapshot_39 and LakeTable(path).oldest_reachable() == 39


def test_the_running_maximum_of_completion_times() -> None:
    times = {1: 10.0, 2: 30.0, 3: 20.0, 4: 25.0, 5: 40.0}
    assert history.newest_before(times.__getitem__, 1, 5, 25.0) == 1  # 2 (30) is not before 25: 3 and 4 neither
    assert history.newest_before(times.__getitem__, 1, 5, 30.0, inclusive=True) == 4
    assert history.newest_before(times.__getitem__, 1, 5, 5.0) is None
    assert history.newest_before(times.__getitem__, 1, 5, 99.0) == 5
    assert history.kept_checkpoints({10, 20, 49, 300, 310}, 2, 49) == {49, 300, 310}
    assert history.kept_checkpoints({10, 20, 49, 300, 310}, 2, 0, starting=20) == {20, 300, 310}
    assert history.kept_checkpoints({300, 310}, 2, 41) == {300, 310}  # (a killed clean's start: none before 300)
