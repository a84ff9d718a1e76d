"""OpenLineage: every lake operator reports the datasets it read and wrote, with schema, version, the commit and its
statistics (`get_openlineage_facets_on_complete`, as the OpenLineage provider's listener calls it).

The unit tests build real tables with the real operations (`airflow_lake.jobs.run`) and hand each operator the
metrics its task returned, as `execute` does; `test_pipeline_run_events_name_every_table` runs a small
ODS -> DWD -> DWS DAG in `airflow dags test` with the provider's listener and its file transport, and reads the
events it wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.spec.table_spec import stored_spec
from airflow_lake.lineage.facets import COMMIT_FACET
from airflow_lake.lineage.naming import dataset_id, source_id
from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.bucket_rewrite import BucketRewriteOperator
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.delete import LakeDeleteOperator
from airflow_lake.operators.maintenance import (
    LakeCleanOperator,
    LakeRemoveOrphanFilesOperator,
    LakeRollbackPendingOperator,
)
from airflow_lake.operators.restore import LakeRestoreOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator
from tests.airflow_stack import migrate_db
from tests.conftest import ROOT

ODS_COLUMNS = [("id", "bigint"), ("v", "double"), ("dt", "string")]
DIM_COLUMNS = [("id", "bigint"), ("name", "string")]
DWD_COLUMNS = [("id", "bigint"), ("v", "double"), ("name", "string"), ("dt", "string")]


def lineage(operator: LakeOperator, metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """The operator's lineage as the listener gets it after `execute` returned `metrics` (None: the task failed),
    in the JSON form an event carries."""
    from openlineage.client.serde import Serde

    if metrics is not None:  # what `execute` does with the metrics it returns
        operator.emit_asset_event({"outlet_events": defaultdict(SimpleNamespace)}, metrics)  # type: ignore[typeddict-item]
    result = operator.get_openlineage_facets_on_complete(None)
    return {"inputs": [json.loads(Serde.to_json(d)) for d in result.inputs],
            "outputs": [json.loads(Serde.to_json(d)) for d in result.outputs]}


def names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def schema(dataset: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]


def version(dataset: Mapping[str, Any]) -> str | None:
    return dataset["facets"].get("version", {}).get("datasetVersion")


def assert_commit(dataset: Mapping[str, Any], table: str, metrics: Mapping[str, Any]) -> None:
    """The dataset names the commit the task made, as the table's log has it, and is versioned by it."""
    entry = LakeTable.open(table).commit_log.read(metrics["seq"])
    commit = dataset["facets"][COMMIT_FACET]
    assert (commit["seq"], commit["instant"], commit["operation"], commit["action"]) == \
        (entry.seq, entry.instant, entry.operation, entry.action)
    assert commit["completedAt"].endswith("Z") and version(dataset) == str(entry.seq)
    assert dataset["facets"]["storage"]["storageLayer"] == "airflow_lake"


