"""VersionedUpsertOperator and CompactUpsertsOperator: their specs, and a DAG of mapped upserts (a backfill in
shuffled order) then a compaction, run by `airflow dags test` with real spark-submit."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.datagen import bdci
from airflow_lake.lake import LakeTable
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from tests.airflow_stack import migrate_db
from tests.lake.upsert.oracle import as_strings, bdci_expected

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def test_the_upsert_operator_builds_its_spec() -> None:
    op = VersionedUpsertOperator(task_id="u", table="/lake/t", source_path="/in/b-3.parquet", version="{{ ds_nodash }}")
    assert "version" in op.template_fields and "source_path" in op.template_fields
    op.version = "20240301"  # as rendered
    assert op.build_spec({}) == {  # type: ignore[arg-type]
        "source": {"path": "/in/b-3.parquet", "format": "parquet", "options": {}}, "replace_version": False,
        "version": "20240301"}
    by_column = VersionedUpsertOperator(task_id="c", table="/lake/t", query="SELECT * FROM s", tables={"s": "/lake/s"},
                                        version_column="batch", replace_version=True)
    assert by_column.build_spec({}) == {  # type: ignore[arg-type]
        "source": {"query": "SELECT * FROM s", "tables": {"s": "/lake/s"}}, "replace_version": True,
        "version_column": "batch"}
    with pytest.raises(ValueError, match="exactly one of source_path and query"):
        VersionedUpsertOperator(task_id="x", table="/lake/t", version=1)
    with pytest.raises(ValueError, match="version or version_column"):
        VersionedUpsertOperator(task_id="y", table="/lake/t", source_path="/in", version=1, version_column="v")
    assert op.hook.in_process_max_bytes == 64 << 20  # small Parquet sources: in the task, without Spark
    assert VersionedUpsertOperator(task_id="s", table="/t", source_path="/in", version=1,
                                   in_process_max_bytes=0).hook.in_process_max_bytes == 0  # always on Spark
    for bad in (-1, True, "64"):
        with pytest.raises(ValueError, match="in_process_max_bytes"):
            VersionedUpsertOperator(task_id="b", table="/t", source_path="/in", version=1,
                                    in_process_max_bytes=bad)  # type: ignore[arg-type]
    assert CompactUpsertsOperator(task_id="k", table="/t").build_spec({}) == {}  # type: ignore[arg-type]
    assert CompactUpsertsOperator(task_id="k", table="/t", partitions=[{"dt": "d"}]).build_spec(  # type: ignore[arg-type]
        {}) == {"partitions": [{"dt": "d"}]}


DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator

TABLE = {table!r}
BATCHES = {batches!r}
with DAG("lake_upsert_test", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False):
    upserts = VersionedUpsertOperator.partial(task_id="upsert", table=TABLE).expand_kwargs(
        [{{"source_path": path, "version": version}} for version, path in BATCHES])
    upserts >> CompactUpsertsOperator(task_id="compact", table=TABLE)
'''


@pytest.mark.slow
def test_mapped_backfill_upserts_then_compaction_in_airflow_dags_test(spark: Any, tmp_path: Path) -> None:
    paths = bdci.generate(tmp_path / "src", 300, keys=400)
    table_path = str(tmp_path / "lake" / "users")
    LakeTable.create(table_path, bdci.table_spec(2))
    # a backfill: versions arrive out of order — the newest first, then an older one, then one between them
    order = [2, 0, 1]
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lake_upsert_test.py").write_text(DAG_FILE.format(
        table=table_path, batches=[(v, str(paths[v])) for v in order]))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate_db(env)
    done = subprocess.run([AIRFLOW, "dags", "test", "lake_upsert_test", "2024-03-01"], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    table = LakeTable.open(table_path)
    expected = bdci_expected(paths, [0, 1, 2])
    got = as_strings(table.read(spark).toPandas(), columns=list(expected.columns[1:]))
    pd.testing.assert_frame_equal(got, expected)
    assert [e.operation for e in table.commit_log.entries(0)] == ["versioned_upsert"] * 3 + ["compact_upserts"]
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        states = sorted(db.execute("SELECT task_id, map_index, state FROM task_instance "
                                   "WHERE dag_id = 'lake_upsert_test'"))
    assert states == [("compact", -1, "success")] + [("upsert", i, "success") for i in range(3)]
