"""Versioned deletes of primary-key tables as users meet them: the operator's spec, the `airflow-lake delete --keys
--version` command, delete markers through the `versioned_upsert` runner, and a SIGKILL under real spark-submit
before the delete's commit, which leaves the table as before (its retry then deletes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.instants import pending
from airflow_lake.operators.delete import LakeDeleteOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from tests.support import FAST_HEARTBEAT, parquet_files_on_disk, submit_and_kill

TIMEOUT = float(FAST_HEARTBEAT["heartbeat.timeout.seconds"])
AIRFLOW_LAKE = str(Path(sys.executable).with_name("airflow-lake"))


def users(path: Path, spark: Any, **properties: str) -> LakeTable:
    table = LakeTable.create(str(path), {"schema": "user_id BIGINT NOT NULL, name STRING, visits BIGINT",
                                         "primary_key": ["user_id"], "bucket": {"columns": ["user_id"], "count": 2},
                                         "merge_operators": {"visits": "sum"}, "properties": properties})
    source = path.parent / f"{path.name}_v1.parquet"
    spark.createDataFrame([(i, f"user{i}", 1) for i in range(10)], "user_id BIGINT, name STRING, visits BIGINT"
                          ).write.parquet(str(source))
    run(spark, "versioned_upsert", {"table": table.url, "source": {"path": str(source)}, "version": 1})
    return table


def ids(spark: Any, table: LakeTable) -> list[int]:
    return sorted(r["user_id"] for r in table.read(spark).collect())


def test_the_operators_build_versioned_delete_specs() -> None:
    op = LakeDeleteOperator(task_id="forget", table="/lake/users", keys="[{'user_id': 42}]",
                            version="{{ ds_nodash }}")
    assert op.build_spec({}) == {"keys": [{"user_id": 42}], "version": "{{ ds_nodash }}"}  # type: ignore[arg-type]
    assert {"keys", "version"} <= set(op.template_fields)
    source = LakeDeleteOperator(task_id="f", table="/t", keys={"path": "/k.parquet"}, version=7)
    assert source.build_spec({}) == {"keys": {"path": "/k.parquet"}, "version": 7}  # type: ignore[arg-type]
    empty = LakeDeleteOperator(task_id="f", table="/t", keys="", version=7)  # an upstream task found no one
    assert empty.build_spec({}) == {"keys": [], "version": 7}  # type: ignore[arg-type]  # (refused by the op)
    with pytest.raises(ValueError, match="exactly one of filters, where and keys"):
        LakeDeleteOperator(task_id="f", table="/t", keys=[{"k": 1}], version=1, where="true")
    with pytest.raises(ValueError, match="keys and version go together"):
        LakeDeleteOperator(task_id="f", table="/t", keys=[{"k": 1}])
    upsert = VersionedUpsertOperator(task_id="u", table="/t", source_path="/s", version=3,
                                     delete_column="_hoodie_is_deleted")
    assert upsert.build_spec({})["delete_column"] == "_hoodie_is_deleted"  # type: ignore[arg-type]


def test_delete_markers_through_the_upsert_runner(spark: Any, tmp_path: Path) -> None:
    table = users(tmp_path / "users", spark)
    cdc = tmp_path / "cdc.json"  # a JSON source without every column: the marker is read as a boolean
    cdc.write_text("\n".join(json.dumps(r) for r in [{"user_id": 1, "is_deleted": True},
                                                     {"user_id": 2, "name": "renamed", "is_deleted": False}]))
    out = run(spark, "versioned_upsert", {"table": table.url, "source": {"path": str(cdc), "format": "json"},
                                          "version": 2, "delete_column": "is_deleted"})
    assert out["delete_rows"] == 1
    assert ids(spark, table) == [0, *range(2, 10)] and "is_deleted" not in table.spec.column_names
    again = run(spark, "versioned_upsert", {"table": table.url, "source": {"path": str(cdc), "format": "json"},
                                            "version": 2, "delete_column": "is_deleted"})
    assert again["already_committed"] is True


def test_the_readme_gdpr_delete_renders_the_key_as_text_and_it_is_converted_exactly(spark: Any, tmp_path: Path
                                                                                       ) -> None:
    """The README's `keys=[{"user_id": "{{ params.user_id }}"}]` renders the key as the text "3" (issue 33, item 11:
    refused for the integer key, the run failed half-way through the tables): converted where exact."""
    import pendulum
    from airflow.sdk import DAG

    from airflow_lake.lake.errors import LakeSpecError

    table = users(tmp_path / "users", spark)
    with DAG("gdpr", schedule=None, params={"user_id": 3}) as dag:
        forget = LakeDeleteOperator(task_id="forget", table=table.url, keys=[{"user_id": "{{ params.user_id }}"}],
                                    version="{{ logical_date.strftime('%Y%m%d%H%M%S') }}")
    moment = pendulum.datetime(2024, 1, 3)
    forget.render_template_fields({"params": {"user_id": 3}, "logical_date": moment},  # type: ignore[typeddict-item]
                                  jinja_env=dag.get_template_env())
    spec = {"table": table.url, **forget.build_spec({})}  # type: ignore[arg-type]
    assert spec["keys"] == [{"user_id": "3"}]  # text, as Jinja renders it
    out = run(spark, "delete", spec)
    assert (out["keys_deleted"], out["version"]) == (1, 20240103000000)
    assert ids(spark, table) == [i for i in range(10) if i != 3]
    head = table.commit_log.head()
    for bad in ("4.0", "abc", "1e3", " ", 4.5, True, "99999999999999999999"):
        with pytest.raises(LakeSpecError, match=r"keys\[0\]\.user_id: .* is not a whole number .*the column is "
                           "bigint"):
            run(spark, "delete", {"table": table.url, "keys": [{"user_id": bad}], "version": 20240104})
    assert LakeTable.open(table.url).commit_log.head() == head  # nothing committed


@pytest.mark.slow
def test_delete_keys_from_the_command_line(spark: Any, tmp_path: Path) -> None:
    table = users(tmp_path / "users", spark)
    done = subprocess.run([AIRFLOW_LAKE, "delete", table.url, "--keys", '[{"user_id": 3}, {"user_id": 4}]',
                           "--version", "5", "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["keys_deleted"], out["version"], out["already_committed"]) == (2, 5, False)
    assert ids(spark, table) == [i for i in range(10) if i not in (3, 4)]
    assert main(["delete", table.url, "--keys", '[{"user_id": 3}]']) == 2  # no version: refused before Spark
    assert main(["delete", table.url, "--keys", "[{user_id: 3}]", "--version", "6"]) == 2  # not JSON
    assert main(["delete", table.url, "--keys", '[{"user_id": 3}]', "--version", "6", "--where", "true"]) == 2


@pytest.mark.slow
def test_sigkill_during_a_versioned_delete_leaves_the_table_as_before(
        spark: Any, tmp_path: Path) -> None:
    table = users(tmp_path / "users", spark, **FAST_HEARTBEAT)
    before = parquet_files_on_disk(table.url)
    head = table.commit_log.head()
    spec = {"table": table.url, "keys": [{"user_id": 3}], "version": 9, "request_id": "dag/forget/1/-1"}
    submit_and_kill("delete", spec, "before_commit", table.url, tmp_path)

    table = LakeTable.open(table.url)
    assert table.commit_log.head() == head and ids(spark, table) == list(range(10))  # as before
    assert {f.path for f in table.snapshot().files} == before and table.state().versions is not None
    assert 9 not in table.state().versions  # the version was not registered
    assert len(pending(table.storage)) == 1 and parquet_files_on_disk(table.url) > before  # its files: not live

    time.sleep(TIMEOUT + 0.5)  # the killed writer's heartbeat goes stale
    out = run(spark, "delete", spec)  # the Airflow retry: rolls the dead try back, then deletes
    assert out["already_committed"] is False and out["keys_deleted"] == 1
    assert ids(spark, table) == [i for i in range(10) if i != 3]
    assert pending(table.storage) == []
