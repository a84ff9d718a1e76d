"""Retries and repeated requests: the same request id never commits twice (a retry returns the first try's result),
one reused for other inputs is refused, and creating is retry-safe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import DataFile, LakeCommitConflict, LakeSpecError, LakeTable, LakeTableExists
from airflow_lake.lake.commit import requests
from airflow_lake.lake.format.instants import ROLLED_BACK, pending
from airflow_lake.lake.write import append_overwrite
from tests.lake.lake_core_helpers import append, backdate, data_file, make_table, on_disk, put_file
from tests.support import parquet_files_on_disk, write_source

SPEC = {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]}


def test_create_is_retry_safe_for_its_own_request_only(table_path: str) -> None:
    LakeTable.create(table_path, SPEC, request_id="dag/create/run1/-1")
    again = LakeTable.create(table_path, SPEC, request_id="dag/create/run1/-1")  # the task's retry
    assert again.commit_log.head() == 0
    with pytest.raises(LakeTableExists, match="already exists"):
        LakeTable.create(table_path, SPEC, request_id="someone-else")
    with pytest.raises(LakeTableExists):
        LakeTable.create(table_path, {**SPEC, "schema": "id BIGINT, dt STRING, x INT"},
                         request_id="dag/create/run1/-1")


def test_two_tries_of_one_request_cannot_both_commit(table_path: str) -> None:
    table = make_table(table_path)
    zombie = table.begin("commit", "write", request_id="dag/task/run/-1")  # a try Airflow gave up on
    retry = table.begin("commit", "write", request_id="dag/task/run/-1")
    first = retry.commit(added=[data_file(retry, "a")])
    with pytest.raises(LakeCommitConflict, match="committed meanwhile"):
        try:
            zombie.commit(added=[data_file(zombie, "a")])
        except LakeCommitConflict:
            zombie.abort()
            raise
    fresh = LakeTable.open(table_path)
    assert [f.instant for f in fresh.snapshot().files] == [first.instant]
    assert {i.id: i.state for i in fresh.timeline()}[zombie.instant] == ROLLED_BACK
    assert fresh.find_request("dag/task/run/-1") == first


@pytest.mark.parametrize("value", ["0.5", "2.5", "0", "-3", "many"])
def test_checkpoint_interval_must_be_a_whole_positive_number(table_path: str, value: str) -> None:
    with pytest.raises(LakeSpecError, match=r"properties\.checkpoint\.interval"):
        LakeTable.create(table_path, {**SPEC, "properties": {"checkpoint.interval": value}})
    assert not LakeTable.exists(table_path)


def test_a_request_id_of_another_operation_is_refused_not_taken_for_a_retry(
        spark: Any, table_path: str, tmp_path: Path) -> None:
    """The create's request id given to a write: an error naming the field, not a silent no-op."""
    run(None, "create_table", {"table": table_path, "schema": "id BIGINT, dt STRING, v DOUBLE",
                               "request_id": "shared-id"})
    source = write_source(tmp_path / "s.parquet", [1, 2], "d")
    with pytest.raises(LakeSpecError, match=r"request_id: 'shared-id' was already used by instant .* create_table"):
        run(spark, "write", {"table": table_path, "source": {"path": source}, "request_id": "shared-id"})
    table = LakeTable.open(table_path)
    with pytest.raises(LakeSpecError, match="request id of its own"):
        table.write(spark.read.parquet(source), request_id="shared-id")
    with pytest.raises(LakeSpecError, match="request_id"):
        table.begin("commit", "write", request_id="shared-id")
    assert table.commit_log.head() == 0 and table.timeline()[-1].action == "create"
    assert parquet_files_on_disk(table_path) == set()
    # the table still writes, and a real retry of a write is still recognised
    first = run(spark, "write", {"table": table_path, "source": {"path": source}, "request_id": "w-1"})
    again = run(spark, "write", {"table": table_path, "source": {"path": source}, "request_id": "w-1"})
    assert (first["already_committed"], again["already_committed"]) == (False, True)
    assert again["instant"] == first["instant"] and table.snapshot().rows == 2


