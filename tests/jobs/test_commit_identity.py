"""Issue 23: every commit records the Airflow task instance that made it (the spec's `airflow` field, log entry
metadata "airflow"), for every operation that commits, through the job runner as the operators call it; a retry
with another try number is the same request; specs and entries without it stay valid."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.command_line import main
from airflow_lake.jobs.protocol import EXIT_BAD_INPUT
from airflow_lake.jobs.registry import validate
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format.instants import REQUESTED
from tests.support import write_source

DAG, RUN = "lake_daily", "scheduled__2024-03-01T00:00:00+00:00"


def who(task: str, *, try_number: int = 1, map_index: int = -1, run_id: str = RUN) -> dict[str, Any]:
    """The `airflow` field LakeOperator sends for task `task`."""
    return {"dag_id": DAG, "run_id": run_id, "task_id": task, "map_index": map_index, "try_number": try_number}


def job(spark: Any, operation: str, spec: dict[str, Any], task: str, **identity: Any) -> dict[str, Any]:
    """`operation` as task `task` of the daily run submits it: its own request id and task instance."""
    return run(spark, operation, {**spec, "request_id": f"{DAG}/{task}/{RUN}", "airflow": who(task, **identity)})


def task_of(request_id: str | None) -> str:
    assert request_id is not None
    return request_id.split("/")[1]


def test_every_operation_records_the_task_that_committed(spark: Any, tmp_path: Path) -> None:
    events, users = str(tmp_path / "events"), str(tmp_path / "users")
    job(None, "create_table", {"table": events, "schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]},
        "create_events")
    for i in range(3):
        job(spark, "write", {"table": events, "source": {"path": write_source(
            tmp_path / f"e{i}.parquet", range(i * 10, i * 10 + 10), ["d1", "d2"] * 5)}}, f"load_{i}")
    plan = job(None, "schedule_clustering", {"table": events, "min_commits": 0}, "plan")
    pending_plan = next(i for i in LakeTable.open(events).timeline() if i.id == plan["plan_id"])
    assert pending_plan.state == REQUESTED and pending_plan.metadata["airflow"] == who("plan")  # who planned it
    job(spark, "execute_clustering", {"table": events, "plan_id": plan["plan_id"]}, "cluster")
    job(spark, "write", {"table": events, "source": {"path": write_source(tmp_path / "e3.parquet", [100, 101], "d1")}},
        "load_3")
    second = job(None, "schedule_clustering", {"table": events, "min_commits": 0}, "plan_again")
    job(None, "rollback_pending", {"table": events, "instants": [second["plan_id"]]}, "drop_plan")
    job(spark, "delete", {"table": events, "filters": [["id", "=", 100]]}, "forget")
    job(spark, "bucket_rewrite", {"table": events, "partitions": {"from": {"dt": "d2"}},
                                  "bucket": {"columns": ["id"], "count": 2}}, "rebucket")
    job(None, "alter_table", {"table": events, "changes": [{"add": "note", "type": "STRING"}]}, "alter")
    job(None, "restore", {"table": events, "to_seq": 4}, "undo")
    job(None, "clean", {"table": events, "retain_hours": 0, "force": True}, "clean")
    debris = Path(events, "dt=d1", "part-20200101000000000-debris.parquet")
    debris.parent.mkdir(parents=True, exist_ok=True)  # (data files lie in write directories below `data/`)
    debris.write_bytes(b"debris")
    os.utime(debris, (time.time() - 7200, time.time() - 7200))
    job(None, "remove_orphan_files", {"table": events, "older_than_hours": 1, "force": True}, "orphans")

    job(None, "create_table", {"table": users, "schema": "user_id BIGINT NOT NULL, visits BIGINT",
                               "primary_key": ["user_id"], "bucket": {"columns": ["user_id"], "count": 2}},
        "create_users")
    for version in (1, 2):
        job(spark, "versioned_upsert", {"table": users, "version": version, "source": {"path": _users(
            spark, tmp_path / f"u{version}.parquet", version)}}, f"upsert_{version}", map_index=version - 1)
    job(spark, "delete", {"table": users, "keys": [{"user_id": 3}], "version": 3}, "forget_user")
    job(spark, "compact_upserts", {"table": users}, "compact")

    made: dict[str, set[str]] = {}
    for path in (events, users):
        entries = list(LakeTable.open(path).commit_log.entries(-1))
        for entry in entries:
            task = task_of(entry.request_id)
            mapped = int(task.rsplit("_", 1)[1]) - 1 if task.startswith("upsert_") else -1
            assert entry.metadata["airflow"] == who(task, map_index=mapped), (entry.seq, entry.operation)
            made.setdefault(entry.operation, set()).add(entry.action)
    assert made == {
        "create_table": {"create"}, "write": {"commit"}, "execute_clustering": {"replace"},
        "rollback_pending": {"rollback"}, "delete": {"replace", "upsert"}, "bucket_rewrite": {"replace"},
        "alter_table": {"alter"}, "restore": {"restore"}, "clean": {"clean"}, "remove_orphan_files": {"clean"},
        "versioned_upsert": {"upsert"}, "compact_upserts": {"replace"},
    }


def _users(spark: Any, path: Path, version: int) -> str:
    spark.createDataFrame([(i, version) for i in range(6)], "user_id BIGINT, visits BIGINT").write.parquet(str(path))
    return str(path)


def test_a_retry_with_another_try_number_is_the_same_request(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    LakeTable.create(path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    spec = {"table": path, "source": {"path": write_source(tmp_path / "a.parquet", range(5), "d1")}}
    first = job(spark, "write", spec, "load")
    retry = job(spark, "write", spec, "load", try_number=2)  # its first try committed, then the task failed
    assert first["already_committed"] is False and retry == {**first, "already_committed": True}
    # a new DAG run keyed on the same load (request_id set by the user) is that request too
    rerun = job(spark, "write", spec, "load", run_id="manual__2024-03-02T00:00:00+00:00")
    assert rerun["already_committed"] is True
    table = LakeTable.open(path)
    assert table.commit_log.head() == 1 and table.snapshot().rows == 5
    assert table.commit_log.read(1).metadata["airflow"] == who("load")  # the try that committed

    # without `airflow` (the CLI, a notebook, a job from before): valid, and nothing recorded
    plain = run(spark, "write", {**spec, "request_id": "by-hand"})
    entry = LakeTable.open(path).commit_log.read(plain["seq"])
    assert "airflow" not in entry.metadata and plain["already_committed"] is False
    listed = [i.to_dict()["metadata"].get("airflow") for i in LakeTable.open(path).timeline()]
    assert listed == [None, who("load"), None]  # the timeline (CLI, Lake page) carries it as the log has it


@pytest.mark.parametrize(("airflow", "field"), [
    ("lake_daily/load", "airflow"),
    ({**who("t"), "task_id": ""}, "airflow.task_id"),
    ({**who("t"), "map_index": True}, "airflow.map_index"),
    ({**who("t"), "map_index": -2}, "airflow.map_index"),
    ({**who("t"), "try_number": "1"}, "airflow.try_number"),
    ({k: v for k, v in who("t").items() if k != "run_id"}, "airflow.run_id"),
    ({**who("t"), "task": "t"}, "airflow.task"),
])
def test_a_bad_airflow_field_is_refused_before_anything_is_written(tmp_path: Path, airflow: Any, field: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "t")
    spec = {"table": path, "schema": "id BIGINT", "airflow": airflow}
    with pytest.raises(LakeSpecError) as info:
        validate("create_table", spec)
    assert info.value.field == field and "Fix:" in str(info.value)
    assert main(["create_table", "--spec", json.dumps(spec)]) == EXIT_BAD_INPUT  # spark-submit's exit code
    assert field in capsys.readouterr().err
    assert not Path(path).exists()
