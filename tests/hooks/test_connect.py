"""LakeHook over a real Spark Connect server (started by the run from the pip package, stopped by its PID):
every Spark operation gives the same tables and metrics as over spark-submit; errors, retries, kills and
settings behave as the spark-submit path's do."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import airflow_lake
from airflow_lake.exceptions import LakeJobError
from airflow_lake.hooks.connect import ConnectClient
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format.instants import pending
from tests.connect_server import ConnectServer
from tests.lake.upsert.oracle import as_strings, bdci_expected
from tests.op_chains import bdci_batches, chains, run_chain, table_state
from tests.support import write_source

pytestmark = pytest.mark.slow


def test_every_operation_gives_the_same_tables_and_metrics_as_over_spark_submit(
        spark: Any, connect_conn_id: str, tmp_path: Path) -> None:
    bdci_batches(tmp_path / "data")
    # spark-submit: the two chains at once (each step is its own process); Spark Connect: one after the other
    # (pyspark marks the whole client process as a Connect client while a session is open)
    with ThreadPoolExecutor(2) as pool:
        submitted = list(pool.map(lambda i, c: run_chain(LakeHook().submit, c, f"c{i}"), range(2),
                                  chains(tmp_path / "submit", tmp_path / "data")))
    connected = [run_chain(LakeHook(connect_conn_id).submit, c, f"c{i}")
                 for i, c in enumerate(chains(tmp_path / "connect", tmp_path / "data"))]
    assert connected == submitted
    by_op = {m["operation"]: m for chain in connected for m in chain}
    assert by_op["execute_clustering"].get("files_after", 99) < by_op["execute_clustering"].get("files_before", 0), \
        by_op["execute_clustering"]
    assert by_op["bucket_rewrite"]["files_added"] == 8  # 2 days x 4 buckets
    for name in ("events", "daily", "users"):
        assert table_state(spark, str(tmp_path / "connect" / name)) == \
            table_state(spark, str(tmp_path / "submit" / name)), name
    # and right, not only alike: the upserts merged in version order despite the late version 1
    expected = bdci_expected(bdci_batches(tmp_path / "data"), [0, 1, 2])
    got = as_strings(LakeTable.open(str(tmp_path / "connect" / "users")).read(spark).toPandas(),
                     columns=list(expected.columns[1:]))
    assert got.equals(expected)
    daily = LakeTable.open(str(tmp_path / "connect" / "daily")).read(spark)
    assert daily.count() == 1200 and daily.agg({"n": "sum"}).collect()[0][0] == 1200


def test_retries_bad_input_and_settings_over_spark_connect(connect_conn_id: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open = ConnectClient.open

    def spy(self: ConnectClient) -> Any:
        opened.append(self.url)
        return real_open(self)

    monkeypatch.setattr(ConnectClient, "open", spy)
    table = str(tmp_path / "t")
    hook = LakeHook(connect_conn_id)
    hook.submit("create_table", {"table": table, "schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    source = write_source(tmp_path / "a.parquet", range(20), ["a", "b"] * 10)
    first = hook.submit("write", {"table": table, "source": {"path": source}, "request_id": "r-1"})
    retry = hook.submit("write", {"table": table, "source": {"path": source}, "request_id": "r-1"})
    # the retry is answered from the log before a session opens: the result the job gives a retry
    assert len(opened) == 1 and retry == {**first, "already_committed": True}
    assert retry["instant"] == first["instant"] and LakeTable.open(table).snapshot().rows == 20
    # a bad spec fails before any session opens; bad data fails with the job's own words, like spark-submit's
    with pytest.raises(LakeSpecError, match="mode"):
        hook.submit("write", {"table": table, "source": {"path": source}, "mode": "upsert"})
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"idx": [1], "dt": ["a"]}), wrong)
    errors = []
    for each in (hook, LakeHook()):
        with pytest.raises(LakeJobError) as info:
            each.submit("write", {"table": table, "source": {"path": str(wrong)}})
        errors.append(str(info.value).split("\n")[0])
    assert "airflow-lake: LakeSchemaError: schema mismatch" in errors[0]
    assert errors[0] == errors[1].split(" Cannot execute")[0]
    with pytest.raises(LakeJobError, match=r"spark\.executor\.memory .*CANNOT_MODIFY_CONFIG.*only runtime SQL"):
        LakeHook(connect_conn_id, spark_conf={"spark.executor.memory": "2g"}).submit(
            "write", {"table": table, "source": {"path": source}})
    with pytest.raises(LakeJobError, match="driver_memory"):
        LakeHook(connect_conn_id, driver_memory="2g").submit("write", {"table": table, "source": {"path": source}})
    assert LakeTable.open(table).snapshot().rows == 20 and pending(LakeTable.open(table).storage) == []


def test_the_workers_must_run_our_airflow_lake(connect_conn_id: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    source = write_source(tmp_path / "a.parquet", range(5), "a")
    # not shipped: the server's own installation (this venv) is used and checked
    LakeHook(connect_conn_id, ship_package=False).submit("write", {"table": table, "source": {"path": source}})
    monkeypatch.setattr(airflow_lake, "__version__", "99.0")  # a task newer than the server
    with pytest.raises(LakeJobError, match=r"import airflow_lake 0\.1\.0 .* this task runs 99\.0"):
        LakeHook(connect_conn_id, ship_package=False).submit("write", {"table": table, "source": {"path": source}})
    assert LakeTable.open(table).snapshot().rows == 5


SHIPPED_JAR = """
import json, sys
from airflow_lake.hooks.connect import ConnectClient
from airflow_lake.lake.clustering import jvm_words

out = {}
for ship in (False, True):
    client = ConnectClient(sys.argv[1], {}, ship_package=ship)
    spark = client.open()
    out[str(ship)] = jvm_words.available(spark, 2)
    client.close()
print("RESULT " + json.dumps(out))
"""


def test_a_server_without_our_jvm_code_gets_it_from_the_task(tmp_path: Path) -> None:
    # a server started without our jar (as a user's own server would be): the task's session adds it, with the
    # package it ships, so the curve words are computed in the JVM; a session that ships nothing goes without
    server = ConnectServer(tmp_path / "server.log", master="local[1]", env={"AIRFLOW_LAKE_JVM_CURVES": "0"}).start()
    try:
        script = tmp_path / "client.py"
        script.write_text(SHIPPED_JAR)
        done = subprocess.run([sys.executable, str(script), server.url], capture_output=True, text=True,
                              timeout=300, check=False)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert out == {"False": False, "True": True}
