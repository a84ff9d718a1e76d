"""The example DAG: parses without pyspark, and runs end to end in `airflow dags test` against local Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_lake.lake import LakeTable
from tests.conftest import ROOT

DAGS = ROOT / "dags"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
TABLES = ("ods_orders", "dwd_orders", "dws_customer_daily", "dm_daily_summary")


def test_dags_parse_without_importing_pyspark() -> None:
    code = ("import sys; from airflow.dag_processing.dagbag import DagBag; "
            f"bag = DagBag(dag_folder={str(DAGS)!r}); "
            "assert not bag.import_errors, bag.import_errors; "
            "dag = bag.dags['lake_example_pipeline']; "
            "print(sorted(t.task_id for t in dag.tasks)); "
            "assert 'pyspark' not in sys.modules, 'pyspark imported at parse time'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "build_dm_daily_summary" in result.stdout and "load_ods_orders" in result.stdout


def rows(table: LakeTable) -> list[dict[str, Any]]:
    return table.to_arrow().to_pylist()


@pytest.mark.slow
def test_example_pipeline_runs_in_airflow_dags_test(tmp_path: Path) -> None:
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW_LAKE_ROOT": str(tmp_path / "lake"),
           "AIRFLOW_LAKE_LANDING": str(tmp_path / "landing")}
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, timeout=300, check=True)
    conf = json.dumps({"orders_per_day": 400})
    for attempt in (1, 2):  # the second run of the same day must leave the same tables
        result = subprocess.run([AIRFLOW, "dags", "test", "lake_example_pipeline", "2024-03-01", "-c", conf],
                                env=env, capture_output=True, text=True, timeout=900, check=False)
        log = result.stdout + result.stderr
        assert result.returncode == 0, log[-5000:]
        # four writes; on the second run the ODS table has had 2 commits: it is clustered too
        assert log.count("AIRFLOW_LAKE_RESULT") == 3 + attempt, log[-5000:]
        lake = {name: LakeTable.open(str(tmp_path / "lake" / name)) for name in TABLES}
        commits = {n: [e for e in t.entries_since(0) if e.action == "commit"] for n, t in lake.items()}
        assert all(len(c) == attempt for c in commits.values()), commits
        if attempt == 2:  # overwrite of the day's partition: the rerun replaced exactly what the first wrote
            assert all(c[1].metrics["rows_removed"] == c[0].metrics["rows_added"] for c in commits.values())
        clustered = [e for e in lake["ods_orders"].entries_since(0) if e.operation == "execute_clustering"]
        assert len(clustered) == attempt - 1, clustered  # planned only once 2 commits had happened
        if clustered:
            assert clustered[0].metrics["files_after"] < clustered[0].metrics["files_before"], clustered[0].metrics
            assert len(lake["ods_orders"].snapshot().files) == clustered[0].metrics["files_after"]
        dws_commit = commits["dws_customer_daily"][-1].metrics  # bucketed dwd -> bucketed dws: no shuffle
        assert (dws_commit["query_exchanges"], dws_commit["write_exchanges"]) == (0, 0), dws_commit

        raw = pq.read_table(tmp_path / "landing" / "orders" / "dt=2024-03-01").to_pylist()
        assert len(rows(lake["ods_orders"])) == 400
        paid = [r for r in raw if r["status"] == "paid" and r["amount"] > 0]
        dwd = rows(lake["dwd_orders"])
        assert sorted(r["order_id"] for r in dwd) == sorted(r["order_id"] for r in paid)
        assert {f.bucket for f in lake["dwd_orders"].snapshot().files} <= set(range(8))
        dws = {r["customer_id"]: r for r in rows(lake["dws_customer_daily"])}
        assert set(dws) == {r["customer_id"] for r in paid}
        assert sum(r["orders"] for r in dws.values()) == len(paid)
        (dm,) = rows(lake["dm_daily_summary"])
        assert dm["dt"] == "2024-03-01" and dm["orders"] == len(paid) and dm["customers"] == len(dws)
        assert dm["revenue"] == pytest.approx(sum(r["amount"] for r in paid), abs=0.05)
        best = max(dws.values(), key=lambda r: r["revenue"])
        assert dm["top_customer"] == best["customer_id"]
