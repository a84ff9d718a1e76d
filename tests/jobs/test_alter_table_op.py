"""The alter_table operation through the job runner (in-process and as the command line Airflow runs), and the
write operation's schema_evolution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.registry import validate
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.table import LakeTable


def test_alter_table_op_runs_without_spark_and_retries_as_one_commit(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    LakeTable.create(path, {"schema": "id INT, name STRING, dt STRING", "partition_by": ["dt"]})
    spec = {"table": path, "changes": [{"add": "c2", "type": "BIGINT", "after": "id"}, {"widen": "id", "type": "long"},
                                       {"rename": "name", "to": "label"},
                                       {"set_properties": {"clean.retain.hours": 24}}], "request_id": "a/b/1/-1"}
    out = run(None, "alter_table", spec)  # needs_spark=False: no session at all
    assert (out["operation"], out["action"], out["seq"], out["changes"], out["already_committed"]) == \
        ("alter_table", "alter", 1, 4, False)
    assert out["columns"] == ["id bigint", "c2 bigint", "label string", "dt string"]
    again = run(None, "alter_table", spec)
    assert (again["seq"], again["already_committed"]) == (1, True)
    with pytest.raises(LakeSpecError, match="request_id"):  # the same id with other changes
        run(None, "alter_table", {**spec, "changes": [{"drop": "c2"}]})
    table = LakeTable.open(path)
    assert table.spec.property("clean.retain.hours") == "24" and table.commit_log.head() == 1
    entry = table.commit_log.read(1)
    assert entry.metadata["changes"][0] == {"add": "c2", "type": "bigint", "after": "id"}
    assert entry.metadata["spec"] == table.spec.to_dict()


@pytest.mark.parametrize(("spec", "message"), [
    ({"changes": []}, "changes: the list of changes is empty"),
    ({}, "alter_table needs `changes`"),
    ({"changes": [{"add": "x"}]}, r"changes\[0\].type"),
    ({"changes": [{"drop": "x", "to": "y"}]}, r"changes\[0\].to: unknown field"),
    ({"changes": "drop x"}, "expected a list of changes"),
    ({"changes": [{"drop": "x"}], "tables": 1}, "tables: unknown field"),
])
def test_bad_alter_specs_fail_before_spark_or_the_table(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(LakeSpecError, match=message):
        validate("alter_table", {"table": "/nowhere/t", **spec})


@pytest.mark.slow
def test_the_command_line_exits_2_naming_the_protected_column(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    LakeTable.create(path, {"schema": "id INT, dt STRING", "partition_by": ["dt"]})
    done = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "alter_table", "--spec",
                           json.dumps({"table": path, "changes": [{"rename": "dt", "to": "day"}]})],
                          capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-1]
    assert "changes[0].rename: column 'dt' is a partition column" in last
    assert LakeTable.open(path).commit_log.head() == 0


def test_the_write_op_adds_source_columns_only_when_asked(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    LakeTable.create(path, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    source = tmp_path / "src"
    spark.createDataFrame([(1, "d1", 2.5)], "id BIGINT, dt STRING, score DOUBLE").write.parquet(str(source))
    spec = {"table": path, "source": {"path": str(source)}, "request_id": "w1"}
    with pytest.raises(LakeSchemaError, match=r"\['score'\].*set schema_evolution to \"add_columns\""):
        run(spark, "write", spec)
    with pytest.raises(LakeSpecError, match="schema_evolution"):
        validate("write", {**spec, "schema_evolution": "mergeSchema"})
    out = run(spark, "write", {**spec, "schema_evolution": "add_columns"})
    assert (out["rows_added"], out["already_committed"]) == (1, False)
    assert run(spark, "write", {**spec, "schema_evolution": "add_columns"})["already_committed"] is True
    table = LakeTable.open(path)
    assert [tuple(r) for r in table.read(spark).collect()] == [(1, "d1", 2.5)]
    assert table.commit_log.read(1).metadata["added_columns"] == ["score"]
