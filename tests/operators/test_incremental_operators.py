"""`incremental=` on LakeWriteOperator and VersionedUpsertOperator: templated, checked when the DAG is parsed where
it can be (ValueError quoting the value), sent as the spec's `source.incremental`; the spec the operator builds runs
as an incremental job, and lineage names the upstream as an input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lineage.datasets import operator_fields, task_datasets
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator

UP = {"view": "ch", "table": "/lake/up"}


@pytest.mark.parametrize("cls", [LakeWriteOperator, VersionedUpsertOperator])
def test_a_dict_or_a_list_templated(cls: Any) -> None:
    assert "incremental" in cls.template_fields
    one = cls(task_id="t", table="/lake/down", query="SELECT * FROM ch", incremental=UP)
    assert one.build_spec({})["source"] == {"query": "SELECT * FROM ch", "tables": {}, "incremental": [UP]}
    two = cls(task_id="t", table="/lake/down", query="SELECT 1", tables={"full": "/lake/up"},
              incremental=[UP, {"view": "d", "table": "{{ params.dim }}", "from": "{{ params.start }}"}])
    assert [u["view"] for u in two.build_spec({})["source"]["incremental"]] == ["ch", "d"]
    templated = cls(task_id="t", table="/lake/down", query="SELECT 1", incremental="{{ params.upstreams }}")
    templated.incremental = '[{"view": "ch", "table": "/lake/up"}]'  # as a (non-native) template renders it
    assert templated.build_spec({})["source"]["incremental"] == [UP]
    assert "incremental" not in cls(task_id="t", table="/d", query="SELECT 1").build_spec({})["source"]


@pytest.mark.parametrize(("kwargs", "problem"), [
    ({"source_path": "/files", "incremental": UP}, "incremental needs a query"),
    ({"query": "q", "incremental": [{"view": "ch", "table": "/u", "form": 1}]}, "unknown key 'form'"),
    ({"query": "q", "incremental": {"view": "ch"}}, "no 'table'"),
    ({"query": "q", "incremental": {"view": "my view", "table": "/u"}}, "'my view' is not a valid view name"),
    ({"query": "q", "tables": {"ch": "/u"}, "incremental": UP}, "'ch' is taken"),
    ({"query": "q", "incremental": [UP, {"view": "CH", "table": "/w"}]}, "'CH' is taken"),
    ({"query": "q", "incremental": []}, "got []"),
    ({"query": "q", "incremental": "/lake/up"}, "got '/lake/up'"),
])
def test_refused_when_the_dag_is_parsed(kwargs: dict[str, Any], problem: str) -> None:
    for cls in (LakeWriteOperator, VersionedUpsertOperator):
        with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
            cls(task_id="t", table="/lake/down", **kwargs)


def test_the_operators_spec_consumes_and_lineage_names_the_upstream(spark: Any, tmp_path: Path) -> None:
    up = LakeTable.create(str(tmp_path / "up"), {"schema": "id BIGINT"})
    up.write(spark.createDataFrame([(1,), (2,)], "id BIGINT"))
    down = LakeTable.create(str(tmp_path / "down"), {"schema": "id BIGINT"}).url
    op = LakeWriteOperator(task_id="w", table=down, query="SELECT id FROM ch WHERE _change_type = 'insert'",
                           incremental={"view": "ch", "table": up.url})
    spec = {"table": down, **op.build_spec({}), "request_id": "dag/w/run1/-1"}  # type: ignore[arg-type]
    metrics = run(spark, "write", spec)
    assert metrics["rows_added"] == 2 and metrics["incremental"]["ch"]["query_ran"] is True
    assert LakeTable.open(down).consumed() == {up.identity(): 1}
    datasets = task_datasets("write", down, operator_fields(op), metrics)
    assert [(d.url, d.lake_table) for d in datasets.inputs] == [(up.url, True)]


def test_cluster_mode_reads_no_instant_of_an_incremental_write_as_a_noop(tmp_path: Path) -> None:
    from airflow_lake.exceptions import LakeJobError
    from airflow_lake.hooks.lake import LakeHook

    down = LakeTable.create(str(tmp_path / "down"), {"schema": "id BIGINT"}).url
    hook = LakeHook()
    # an incremental write whose upstreams had nothing new commits nothing: that is its result, not a lost job
    assert hook.read_metrics("write", down, "dag/w/run2/-1", commits=False)["noop"] is True
    with pytest.raises(LakeJobError, match="no instant of request"):
        hook.read_metrics("write", down, "dag/w/run2/-1")
