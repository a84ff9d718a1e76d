"""Retries and repeated requests: the same request id never commits twice, and creating is retry-safe."""

from __future__ import annotations

import pytest

from airflow_lake.lake import LakeCommitConflict, LakeSpecError, LakeTable, LakeTableExists
from airflow_lake.lake.instants import ROLLED_BACK
from tests.lake.lake_core_helpers import data_file, make_table

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
