"""The delete operation through the job runner: its strict spec, exit code 2 for bad input, and a SIGKILL under
real spark-submit after its files are written, before its commit, that leaves the table as before."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.command_line import main
from airflow_lake.jobs.ops import delete as delete_op
from airflow_lake.jobs.registry import validate
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format.instants import pending
from tests.support import FAST_HEARTBEAT, parquet_files_on_disk, submit_and_kill, table_ids, write_source

TIMEOUT = float(FAST_HEARTBEAT["heartbeat.timeout.seconds"])


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"table": "/t"}, "filters", "needs `filters` or `where`"),
    ({"table": "/t", "filters": [], "request_id": "r"}, "filters", "empty list never means every row"),
    ({"table": "/t", "filters": [["k", "=", 1]], "where": "k = 1"}, "where", "exactly one"),
    ({"table": "/t", "filters": "k = 1"}, "filters", "not a list"),
    ({"table": "/t", "where": "  "}, "where", "empty"),
    ({"table": "/t", "where": "k = 1", "keys": [1], "version": 3}, "keys", "not both"),  # keys: primary-key tables
])
def test_bad_delete_specs_are_refused_before_spark_starts(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(LakeSpecError, match=words) as err:
        validate("delete", spec)
    assert err.value.field == field and err.value.fix


def test_the_runner_exits_2_for_a_bad_delete_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delete", "--spec", '{"table": "/nowhere", "filters": []}']) == 2
    assert "empty list never means every row" in capsys.readouterr().err


def test_the_kind_of_table_picks_the_delete(spark: Any, tmp_path: Path) -> None:
    plain = LakeTable.create(str(tmp_path / "plain"), {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    pk = LakeTable.create(str(tmp_path / "pk"), {"schema": "id BIGINT NOT NULL, n BIGINT", "primary_key": ["id"],
                                                 "bucket": {"columns": ["id"], "count": 2}})
    assert delete_op.delete_for(plain) is not delete_op.delete_for(pk)
    with pytest.raises(LakeSpecError, match="versioned delete, with `keys` and `version`") as err:
        run(spark, "delete", {"table": pk.url, "filters": [["id", "=", 1]]})
    assert err.value.field == "table" and pk.commit_log.head() == 0


@pytest.mark.slow
@pytest.mark.parametrize("point", ["during_place", "before_commit"])
def test_sigkill_during_a_delete_leaves_the_table_as_before(
        spark: Any, table_path: str, tmp_path: Path, point: str) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                  "properties": FAST_HEARTBEAT})
    ids = list(range(300))
    run(spark, "write", {"table": table_path, "source": {"path": write_source(
        tmp_path / "a.parquet", ids, ["d1", "d2", "d3"] * 100)}})
    before = parquet_files_on_disk(table_path)
    head = LakeTable.open(table_path).commit_log.head()
    spec = {"table": table_path, "where": "id % 7 = 0 AND dt <> 'd3'", "request_id": "dag/forget/1/-1"}
    submit_and_kill("delete", spec, point, table_path, tmp_path)

    table = LakeTable.open(table_path)
    assert table.commit_log.head() == head and table_ids(spark, table_path) == ids  # as before
    assert {f.path for f in table.snapshot().files} == before
    assert len(pending(table.storage)) == 1 and parquet_files_on_disk(table_path) > before  # its files: not live

    time.sleep(TIMEOUT + 0.5)  # the killed writer's heartbeat goes stale
    out = run(spark, "delete", spec)  # the Airflow retry: rolls the dead try back, then deletes
    assert out["already_committed"] is False and out["rows_deleted"] == len([i for i in ids if i % 7 == 0
                                                                             and i % 3 != 2])
    assert table_ids(spark, table_path) == [i for i in ids if not (i % 7 == 0 and i % 3 != 2)]
    assert pending(table.storage) == []
    live = {f.path for f in table.snapshot().files}
    assert parquet_files_on_disk(table_path) - live - before == set()  # the killed try's files went with its rollback