def test_the_same_request_id_with_other_inputs_is_refused_before_anything_is_written(
        spark: Any, table_path: str, tmp_path: Path) -> None:
    """Two loads under one request id (a copied task id, a reused run id): the second is not a retry, and
    taking the first's commit for its result would silently drop its rows."""
    run(None, "create_table", {"table": table_path, "schema": "id BIGINT, dt STRING, v DOUBLE",
                               "partition_by": ["dt"]})
    monday = write_source(tmp_path / "monday.parquet", [1, 2], "2024-01-01")
    tuesday = write_source(tmp_path / "tuesday.parquet", [3, 4, 5], "2024-01-02")
    first = run(spark, "write", {"table": table_path, "source": {"path": monday}, "request_id": "load-1"})
    table = LakeTable.open(table_path)
    recorded = table.commit_log.read(first["seq"]).metadata[requests.FINGERPRINT]
    assert isinstance(recorded, str) and len(recorded) == 64
    head, files = table.commit_log.head(), parquet_files_on_disk(table_path)

    with pytest.raises(LakeSpecError, match=rf"request_id: 'load-1' already belongs to instant {first['instant']} "
                       r"\(log entry 1\), a write with other inputs \(request fingerprint [0-9a-f]{12}, this one "
                       r"[0-9a-f]{12}\).*Fix: Give each distinct load its own request id"):
        run(spark, "write", {"table": table_path, "source": {"path": tuesday}, "request_id": "load-1"})
    with pytest.raises(LakeSpecError, match="request_id"):  # an overwrite of the same files is another request too
        run(spark, "write", {"table": table_path, "source": {"path": monday}, "mode": "overwrite",
                             "request_id": "load-1"})
    with pytest.raises(LakeSpecError, match="request_id"):  # the core, given a fingerprint, refuses it too
        append_overwrite.write(table, spark.read.parquet(tuesday), request_id="load-1", request_fingerprint="0" * 64)
    assert table.commit_log.head() == head and parquet_files_on_disk(table_path) == files
    assert table.snapshot().rows == 2 and pending(table.storage) == []

    # a real retry (a setting that guards the run but defines no data may differ) is still recognised
    again = run(spark, "write", {"table": table_path, "source": {"path": monday}, "request_id": "load-1",
                                 "max_exchanges": 3})
    assert again == {**first, "already_committed": True}
    assert table.commit_log.head() == head


def test_a_commit_from_before_fingerprints_is_still_taken_for_the_retry(
        spark: Any, table_path: str, tmp_path: Path) -> None:
    """Entries written without a fingerprint (older versions, the API without one) answer retries as before."""
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    source = write_source(tmp_path / "s.parquet", [1, 2], "d")
    entry = LakeTable.open(table_path).write(spark.read.parquet(source), request_id="old-1")
    assert requests.FINGERPRINT not in entry.metadata
    other = write_source(tmp_path / "other.parquet", [7], "d")
    again = run(spark, "write", {"table": table_path, "source": {"path": other}, "request_id": "old-1"})
    assert again["already_committed"] is True and again["instant"] == entry.instant
    assert LakeTable.open(table_path).commit_log.head() == entry.seq


def test_an_upsert_retry_with_another_version_is_refused(spark: Any, table_path: str, tmp_path: Path) -> None:
    LakeTable.create(table_path, {"schema": "k BIGINT NOT NULL, n BIGINT", "primary_key": ["k"],
                                  "bucket": {"columns": ["k"], "count": 2}})
    csv = tmp_path / "batch.csv"
    csv.write_text("k,n\n1,10\n2,20\n")
    spec = {"table": table_path, "source": {"path": str(csv), "format": "csv"}, "version": 1, "request_id": "u-1"}
    first = run(spark, "versioned_upsert", spec)
    with pytest.raises(LakeSpecError, match=r"request_id: 'u-1' already belongs to .* a versioned_upsert with other"):
        run(spark, "versioned_upsert", {**spec, "version": 2})
    again = run(spark, "versioned_upsert", spec)
    assert again == {**first, "already_committed": True}
    assert LakeTable.open(table_path).commit_log.head() == first["seq"]


