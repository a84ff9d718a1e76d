"""Issue 23: `request_id` on every lake operator (templated; default dag_id/task_id/run_id/map_index) and the task
instance each commit records (log entry metadata "airflow"), in real Airflow runs (`dag.test()`, spark-submit)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.maintenance import LakeCleanOperator
from tests.airflow_stack import migrate_db
from tests.support import write_source

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def _operator_classes() -> list[type[LakeOperator]]:
    import importlib
    import pkgutil

    import airflow_lake.operators

    for module in pkgutil.iter_modules(airflow_lake.operators.__path__):
        importlib.import_module(f"airflow_lake.operators.{module.name}")
    found: list[type[LakeOperator]] = []
    todo: list[type[LakeOperator]] = [LakeOperator]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def test_every_lake_operator_takes_a_templated_request_id() -> None:
    classes = _operator_classes()
    assert len(classes) >= 12
    for cls in classes:
        assert "request_id" in cls.template_fields, cls.__name__
    op = LakeCleanOperator(task_id="c", table="/lake/t", request_id="{{ ds }}-clean")
    assert op.request_id == "{{ ds }}-clean"  # rendered when the task runs


def ti(map_index: int = -1, try_number: int = 1) -> SimpleNamespace:
    return SimpleNamespace(dag_id="d", task_id="load", run_id="manual__1", map_index=map_index, try_number=try_number)


def test_the_request_id_a_task_sends() -> None:
    default = LakeCleanOperator(task_id="c", table="/lake/t")
    assert default.effective_request_id({"ti": ti(3)}) == "d/load/manual__1/3"  # type: ignore[typeddict-item]
    assert default.task_identity({"ti": ti(3, 2)}) == {  # type: ignore[typeddict-item]
        "dag_id": "d", "run_id": "manual__1", "task_id": "load", "map_index": 3, "try_number": 2}
    keyed = LakeCleanOperator(task_id="c", table="/lake/t", request_id="{{ ds }}")
    keyed.request_id = "2024-03-01"  # as rendered
    assert keyed.effective_request_id({"ti": ti()}) == "2024-03-01"  # type: ignore[typeddict-item]
    keyed.request_id = 20240301  # type: ignore[assignment]  # a native template renders "{{ ds_nodash }}" so
    assert keyed.effective_request_id({"ti": ti()}) == "20240301"  # type: ignore[typeddict-item]


@pytest.mark.parametrize("empty", ["", "  ", "None", "null"])
def test_a_request_id_that_is_or_renders_empty_is_an_error(empty: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="request_id") as info:  # at DAG parse time when nothing is templated
        LakeCleanOperator(task_id="c", table="/lake/t", request_id=empty)
    assert isinstance(info.value, LakeSpecError) and info.value.field == "request_id" and "Fix:" in str(info.value)
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT"})
    op = LakeCleanOperator(task_id="c", table=table.url, request_id="{{ params.batch }}")
    op.request_id = empty  # what the template rendered
    with pytest.raises(LakeSpecError, match="request_id"):
        op.execute({"ti": ti()})  # type: ignore[typeddict-item]
    assert table.commit_log.head() == 0  # nothing ran, nothing committed


DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.write import LakeWriteOperator

CLICKS, VIEWS = {clicks!r}, {views!r}
BATCHES, OTHER = {batches!r}, {other!r}
START = pendulum.datetime(2024, 3, 1, tz="UTC")
KEYED = "{{{{ ds }}}}-clicks-{{{{ ti.map_index }}}}"  # the issue's example: one request per day and batch

with DAG("lake_clicks", schedule=None, start_date=START, catchup=False):
    create = LakeCreateTableOperator(task_id="create", table=CLICKS, schema="id BIGINT, dt STRING, v DOUBLE",
                                     partition_by=["dt"])
    create >> LakeWriteOperator.partial(task_id="load", table=CLICKS, request_id=KEYED).expand(source_path=BATCHES)

with DAG("lake_views", schedule=None, start_date=START, catchup=False):  # the default request id
    LakeWriteOperator(task_id="load", table=VIEWS, source_path=BATCHES[0])

with DAG("lake_clicks_other", schedule=None, start_date=START, catchup=False):  # other data, the same ids
    LakeWriteOperator.partial(task_id="load", table=CLICKS, request_id=KEYED).expand(source_path=OTHER)

with DAG("lake_clicks_unset", schedule=None, start_date=START, catchup=False, params={{"batch": ""}}):
    LakeWriteOperator(task_id="load", table=CLICKS, source_path=BATCHES[0], request_id="{{{{ params.batch }}}}")
'''

# One process runs every DAG run (Airflow starts once); each run's tasks submit real spark-submit jobs.
DRIVER = '''
import json, sys
import pendulum
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
for dag_id, hour in json.loads(sys.argv[2]):
    run = bag.dags[dag_id].test(logical_date=pendulum.datetime(2024, 3, 1, hour, tz="UTC"))
    print("DAG_RUN " + json.dumps({"dag_id": dag_id, "run_id": run.run_id, "state": str(run.state)}), flush=True)
'''

RUNS = [("lake_clicks", 0), ("lake_clicks", 6), ("lake_views", 0), ("lake_views", 6), ("lake_clicks_other", 0),
        ("lake_clicks_unset", 0)]


def xcoms(db_path: Path, dag_id: str, run_id: str) -> dict[tuple[str, int], Any]:
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT task_id, map_index, value FROM xcom WHERE dag_id = ? AND run_id = ? AND "
                          "key = 'return_value'", (dag_id, run_id)).fetchall()
    out = {}
    for task_id, map_index, value in rows:
        decoded = json.loads(value)
        out[(task_id, map_index)] = json.loads(decoded) if isinstance(decoded, str) else decoded
    return out


@pytest.mark.slow
def test_request_ids_and_commit_identity_in_real_dag_runs(tmp_path: Path) -> None:
    clicks, views = str(tmp_path / "lake" / "clicks"), str(tmp_path / "lake" / "views")
    LakeTable.create(views, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    batches = [write_source(tmp_path / "in" / f"b{i}.parquet", range(i * 10, i * 10 + 3 + i), "2024-03-01")
               for i in range(2)]  # 3 and 4 rows
    other = [write_source(tmp_path / "in" / "other.parquet", range(100, 105), "2024-03-01")]
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lake_request_ids.py").write_text(DAG_FILE.format(clicks=clicks, views=views, batches=batches,
                                                              other=other))
    (tmp_path / "driver.py").write_text(DRIVER)
    home = tmp_path / "airflow"
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate_db(env)
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(dags), json.dumps(RUNS)], env=env,
                          capture_output=True, text=True, timeout=1500, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    runs = [json.loads(line.split("DAG_RUN ", 1)[1]) for line in done.stdout.splitlines() if "DAG_RUN " in line]
    assert [(r["dag_id"], r["state"]) for r in runs] == [
        ("lake_clicks", "success"), ("lake_clicks", "success"), ("lake_views", "success"), ("lake_views", "success"),
        ("lake_clicks_other", "failed"), ("lake_clicks_unset", "failed")], log[-5000:]
    first, second, views_1, views_2 = (r["run_id"] for r in runs[:4])
    assert first != second  # the same day (ds) re-run as a new DAG run
    db = home / "airflow.db"

    # item 1: a request id keyed on the day: the second run of the day commits nothing and says so
    table = LakeTable.open(clicks)
    entries = list(table.commit_log.entries(-1))
    assert sorted((e.operation, e.request_id) for e in entries[1:]) == [("write", "2024-03-01-clicks-0"),
                                                                         ("write", "2024-03-01-clicks-1")]
    assert table.snapshot().rows == 7 and table.commit_log.head() == 2
    again = xcoms(db, "lake_clicks", second)
    assert {k: (v["already_committed"], v["request_id"]) for k, v in again.items() if k[0] == "load"} == {
        ("load", 0): (True, "2024-03-01-clicks-0"), ("load", 1): (True, "2024-03-01-clicks-1")}
    assert {k: v["rows_added"] for k, v in xcoms(db, "lake_clicks", first).items() if k[0] == "load"} == {
        ("load", 0): 3, ("load", 1): 4}
    # ... answered from the log in the task's process: no spark-submit for them (the first run's two loads, the
    # views' two and the refused reuse of an id with other data are the five submits)
    assert {i: log.count(f"request 2024-03-01-clicks-{i} already committed") for i in (0, 1)} == {0: 1, 1: 1}
    assert log.count("Submitting write on") == 5, log[-5000:]

    # item 2: each commit names the task instance that made it; the mapped ones their map index
    recorded = {e.request_id: e.metadata["airflow"] for e in entries}
    assert recorded[entries[0].request_id] == {"dag_id": "lake_clicks", "run_id": first, "task_id": "create",
                                               "map_index": -1, "try_number": 1}
    for i in (0, 1):
        assert recorded[f"2024-03-01-clicks-{i}"] == {"dag_id": "lake_clicks", "run_id": first, "task_id": "load",
                                                      "map_index": i, "try_number": 1}

    # the default request id: a new DAG run is a new request, so the same batch is appended again
    view_log = list(LakeTable.open(views).commit_log.entries(0))
    assert [(e.request_id, e.metadata["airflow"]["run_id"]) for e in view_log] == [
        (f"lake_views/load/{views_1}/-1", views_1), (f"lake_views/load/{views_2}/-1", views_2)]
    assert LakeTable.open(views).snapshot().rows == 6
    assert view_log[-1].metadata["airflow"] == {"dag_id": "lake_views", "run_id": views_2, "task_id": "load",
                                                "map_index": -1, "try_number": 1}

    # the same request id with other data is refused before anything is written; one rendered empty too
    assert "request fingerprint" in log and "another load under a reused request id" in log
    assert "request_id: the operator's request_id is ''" in log
    assert LakeTable.open(clicks).commit_log.head() == 2 and LakeTable.open(clicks).snapshot().rows == 7

