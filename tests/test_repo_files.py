"""Repository files users run directly: the compose file parses and wires the lake volume everywhere."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT


def test_docker_compose_is_valid_yaml_with_a_shared_lake_volume() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "spark-master", "spark-worker", "airflow-scheduler", "airflow-api-server"} <= set(services)
    for name in ("spark-master", "spark-worker", "airflow-scheduler"):
        assert any(str(v).startswith("lake:") for v in services[name]["volumes"]), name
    assert "spark://spark-master" in services["airflow-scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]
