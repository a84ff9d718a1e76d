"""docker-compose.yml: valid for docker-compose (no Docker engine here: the stack itself cannot start on this
machine, so the services' commands are tested as local processes elsewhere — the Airflow components in
tests/dags/test_scheduler_trigger.py, the Spark master and workers in tests/dags/test_cluster_path.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

AIRFLOW = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SPARK = ("spark-master", "spark-worker-1", "spark-worker-2", "spark-connect")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    if shutil.which("docker-compose") is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing: .ci/setup installs it (apt-get install docker-compose)")
        pytest.skip("docker-compose not installed (apt-get install docker-compose)")
    result = subprocess.run(["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return dict(yaml.safe_load(result.stdout))


def test_the_stack_has_its_services_from_one_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "airflow-init", *AIRFLOW, *SPARK}
    assert services["airflow-init"]["build"]["context"] == str(ROOT)
    images = {services[name]["image"] for name in ("airflow-init", *AIRFLOW, *SPARK)}
    assert images == {"airflow-lake:local"}  # executors run the same package as the tasks


def mounts(service: dict[str, Any]) -> set[tuple[str, str]]:
    """(source, target) of a service's volumes (docker-compose 1.x prints them as 'source:target:mode')."""
    out = set()
    for volume in service["volumes"]:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        out.add((source, target))
    return out


def test_airflow_services_share_the_lake_the_dags_and_the_spark_connection(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in (*AIRFLOW, *SPARK):
        assert ("lake", "/lake") in mounts(services[name]), name
    for name in AIRFLOW:
        service = services[name]
        env = service["environment"]
        assert (str(ROOT / "dags"), "/opt/airflow/dags") in mounts(service)
        conn = yaml.safe_load(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert f"{conn['host']}:{conn['port']}" == "spark://spark-master:7077"
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor" and env["AIRFLOW__LAKE__ROOTS"] == "/lake/tables"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://airflow:airflow@postgres")
        assert service["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert "lake" in compose["volumes"]


def test_services_have_health_checks_and_the_workers_join_the_master(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("postgres", *AIRFLOW, "spark-master"):
        assert services[name]["healthcheck"]["test"], name
    master = services["spark-master"]["command"]
    assert master[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"] and "7077" in master
    for name in ("spark-worker-1", "spark-worker-2"):
        command = services[name]["command"]
        assert command[1] == "org.apache.spark.deploy.worker.Worker" and command[-1] == "spark://spark-master:7077"
        assert services[name]["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_a_spark_connect_server_on_the_cluster_behind_spark_connect_default(compose: dict[str, Any]) -> None:
    services = compose["services"]
    server = services["spark-connect"]
    command = server["command"]
    assert command[:2] == ["airflow-lake", "connect-server"] and "0.0.0.0" in command
    assert command[command.index("--master") + 1] == "spark://spark-master:7077" and "spark.cores.max=2" in command
    assert server["depends_on"]["spark-master"]["condition"] == "service_healthy" and server["healthcheck"]["test"]
    for name in AIRFLOW:
        env = services[name]["environment"]
        conn = yaml.safe_load(env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        assert (conn["conn_type"], conn["host"], conn["port"]) == ("spark_connect", "sc://spark-connect", 15002)
        assert env["AIRFLOW_LAKE_SPARK_CONN_ID"] in ("spark_default", "spark_connect_default")