def test_a_bucket_rewrite_retry_into_another_bucket_count_is_refused(
        spark: Any, table_path: str, tmp_path: Path) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    run(spark, "write", {"table": table_path, "source": {"path": write_source(tmp_path / "s.parquet", [1, 2, 3], "d")}})
    spec = {"table": table_path, "bucket": {"columns": ["id"], "count": 2}, "request_id": "b-1"}
    first = run(spark, "bucket_rewrite", spec)
    files = parquet_files_on_disk(table_path)
    with pytest.raises(LakeSpecError, match=r"request_id: 'b-1' already belongs to .* a bucket_rewrite with other"):
        run(spark, "bucket_rewrite", {**spec, "bucket": {"columns": ["id"], "count": 4}})
    table = LakeTable.open(table_path)
    assert table.commit_log.head() == first["seq"] and parquet_files_on_disk(table_path) == files
    assert table.spec.bucket is not None and table.spec.bucket.count == 2


def test_a_schedule_retry_with_other_settings_is_refused(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", size=1024 * 1024)
    spec = {"table": table_path, "request_id": "p-1"}
    first = run(None, "schedule_clustering", spec)
    stored = next(p for p in pending(table.storage) if p.id == first["plan_id"])
    assert isinstance(stored.metadata.get(requests.FINGERPRINT), str)  # kept with the plan
    with pytest.raises(LakeSpecError, match=rf"'p-1' already belongs to clustering plan {first['plan_id']}, a "
                       "schedule_clustering with other inputs"):
        run(None, "schedule_clustering", {**spec, "min_commits": 2, "sort_columns": ["id"]})
    assert run(None, "schedule_clustering", spec)["already_scheduled"] is True
    assert [p.id for p in pending(table.storage)] == [first["plan_id"]]


def _replace_on_disk(table: LakeTable, old: DataFile) -> DataFile:
    """Replace `old` by a new file on disk: `old` becomes a removed file for clean."""
    txn = table.begin("replace", "compact_upserts")
    new = data_file(txn, "a")
    put_file(table, new)
    txn.commit(added=[new], removed=[old.path])
    return new


def test_a_retry_of_clean_returns_the_first_result_and_commits_nothing(table_path: str) -> None:
    """Between the tries another file expired: the retry must not clean it under the first try's request."""
    table = make_table(table_path)
    _, (f1,) = append(table, "a", disk=True)
    f2 = _replace_on_disk(table, f1)
    spec = {"table": table_path, "retain_hours": 0, "force": True, "request_id": "dag/clean/run1/-1"}
    first = run(None, "clean", spec)
    assert first["files_deleted"] == 1 and not on_disk(table, f1)
    _replace_on_disk(table, f2)
    head = table.commit_log.head()

    again = run(None, "clean", spec)

    # (where publishing stands is the table's now, added by the runner: not part of the first result)
    def result(metrics: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in metrics.items() if k not in ("published_seq", "unpublished_commits")}

    assert result(again) == result({**first, "already_committed": True})
    assert table.commit_log.head() == head and on_disk(table, f2)  # left for the next clean


def test_a_retry_of_remove_orphan_files_returns_the_first_result_and_commits_nothing(table_path: str) -> None:
    table = make_table(table_path)
    append(table, "a", disk=True)
    junk = [table.storage.path(f"dt=a/junk-{i}.bin") for i in (1, 2)]
    Path(junk[0]).write_bytes(b"left by a crashed writer")
    spec = {"table": table_path, "older_than_hours": 0, "force": True, "request_id": "dag/orphans/run1/-1"}
    first = run(None, "remove_orphan_files", spec)
    assert first["files_deleted"] == 1 and not Path(junk[0]).exists()
    Path(junk[1]).write_bytes(b"another one")
    head = table.commit_log.head()

    again = run(None, "remove_orphan_files", spec)

    assert again == {**first, "already_committed": True}
    assert table.commit_log.head() == head and Path(junk[1]).exists()


def test_a_retry_of_rollback_pending_returns_the_first_result_and_commits_nothing(table_path: str) -> None:
    table = make_table(table_path)

    def dead_writer() -> str:
        txn = table.begin("commit", "write")
        txn._heartbeat.stop()
        backdate(table, txn.instant, 30)
        return txn.instant

    first_dead = dead_writer()
    spec = {"table": table_path, "request_id": "dag/rollback/run1/-1"}
    first = run(None, "rollback_pending", spec)
    assert first["rolled_back"] == [first_dead]
    second_dead = dead_writer()
    head = table.commit_log.head()

    again = run(None, "rollback_pending", spec)

    assert again == {**first, "already_committed": True}
    assert table.commit_log.head() == head and second_dead in {p.id for p in pending(table.storage)}
