"""Iceberg publishing follows our log: a publish that fails or is killed at any step is caught up, in order, by the
next commit or `publish`; two publishers at once publish every entry once, in order (the catalog's commit check);
another lake table's Iceberg table is never written. Metadata only: synthetic data files, no Spark."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.publish import iceberg_catalog, iceberg_files, iceberg_publisher
from tests.lake.lake_core_helpers import append, data_file, make_table, on_disk, put_file
from tests.lake.publish import iceberg_readers as readers


class Killed(Exception):
    """The publisher dies here."""


def published_state(catalog: Any, name: str = "db.t") -> tuple[list[int], set[str]]:
    """The `lake.seq` of every snapshot, oldest first, and the current snapshot's file locations."""
    table = catalog.load_table(tuple(name.split(".")))
    seqs = [int(s.summary["lake.seq"]) for s in table.snapshots()]
    return seqs, {task.file.file_path for task in table.scan().plan_files()}


def live(table: LakeTable) -> set[str]:
    return {iceberg_files.file_uri(table.storage, f.path) for f in table.snapshot().files}


def changing(table: LakeTable) -> list[int]:
    """Our entries that change files, in order."""
    head = table.commit_log.head()
    return [e.seq for e in table.commit_log.entries(-1, head) if e.added or e.removed]


@pytest.mark.parametrize("step", ["before_create", "before_commit", "after_commit"])
def test_a_publish_killed_at_each_step_is_caught_up_in_order(tmp_path: Path, monkeypatch: Any, caplog: Any,
                                                             step: str) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)

    def die(real: Any, after: bool) -> Any:
        def dying(*args: Any, **kwargs: Any) -> Any:
            if after:
                real(*args, **kwargs)  # the catalog has the commit, the publisher dies before it returns
            raise Killed
        return dying

    if step == "before_create":  # the first publish dies before the Iceberg table exists
        monkeypatch.setattr(iceberg_catalog, "create", die(iceberg_catalog.create, after=False))
    table = make_table(str(tmp_path / "t"), readers.properties())
    append(table, "a")
    if step != "before_create":
        monkeypatch.setattr(iceberg_publisher, "_commit", die(iceberg_publisher._commit, after=step == "after_commit"))
    # the publisher dies after our commit landed: the commit stands, a warning says so
    with caplog.at_level(logging.WARNING):
        append(table, "b")
    assert table.commit_log.head() == 2
    assert "publishing it for other engines failed" in caplog.text
    monkeypatch.undo()
    readers.configure(monkeypatch, tmp_path)
    seqs, _ = published_state(catalog) if step != "before_create" else ([], set())
    assert seqs == ([1, 2] if step == "after_commit" else [1] if step == "before_commit" else [])
    append(table, "c")  # the next commit catches up, from where the dead one stopped
    seqs, files = published_state(catalog)
    expected = [3] if step == "before_create" else changing(table)  # never published: the head at once
    assert seqs == expected and files == live(table)
    result = table.publish()
    assert result.iceberg_written == 0 and result.iceberg_seq == 3


def test_a_table_configured_later_publishes_its_head_first(tmp_path: Path, monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    table = make_table(str(tmp_path / "t"))
    for part in ("a", "b", "a"):
        append(table, part)
    entry = table.alter_table([{"set_properties": readers.properties()}])
    # the first publish: the head in one snapshot (the Iceberg table did not exist)
    seqs, files = published_state(catalog)
    assert seqs == [entry.seq] and files == live(table)
    assert table.publish().iceberg_written == 0  # nothing more to do
    append(table, "c")
    seqs, files = published_state(catalog)
    assert seqs == [entry.seq, entry.seq + 1] and files == live(table)


def test_two_publishers_at_once_publish_each_entry_once_and_in_order(tmp_path: Path, monkeypatch: Any,
                                                                     caplog: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    table = make_table(str(tmp_path / "t"), readers.properties())
    monkeypatch.setattr("airflow_lake.lake.table.publisher.after_commit", lambda *args: None)
    for part in ("a", "b", "c"):
        append(table, part)
    real = iceberg_publisher._commit
    raced = []

    def racing(*args: Any, **kwargs: Any) -> bool:
        if not raced:  # publisher A has loaded the Iceberg table and built its first snapshot: B publishes it all
            raced.append(True)
            monkeypatch.setattr(iceberg_publisher, "_commit", real)
            iceberg_publisher.publish(LakeTable.open(table.url))
            monkeypatch.setattr(iceberg_publisher, "_commit", racing)
        return real(*args, **kwargs)

    monkeypatch.setattr(iceberg_publisher, "_commit", racing)
    with caplog.at_level(logging.INFO, logger=iceberg_publisher.__name__):
        result = iceberg_publisher.publish(table)  # A: its commit fails (B got there first), it reloads, is done
    assert raced and result.seq == 3 and result.written == 0
    assert "another publisher committed to the Iceberg table db.t first" in caplog.text
    seqs, files = published_state(catalog)
    assert seqs == changing(table) and files == live(table)


def test_an_iceberg_table_of_another_lake_table_is_never_written(tmp_path: Path, monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    first = make_table(str(tmp_path / "t1"), readers.properties())
    append(first, "a")
    second = make_table(str(tmp_path / "t2"), readers.properties())
    with pytest.raises(LakeError, match=r"belongs to the lake table .*t1.*Fix: set publish.iceberg.table"):
        second.publish()
    seqs, files = published_state(catalog)
    assert seqs == [1] and files == live(first)


def test_clean_expires_the_snapshots_whose_files_it_deleted(tmp_path: Path, monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    table = make_table(str(tmp_path / "t"), readers.properties())
    _, old = append(table, "a", disk=True)
    append(table, "b", disk=True)
    txn = table.begin("replace", "write")  # replaces the first file
    new = data_file(txn, "a")
    put_file(table, new)
    txn.commit(added=[new], removed=[old[0].path])
    before, _ = published_state(catalog)
    assert before == [1, 2, 3]
    entry = table.clean(retain_hours=0, force=True)
    assert entry is not None and entry.metadata["cleaned_before"] == 3 and not on_disk(table, old[0])
    seqs, files = published_state(catalog)
    assert seqs == [3] and files == live(table)  # the snapshots that named the deleted file are gone


def test_eight_writers_at_once_publish_every_entry_once_in_order(tmp_path: Path, monkeypatch: Any) -> None:
    import threading

    catalog = readers.configure(monkeypatch, tmp_path)
    table = make_table(str(tmp_path / "t"), {**readers.properties(), "heartbeat.timeout.seconds": "120"})
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            mine = LakeTable.open(table.url)
            barrier.wait(timeout=60)
            for _ in range(2):
                append(mine, f"p{index}")  # each commit publishes; racing publishers reload and go on
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors
    table.publish()  # catches up what a publisher that lost every race left (none need be left)
    seqs, files = published_state(catalog)
    assert seqs == changing(table) == list(range(1, 17)) and files == live(table)