def assert_statistics(dataset: Mapping[str, Any], metrics: Mapping[str, Any]) -> None:
    stats = dataset["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["size"], stats["fileCount"]) == \
        (metrics["rows_added"], metrics["bytes_added"], metrics["files_added"])


@pytest.fixture(scope="module")
def lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """ODS (plain, partitioned), a primary-key dimension and a DWD table built from both, by real operations;
    the metrics of every step under its name."""
    root = tmp_path_factory.mktemp("lineage-lake")
    src, keys = root / "landing", root / "deleted_keys"
    for folder in (src, keys):
        folder.mkdir()
    pq.write_table(pa.table({"id": list(range(10)), "v": [i * 1.5 for i in range(10)],
                             "dt": ["2024-01-01"] * 5 + ["2024-01-02"] * 5}), src / "a.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), src.with_name("dim_src.parquet"))
    pq.write_table(pa.table({"id": [2]}), keys / "k.parquet")
    ods, dim, dwd = (str(root / n) for n in ("ods", "dim", "dwd"))
    m: dict[str, Any] = {"root": root, "src": str(src), "dim_src": str(src.with_name("dim_src.parquet")),
                         "keys": str(keys), "ods": ods, "dim": dim, "dwd": dwd}
    m["create_ods"] = run(None, "create_table", {"table": ods, "schema": "id BIGINT, v DOUBLE, dt STRING",
                                                 "partition_by": ["dt"], "request_id": "c1"})
    m["write_ods"] = run(spark, "write", {"table": ods, "source": {"path": str(src)}, "request_id": "w1"})
    run(None, "create_table", {"table": dim, "schema": "id BIGINT, name STRING", "primary_key": ["id"],
                               "bucket": {"columns": ["id"], "count": 2}, "request_id": "c2"})
    m["upsert_dim"] = run(spark, "versioned_upsert", {"table": dim, "source": {"path": m["dim_src"]}, "version": 1,
                                                      "request_id": "u1"})
    run(None, "create_table", {"table": dwd, "schema": "id BIGINT, v DOUBLE, name STRING, dt STRING",
                               "partition_by": ["dt"], "request_id": "c3"})
    m["query"] = "SELECT o.id, o.v, d.name, o.dt FROM o LEFT JOIN d ON o.id = d.id"
    m["build_dwd"] = run(spark, "write", {"table": dwd, "source": {"query": m["query"], "tables": {"o": ods, "d": dim}},
                                          "request_id": "w2"})
    m["bucket_dwd"] = run(spark, "bucket_rewrite", {"table": dwd, "bucket": {"columns": ["id"], "count": 2},
                                                    "request_id": "b1"})
    m["write_ods_2"] = run(spark, "write", {"table": ods, "source": {"path": str(src)}, "request_id": "w3"})
    m["plan"] = run(None, "schedule_clustering", {"table": ods, "min_commits": 1, "request_id": "s1",
                                                  "small_file_limit_bytes": 10**9})
    m["cluster"] = run(spark, "execute_clustering", {"table": ods, "request_id": "e1"})
    m["upsert_dim_2"] = run(spark, "versioned_upsert", {"table": dim, "source": {"path": m["dim_src"]}, "version": 2,
                                                        "request_id": "u2"})
    m["compact"] = run(spark, "compact_upserts", {"table": dim, "request_id": "k1"})
    m["delete"] = run(spark, "delete", {"table": ods, "where": "id = 3", "request_id": "d1"})
    m["delete_keys"] = run(spark, "delete", {"table": dim, "keys": {"path": str(keys)}, "version": 3,
                                             "request_id": "d2"})
    m["alter"] = run(None, "alter_table", {"table": ods, "changes": [{"add": "z", "type": "int"}],
                                           "request_id": "a1"})
    m["restore"] = run(None, "restore", {"table": ods, "to_seq": m["write_ods_2"]["seq"], "request_id": "r1"})
    m["clean"] = run(None, "clean", {"table": ods, "retain_hours": 0, "force": True, "request_id": "k2"})
    m["orphans"] = run(None, "remove_orphan_files", {"table": ods, "older_than_hours": 0, "force": True,
                                                     "request_id": "o1"})
    m["rollback"] = run(None, "rollback_pending", {"table": ods, "request_id": "rb1"})
    yield m


def test_create_table_reports_the_new_table_with_its_schema(lake: dict[str, Any]) -> None:
    op = LakeCreateTableOperator(task_id="t", table=lake["ods"], schema="id BIGINT, v DOUBLE, dt STRING",
                                 partition_by=["dt"])
    got = lineage(op, lake["create_ods"])
    assert got["inputs"] == [] and names(got["outputs"]) == [("file", lake["ods"])]
    out = got["outputs"][0]
    assert schema(out) == ODS_COLUMNS  # the spec of log entry 0, not today's (an added column came later)
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert_commit(out, lake["ods"], lake["create_ods"])


def test_a_create_that_found_the_table_reports_its_current_schema_and_version(tmp_path: Path) -> None:
    """A daily create_table (if_exists="ignore") after an alter committed nothing, yet reported the table at log
    entry 0 with its first schema: a lineage backend then flipped the table's schema back (issue 33, item 12)."""
    table = str(tmp_path / "t")
    spec = {"table": table, "schema": "id BIGINT, v DOUBLE", "if_exists": "ignore"}
    assert run(None, "create_table", spec)["created"] is True
    run(None, "alter_table", {"table": table, "changes": [{"add": "z", "type": "int"}]})
    again = run(None, "create_table", spec)
    assert again["created"] is False and again["spec_changed_by"]
    op = LakeCreateTableOperator(task_id="t", table=table, schema="id BIGINT, v DOUBLE")
    out = lineage(op, again)["outputs"]
    assert names(out) == [("file", table)] and len(out) == 1
    assert schema(out[0]) == [("id", "bigint"), ("v", "double"), ("z", "int")]  # today's, not entry 0's
    assert version(out[0]) == "1" and "lifecycleStateChange" not in out[0]["facets"]
    assert COMMIT_FACET not in out[0]["facets"]  # it made no commit


def test_write_from_files_reads_the_source_and_writes_the_commit(lake: dict[str, Any]) -> None:
    op = LakeWriteOperator(task_id="t", table=lake["ods"], source_path=lake["src"] + "/*.parquet")
    got = lineage(op, lake["write_ods"])
    assert names(got["inputs"]) == [("file", lake["src"])]  # the directory the glob reads in
    assert "storage" not in got["inputs"][0]["facets"]  # files, not a lake table
    out = got["outputs"][0]
    assert names(got["outputs"]) == [("file", lake["ods"])] and schema(out) == ODS_COLUMNS
    assert_commit(out, lake["ods"], lake["write_ods"])
    assert_statistics(out, lake["write_ods"])
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 10


def test_write_from_a_query_reads_its_lake_tables_with_their_schemas(lake: dict[str, Any]) -> None:
    op = LakeWriteOperator(task_id="t", table=lake["dwd"], query=lake["query"], mode="overwrite",
                           tables={"o": lake["ods"], "d": {"path": lake["dim"], "as_of": 1}})
    got = lineage(op, lake["build_dwd"])
    assert names(got["inputs"]) == [("file", lake["ods"]), ("file", lake["dim"])]
    ods, dim = got["inputs"]
    assert schema(ods)[:3] == ODS_COLUMNS and schema(dim) == DIM_COLUMNS
    assert version(dim) == "1" and version(ods) is None  # a time-travel read names its snapshot
    out = got["outputs"][0]
    assert schema(out) == DWD_COLUMNS and out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert_commit(out, lake["dwd"], lake["build_dwd"])
    assert_statistics(out, lake["build_dwd"])


def test_upsert_reads_its_source_and_writes_the_upsert(lake: dict[str, Any]) -> None:
    op = VersionedUpsertOperator(task_id="t", table=lake["dim"], source_path=lake["dim_src"], version=1)
    got = lineage(op, lake["upsert_dim"])
    assert names(got["inputs"]) == [("file", lake["dim_src"])]
    out = got["outputs"][0]
    assert schema(out) == DIM_COLUMNS
    assert_commit(out, lake["dim"], lake["upsert_dim"])
    assert_statistics(out, lake["upsert_dim"])
    assert out["facets"][COMMIT_FACET]["action"] == "upsert"


@pytest.mark.parametrize(("step", "name", "make"), [
    ("bucket_dwd", "dwd",
     lambda t: BucketRewriteOperator(task_id="t", table=t, bucket={"columns": ["id"], "count": 2})),
    ("cluster", "ods", lambda t: ExecuteClusteringOperator(task_id="t", table=t)),
    ("compact", "dim", lambda t: CompactUpsertsOperator(task_id="t", table=t)),
    ("delete", "ods", lambda t: LakeDeleteOperator(task_id="t", table=t, where="id = 3")),
])
def test_rewrites_read_the_snapshot_they_started_from_and_write_their_commit(
        lake: dict[str, Any], step: str, name: str, make: Any) -> None:
    metrics, table = lake[step], lake[name]
    got = lineage(make(table), metrics)
    assert names(got["inputs"]) == names(got["outputs"]) == [("file", table)]
    read, wrote = got["inputs"][0], got["outputs"][0]
    base = LakeTable.open(table).commit_log.read(metrics["seq"]).base_seq
    assert version(read) == str(base) and int(version(wrote) or -1) == metrics["seq"] > base
    assert COMMIT_FACET not in read["facets"] and "outputFacets" not in read
    assert_commit(wrote, table, metrics)
    assert_statistics(wrote, metrics)


def test_versioned_delete_reads_its_key_source_not_the_table(lake: dict[str, Any]) -> None:
    op = LakeDeleteOperator(task_id="t", table=lake["dim"], keys={"path": lake["keys"]}, version=3)
    got = lineage(op, lake["delete_keys"])
    assert names(got["inputs"]) == [("file", lake["keys"])]
    assert names(got["outputs"]) == [("file", lake["dim"])]
    assert_commit(got["outputs"][0], lake["dim"], lake["delete_keys"])


def test_alter_and_restore_report_the_schema_each_commit_left(lake: dict[str, Any]) -> None:
    from airflow_lake.operators.alter_table import LakeAlterTableOperator

    altered = lineage(LakeAlterTableOperator(task_id="t", table=lake["ods"], changes=[{"add": "z", "type": "int"}]),
                      lake["alter"])
    assert altered["inputs"] == [] and schema(altered["outputs"][0]) == [*ODS_COLUMNS, ("z", "int")]
    assert altered["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "ALTER"
    assert_commit(altered["outputs"][0], lake["ods"], lake["alter"])

    restored = lineage(LakeRestoreOperator(task_id="t", table=lake["ods"], to_seq=lake["write_ods_2"]["seq"]),
                       lake["restore"])
    read, wrote = restored["inputs"][0], restored["outputs"][0]
    assert version(read) == str(lake["write_ods_2"]["seq"]) and schema(read) == ODS_COLUMNS  # the snapshot restored
    assert schema(wrote) == ODS_COLUMNS  # the restore took the column added since away again
    assert_commit(wrote, lake["ods"], lake["restore"])
    assert_statistics(wrote, lake["restore"])


@pytest.mark.parametrize(("step", "make"), [
    ("plan", lambda t: ScheduleClusteringOperator(task_id="t", table=t, min_commits=1)),
    ("clean", lambda t: LakeCleanOperator(task_id="t", table=t, retain_hours=0, force=True)),
    ("orphans", lambda t: LakeRemoveOrphanFilesOperator(task_id="t", table=t, older_than_hours=0, force=True)),
    ("rollback", lambda t: LakeRollbackPendingOperator(task_id="t", table=t)),
])
def test_upkeep_reads_the_table_and_produces_no_dataset(lake: dict[str, Any], step: str, make: Any) -> None:
    got = lineage(make(lake["ods"]), lake[step])
    assert names(got["inputs"]) == [("file", lake["ods"])] and got["outputs"] == []
    assert schema(got["inputs"][0]) == ODS_COLUMNS
    if step == "clean":  # it committed a `clean` entry: named, without claiming rows
        assert_commit(got["inputs"][0], lake["ods"], lake["clean"])


def test_the_sensor_reads_the_table_it_watches(lake: dict[str, Any]) -> None:
    """A CommitCountSensor gates the tasks after it on a table: the table is its input, with its schema."""
    from openlineage.client.serde import Serde

    from airflow_lake.sensors.commit_count import CommitCountSensor

    result = CommitCountSensor(task_id="t", table=lake["ods"], min_commits=1).get_openlineage_facets_on_complete(None)
    inputs = [json.loads(Serde.to_json(d)) for d in result.inputs]
    assert names(inputs) == [("file", lake["ods"])] and result.outputs == []
    assert schema(inputs[0]) == ODS_COLUMNS


def test_a_task_without_metrics_still_names_its_datasets(lake: dict[str, Any]) -> None:
    """A failed task (or one that pushes no XCom): the datasets with the table's current schema, no commit."""
    op = LakeWriteOperator(task_id="t", table=lake["dwd"], query=lake["query"],
                           tables={"o": lake["ods"], "d": lake["dim"]})
    got = lineage(op, None)
    assert names(got["inputs"]) == [("file", lake["ods"]), ("file", lake["dim"])]
    out = got["outputs"][0]
    assert schema(out) == DWD_COLUMNS and version(out) is None
    assert COMMIT_FACET not in out["facets"] and not out.get("outputFacets")
    missing = lineage(LakeWriteOperator(task_id="t", table=str(lake["root"] / "never"), source_path=lake["src"]), None)
    assert names(missing["outputs"]) == [("file", str(lake["root"] / "never"))]
    assert "schema" not in missing["outputs"][0]["facets"]


def test_a_noop_names_the_table_without_a_commit(lake: dict[str, Any]) -> None:
    op = CompactUpsertsOperator(task_id="t", table=lake["dim"], partitions=[])
    got = lineage(op, {"table": lake["dim"], "operation": "compact_upserts", "noop": True, "reason": "no partitions"})
    assert names(got["outputs"]) == [("file", lake["dim"])] and version(got["outputs"][0]) is None


def test_the_table_dataset_is_the_node_of_its_airflow_asset(lake: dict[str, Any]) -> None:
    """Airflow's own translation of the operator's outlet Asset names the same dataset: one node in Marquez."""
    from airflow.providers.common.compat.openlineage.utils.utils import translate_airflow_asset

    op = LakeWriteOperator(task_id="t", table=lake["ods"], source_path=lake["src"])
    (asset,) = op.outlets
    translated = translate_airflow_asset(asset, None)
    assert (translated.namespace, translated.name) == names(lineage(op, lake["write_ods"])["outputs"])[0]


def test_dataset_names_follow_the_openlineage_naming_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert dataset_id("lake/t") == ("file", str(tmp_path / "lake" / "t"))  # relative paths are absolute
    assert dataset_id("file:///lake/t/") == ("file", "/lake/t")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert dataset_id(str(tmp_path / "link" / "t")) == ("file", str(tmp_path / "real" / "t"))  # one node per table
    assert dataset_id("s3://bucket/lake/t") == ("s3://bucket", "lake/t")
    assert dataset_id("s3a://bucket/lake/t/") == ("s3://bucket", "lake/t")
    assert dataset_id("gcs://bucket/t") == ("gs://bucket", "t")
    assert dataset_id("abfss://c@acct.dfs.core.windows.net/x/t") == ("abfss://c@acct.dfs.core.windows.net", "x/t")
    assert dataset_id("hdfs://nn:8020/warehouse/t") == ("hdfs://nn:8020", "/warehouse/t")
    assert source_id("/landing/2024-01-01/*.parquet") == ("file", "/landing/2024-01-01")
    assert source_id("s3://b/landing/dt=*/x.csv") == ("s3://b", "landing")


def test_operators_import_without_the_lineage_code() -> None:
    """The provider is an optional extra: importing an operator (a DAG parse) loads neither our lineage module
    nor OpenLineage."""
    code = ("import sys; import airflow_lake.operators.write, airflow_lake.operators.clustering; "
            "loaded = sorted(m for m in sys.modules if m.startswith(('airflow_lake.lineage', 'openlineage'))); "
            "print(loaded); assert not loaded")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


CHAIN_DAG = '''
"""ODS -> DWD -> DWS with a dimension upsert, a bucket rewrite and a clustering: the lineage test's pipeline."""
import os

import pendulum
from airflow.sdk import DAG

from airflow_lake.operators.bucket_rewrite import BucketRewriteOperator
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator

ROOT, LANDING, CONN = os.environ["LINEAGE_ROOT"], os.environ["LINEAGE_LANDING"], os.environ["LINEAGE_CONN_ID"]
ODS, USERS, DWD, DWS = (f"{ROOT}/{name}" for name in ("ods_events", "dim_users", "dwd_events", "dws_user_daily"))

with DAG("lake_lineage_chain", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         default_args={"conn_id": CONN}):
    create_ods = LakeCreateTableOperator(task_id="create_ods", table=ODS, partition_by=["dt"],
                                         schema="event_id BIGINT, user_id BIGINT, amount DOUBLE, dt STRING")
    land = LakeWriteOperator(task_id="land", table=ODS, source_path=LANDING + "/events/{{ ds }}", mode="overwrite",
                             partitions="dynamic")
    create_users = LakeCreateTableOperator(task_id="create_users", table=USERS, primary_key=["user_id"],
                                           schema="user_id BIGINT, region STRING",
                                           bucket={"columns": ["user_id"], "count": 2})
    upsert_users = VersionedUpsertOperator(task_id="upsert_users", table=USERS, version="{{ ds_nodash }}",
                                           source_path=LANDING + "/users/{{ ds }}")
    create_dwd = LakeCreateTableOperator(task_id="create_dwd", table=DWD, partition_by=["dt"],
                                         schema="event_id BIGINT, user_id BIGINT, region STRING, amount DOUBLE, "
                                                "dt STRING")
    build_dwd = LakeWriteOperator(
        task_id="build_dwd", table=DWD, mode="overwrite", partitions=[{"dt": "{{ ds }}"}],
        query="SELECT e.event_id, e.user_id, u.region, e.amount, e.dt FROM e LEFT JOIN u ON e.user_id = u.user_id "
              "WHERE e.dt = '{{ ds }}'",
        tables={"e": ODS, "u": USERS})
    bucket_dwd = BucketRewriteOperator(task_id="bucket_dwd", table=DWD, bucket={"columns": ["user_id"], "count": 4})
    create_dws = LakeCreateTableOperator(task_id="create_dws", table=DWS, partition_by=["dt"],
                                         schema="region STRING, events BIGINT, amount DOUBLE, dt STRING")
    build_dws = LakeWriteOperator(
        task_id="build_dws", table=DWS, mode="overwrite", partitions=[{"dt": "{{ ds }}"}],
        query="SELECT region, count(*) AS events, sum(amount) AS amount, dt FROM d WHERE dt = '{{ ds }}' "
              "GROUP BY region, dt",
        tables={"d": DWD})
    plan = ScheduleClusteringOperator(task_id="plan_ods", table=ODS, min_commits=1, sort_columns=["user_id"],
                                      single_group_clustering=True)
    cluster = ExecuteClusteringOperator(task_id="cluster_ods", table=ODS, plan_id=plan.output["plan_id"])
    create_ods >> land >> plan >> cluster
    create_users >> upsert_users
    [land, upsert_users] >> create_dwd >> build_dwd >> bucket_dwd >> create_dws >> build_dws
'''


@pytest.mark.slow
def test_pipeline_run_events_name_every_table(tmp_path: Path, connect_server: Any) -> None:
    """One run of a small ODS -> DWD -> DWS DAG under `airflow dags test` with the OpenLineage provider's listener
    and its file transport: the events name every table read and written, with schemas, versions and row counts
    that match the tables' logs."""
    landing, lake, events = tmp_path / "landing", tmp_path / "lake", tmp_path / "openlineage.jsonl"
    (landing / "events" / "2024-01-01").mkdir(parents=True)
    (landing / "users" / "2024-01-01").mkdir(parents=True)
    for part in range(2):
        ids = list(range(part * 50, part * 50 + 50))
        pq.write_table(pa.table({"event_id": ids, "user_id": [i % 7 for i in ids], "amount": [i * 0.5 for i in ids],
                                "dt": ["2024-01-01"] * 50}), landing / "events" / "2024-01-01" / f"p{part}.parquet")
    pq.write_table(pa.table({"user_id": list(range(7)), "region": ["north", "south"] * 3 + ["east"]}),
                   landing / "users" / "2024-01-01" / "u.parquet")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lineage_chain.py").write_text(textwrap.dedent(CHAIN_DAG))
    host, port = connect_server.url.rsplit(":", 1)
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "LINEAGE_ROOT": str(lake), "LINEAGE_LANDING": str(landing),
           "LINEAGE_CONN_ID": "spark_connect_lineage",
           "AIRFLOW_CONN_SPARK_CONNECT_LINEAGE": json.dumps({"conn_type": "spark_connect", "host": host,
                                                             "port": int(port)}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "lake_lineage_test",
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events),
                                                         "append": True})}
    airflow = str(Path(sys.executable).with_name("airflow"))
    migrate_db(env)
    result = subprocess.run([airflow, "dags", "test", "lake_lineage_chain", "2024-01-01"], env=env,
                            capture_output=True, text=True, timeout=1200, check=False, cwd=ROOT)
    log = result.stdout + result.stderr
    assert result.returncode == 0 and "failed" not in " ".join(
        line for line in log.splitlines() if "Marking task as" in line), log[-6000:]

    complete = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("eventType") == "COMPLETE" and event["job"]["name"].startswith("lake_lineage_chain."):
            complete[event["job"]["name"].split(".", 1)[1]] = event
    tables = {name: str(lake / name) for name in ("ods_events", "dim_users", "dwd_events", "dws_user_daily")}
    landed, users = str(landing / "events" / "2024-01-01"), str(landing / "users" / "2024-01-01")

    def io(task: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        return names(complete[task]["inputs"]), names(complete[task]["outputs"])

    file = "file"
    assert io("land") == ([(file, landed)], [(file, tables["ods_events"])])
    assert io("upsert_users") == ([(file, users)], [(file, tables["dim_users"])])
    assert io("build_dwd") == ([(file, tables["ods_events"]), (file, tables["dim_users"])],
                               [(file, tables["dwd_events"])])
    assert io("bucket_dwd") == ([(file, tables["dwd_events"])], [(file, tables["dwd_events"])])
    assert io("build_dws") == ([(file, tables["dwd_events"])], [(file, tables["dws_user_daily"])])
    assert io("plan_ods") == ([(file, tables["ods_events"])], [])
    assert io("cluster_ods") == ([(file, tables["ods_events"])], [(file, tables["ods_events"])])
    for name in ("ods", "users", "dwd", "dws"):
        assert io(f"create_{name}")[1] == [(file, tables[next(t for t in tables if name in t)])]

    # every table written is named with its schema, the commit that wrote it and that commit's numbers
    written = 0
    for task, event in complete.items():
        for out in event["outputs"]:
            table = LakeTable.open(out["name"])
            commit = out["facets"][COMMIT_FACET]
            entry = table.commit_log.read(commit["seq"])
            assert (entry.instant, entry.operation, version(out)) == (commit["instant"], commit["operation"],
                                                                        str(entry.seq)), task
            assert schema(out) == [(c.name, c.type) for c in stored_spec(table.state(entry.seq).spec).columns], task
            if not task.startswith("create_"):
                stats = out["outputFacets"]["outputStatistics"]
                assert (stats["rowCount"], stats["fileCount"]) == (sum(f.rows for f in entry.added),
                                                                     len(entry.added)), task
                written += 1
    assert written == 6
    assert complete["land"]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 100
    assert complete["build_dws"]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    # the tables a query read carry their schemas too
    for read in complete["build_dwd"]["inputs"]:
        assert schema(read) == [(c.name, c.type) for c in LakeTable.open(read["name"]).spec.columns]
