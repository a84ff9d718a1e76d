"""An empty list never means "everything" (issue 20, item 2): operators whose partitions, instants or plan come
from an upstream task that found none — an XComArg of `[]`, a template rendering "[]", a plan_id of None —
commit nothing and return `noop` metrics; run by `airflow dags test` (real Airflow context and XComs)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.registry import validate
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.operators.bucket_rewrite import BucketRewriteOperator
from airflow_lake.operators.clustering import ScheduleClusteringOperator
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.maintenance import LakeRollbackPendingOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator
from tests.airflow_stack import migrate_db
from tests.support import write_source

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def test_operators_pass_an_empty_selection_on_instead_of_dropping_it() -> None:
    """Before: `partitions=[]` was dropped from the spec, which then meant the whole table."""
    write = LakeWriteOperator(task_id="w", table="/t", source_path="/in", mode="overwrite", partitions=[])
    assert write.build_spec({})["partitions"] == []  # type: ignore[arg-type]
    for rendered in ("[]", " [] ", "", "None"):  # what a template of an upstream XCom renders
        write.partitions = rendered
        assert write.build_spec({})["partitions"] == [], rendered  # type: ignore[arg-type]
    write.partitions = "[{'dt': '2024-01-01'}]"  # a Python repr, as Jinja renders a list
    assert write.build_spec({})["partitions"] == [{"dt": "2024-01-01"}]  # type: ignore[arg-type]
    whole = LakeWriteOperator(task_id="w", table="/t", source_path="/in", mode="overwrite")
    assert "partitions" not in whole.build_spec({})  # type: ignore[arg-type]  # left out: the whole table
    assert BucketRewriteOperator(task_id="b", table="/t", partitions=[]).build_spec(  # type: ignore[arg-type]
        {}) == {"partitions": []}
    assert CompactUpsertsOperator(task_id="c", table="/t", partitions="[]").build_spec(  # type: ignore[arg-type]
        {}) == {"partitions": []}
    assert ScheduleClusteringOperator(task_id="p", table="/t", partitions=[]).build_spec(  # type: ignore[arg-type]
        {})["partitions"] == []
    assert LakeRollbackPendingOperator(task_id="r", table="/t", instants=[]).build_spec(  # type: ignore[arg-type]
        {}) == {"instants": []}
    one = LakeRollbackPendingOperator(task_id="r", table="/t", instants="20240101000000000")  # type: ignore[arg-type]
    assert one.build_spec({}) == {"instants": ["20240101000000000"]}  # type: ignore[arg-type]  # not 17 letters
    upsert = VersionedUpsertOperator(task_id="u", table="/t", source_path="/in", version="{{ params.v }}")
    upsert.version = ""  # as rendered: an error, not a silent switch to the table's version column
    with pytest.raises(LakeSpecError, match="version: '' is not a whole number"):
        validate(upsert.operation, {"table": "/t", **upsert.build_spec({})})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partitions must be a list"):
        LakeWriteOperator(task_id="w", table="/t", source_path="/in", mode="overwrite",
                          partitions="[{'dt': ").build_spec({})  # type: ignore[arg-type]


DAG_FILE = '''
import pendulum
from airflow.sdk import DAG, task
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow_lake.operators.bucket_rewrite import BucketRewriteOperator
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.maintenance import LakeRollbackPendingOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator

TABLE, KEYED, SOURCE = {table!r}, {keyed!r}, {source!r}
with DAG("lake_empty_test", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False):
    @task
    def changed_partitions():
        return []  # an upstream task that found nothing to redo

    @task
    def no_plan():
        return None

    parts = changed_partitions()
    LakeWriteOperator(task_id="overwrite", table=TABLE, source_path=SOURCE, mode="overwrite", partitions=parts)
    parts >> LakeWriteOperator(task_id="overwrite_text", table=TABLE, source_path=SOURCE, mode="overwrite",
                               partitions="{{{{ ti.xcom_pull(task_ids='changed_partitions') }}}}")
    BucketRewriteOperator(task_id="rewrite", table=TABLE, partitions=parts, bucket={{"columns": ["id"], "count": 4}})
    CompactUpsertsOperator(task_id="compact", table=KEYED, partitions=parts)
    plan = ScheduleClusteringOperator(task_id="plan", table=TABLE, min_commits=0, sort_columns=["id"],
                                      partitions=parts)
    plan >> EmptyOperator(task_id="after_plan")
    ExecuteClusteringOperator(task_id="execute", table=TABLE, plan_id=no_plan())
    LakeRollbackPendingOperator(task_id="rollback", table=TABLE, instants=parts)
'''


def metrics_lines(log: str) -> list[dict[str, Any]]:
    out = []
    for line in log.splitlines():
        if "AIRFLOW_LAKE_METRICS " in line:
            text = line.split("AIRFLOW_LAKE_METRICS ", 1)[1]
            out.append(json.loads(text[:text.rindex("}") + 1]))
    return out


@pytest.mark.slow
def test_upstream_tasks_that_select_nothing_change_nothing_in_airflow_dags_test(spark: Any, tmp_path: Path) -> None:
    table_path = str(tmp_path / "lake" / "events")
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    for i, day in enumerate(("d1", "d2")):
        run(spark, "write", {"table": table_path, "source": {"path": write_source(
            tmp_path / f"{day}.parquet", list(range(i * 10, i * 10 + 10)), day)}})
    plan = run(None, "schedule_clustering", {"table": table_path, "min_commits": 0, "sort_columns": ["id"]})
    assert plan["plan_id"] is not None  # a pending plan: `which="oldest"` would have run it
    keyed_path = str(tmp_path / "lake" / "keyed")
    LakeTable.create(keyed_path, {"schema": "k BIGINT NOT NULL, dt STRING, v BIGINT", "partition_by": ["dt"],
                                  "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2}})
    for version in (1, 2):  # two upserts of partition d1: compaction would have work there
        source = tmp_path / f"k{version}.parquet"
        pq.write_table(pa.table({"k": pa.array(range(6), pa.int64()), "dt": ["d1"] * 6,
                                 "v": pa.array([version] * 6, pa.int64())}), source)
        run(spark, "versioned_upsert", {"table": keyed_path, "version": version, "source": {"path": str(source)}})
    tables = {path: LakeTable.open(path) for path in (table_path, keyed_path)}
    before = {path: (t.commit_log.head(), {f.path for f in t.snapshot().files}) for path, t in tables.items()}
    rows = sorted(r["id"] for r in LakeTable.open(table_path).read(spark).collect())

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lake_empty_test.py").write_text(DAG_FILE.format(
        table=table_path, keyed=keyed_path, source=write_source(tmp_path / "new.parquet", [99], "d1")))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate_db(env)
    done = subprocess.run([AIRFLOW, "dags", "test", "lake_empty_test", "2024-03-01"], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        states = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = 'lake_empty_test'"))
    assert states == {"changed_partitions": "success", "no_plan": "success", "overwrite": "success",
                      "overwrite_text": "success", "rewrite": "success", "compact": "success", "plan": "success",
                      "after_plan": "skipped", "execute": "success", "rollback": "success"}, states

    for path in tables:  # nothing committed, no file replaced: the rows are as they were
        fresh = LakeTable.open(path)
        assert (fresh.commit_log.head(), {f.path for f in fresh.snapshot().files}) == before[path], path
    assert sorted(r["id"] for r in LakeTable.open(table_path).read(spark).collect()) == rows
    assert [p.id for p in pending_plans(LakeTable.open(table_path))] == [plan["plan_id"]]  # not run
    assert LakeTable.open(table_path).spec.bucket is None

    noops = {(m["operation"], m["reason"]) for m in metrics_lines(log) if m.get("noop")}
    empty = "`partitions` is an empty list: nothing selected, nothing to do"
    assert {("write", empty), ("bucket_rewrite", empty), ("compact_upserts", empty), ("schedule_clustering", empty),
            ("rollback_pending", "`instants` is an empty list: nothing selected, nothing to do")} <= noops, noops
    assert any(op == "execute_clustering" and reason.startswith("plan_id is empty") for op, reason in noops), noops
    assert log.count("Nothing submitted, nothing committed.") >= 7
    assert "Submitting" not in log and "over Spark Connect" not in log  # no Spark job for nothing
