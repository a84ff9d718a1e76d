"""Retries and repeated requests: the same request id never commits twice, and creating is retry-safe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeCommitConflict, LakeSpecError, LakeTable, LakeTableExists
from airflow_lake.lake.format.instants import ROLLED_BACK
from tests.lake.lake_core_helpers import data_file, make_table
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
