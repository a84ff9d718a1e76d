"""docker-compose.yml: valid for docker-compose (no Docker engine here: the stack itself cannot start on this
machine, so the services' commands are tested as local processes elsewhere — the Airflow components in
tests/dags/test_scheduler_trigger.py, the Spark master and workers in tests/dags/test_cluster_path.py). Its
secrets are generated, not written in the file (the generator and Airflow's reading of them run here), and
nothing is published beyond the host's loopback unless the user says so."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

AIRFLOW = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SPARK = ("spark-master", "spark-worker-1", "spark-worker-2", "spark-connect")


SECRETS_DIR = "/run/lake-secrets"


def compose_config(**env: str) -> dict[str, Any]:
    """The file as docker-compose reads it, in an environment without the stack's variables plus `env`."""
    if shutil.which("docker-compose") is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing: .ci/setup installs it (apt-get install docker-compose)")
        pytest.skip("docker-compose not installed (apt-get install docker-compose)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_LAKE_")}
    result = subprocess.run(["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False, env={**clean, **env})
    assert result.returncode == 0, result.stderr
    return dict(yaml.safe_load(result.stdout))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return compose_config()


def test_the_stack_has_its_services_from_one_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"secrets", "postgres", "airflow-init", *AIRFLOW, *SPARK}
    assert services["secrets"]["build"]["context"] == str(ROOT)
    images = {services[name]["image"] for name in ("secrets", "airflow-init", *AIRFLOW, *SPARK)}
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
        assert "postgresql+psycopg2://airflow:" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"]
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
    assert command[:2] == ["airflow-lake", "connect-server"] and "0.0.0.0" in command  # the stack's network
    assert command[command.index("--master") + 1] == "spark://spark-master:7077" and "spark.cores.max=2" in command
    assert server["depends_on"]["spark-master"]["condition"] == "service_healthy" and server["healthcheck"]["test"]
    for name in AIRFLOW:
        env = services[name]["environment"]
        conn = yaml.safe_load(env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        assert (conn["conn_type"], conn["host"], conn["port"]) == ("spark_connect", "sc://spark-connect", 15002)
        assert env["AIRFLOW_LAKE_SPARK_CONN_ID"] in ("spark_default", "spark_connect_default")


# -- secrets and ports -------------------------------------------------------------------------------------------
SECRET_NAME = re.compile(r"SECRET|PASSWORD|FERNET|TOKEN|SQL_ALCHEMY_CONN|_KEY$")
URL_WITH_PASSWORD = re.compile(r"://[^/\s:@]+:(?!\$)[^@\s]+@")
AIRFLOW_SECRETS = {("api_auth", "jwt_secret"): "jwt_secret", ("api", "secret_key"): "api_secret_key",
                   ("core", "fernet_key"): "fernet_key"}


def test_no_secret_is_written_in_the_file(compose: dict[str, Any]) -> None:
    """A secret in the file is everybody's secret (a JWT signed with it was accepted): every one is generated
    into the lake-secrets volume on the first start, and read from there."""
    assert "change-me" not in (ROOT / "docker-compose.yml").read_text()
    services = compose["services"]
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                assert key.endswith(("_CMD", "_FILE")), f"{name}: {key} holds a literal secret"
                assert SECRETS_DIR in value or key == "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", (name, key)
            assert not URL_WITH_PASSWORD.search(str(value)), f"{name}: {key} holds a URL with a password"
    for name in ("airflow-init", *AIRFLOW):
        env = services[name]["environment"]
        assert "AIRFLOW__API_AUTH__JWT_SECRET" not in env and "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in env
        assert ("lake-secrets", SECRETS_DIR) in mounts(services[name])
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    postgres = services["postgres"]
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"] == f"{SECRETS_DIR}/postgres_password"
    assert "POSTGRES_PASSWORD" not in postgres["environment"] and ("lake-secrets", SECRETS_DIR) in mounts(postgres)
    assert postgres["depends_on"]["secrets"]["condition"] == "service_completed_successfully"
    for name in SPARK:  # (no service that does not need them sees them)
        assert not any(source == "lake-secrets" for source, _ in mounts(services[name])), name
    assert all(str(v).endswith(":ro") for n in ("postgres", "airflow-init", *AIRFLOW)
               for v in services[n]["volumes"] if isinstance(v, str) and v.startswith("lake-secrets:"))


def test_the_secrets_are_generated_once_and_airflow_reads_them(compose: dict[str, Any], tmp_path: Path) -> None:
    """The `secrets` service's own command, run here into a directory standing for the volume; then Airflow's
    configuration reads the api-server's `_CMD` options (with that directory) as every service will."""
    command = compose["services"]["secrets"]["command"]
    assert command[0] == "python" and command[-1] == SECRETS_DIR
    generate = [sys.executable, *command[1:-1], str(tmp_path)]
    subprocess.run(generate, check=True, capture_output=True, timeout=60)
    first = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert sorted(first) == ["api_secret_key", "fernet_key", "jwt_secret", "postgres_password"]
    assert all(len(v) >= 32 and v.strip() == v for v in first.values())
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in tmp_path.iterdir())
    subprocess.run(generate, check=True, capture_output=True, timeout=60)  # a restart keeps them
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == first
    (tmp_path / "jwt_secret").unlink()  # rotating one: delete its file
    subprocess.run(generate, check=True, capture_output=True, timeout=60)
    assert (tmp_path / "jwt_secret").read_text() not in ("", first["jwt_secret"])

    env = compose["services"]["airflow-api-server"]["environment"]
    # (`docker-compose config` prints a `$` of the file as `$$`; the container's shell gets one)
    commands = {k: v.replace("$$", "$").replace(SECRETS_DIR, str(tmp_path)) for k, v in env.items()
                if k.endswith("_CMD")}
    read = ("import json; from airflow.configuration import conf; print(json.dumps({f'{s}.{k}': conf.get(s, k) "
            "for s, k in [('api_auth', 'jwt_secret'), ('api', 'secret_key'), ('core', 'fernet_key'), "
            "('database', 'sql_alchemy_conn')]}))")
    done = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, timeout=120, check=False,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")},
                               # configuration only: no ORM (the Postgres driver lives in the image only)
                               "_AIRFLOW__AS_LIBRARY": "1", "AIRFLOW_HOME": str(tmp_path / "home"), **commands})
    assert done.returncode == 0, done.stderr[-2000:]
    values = json.loads(done.stdout.strip().splitlines()[-1])
    secrets = {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()}
    for (section, key), name in AIRFLOW_SECRETS.items():
        assert values[f"{section}.{key}"] == secrets[name], (section, key)
    assert values["database.sql_alchemy_conn"] == (
        f"postgresql+psycopg2://airflow:{secrets['postgres_password']}@postgres:5432/airflow")
    from cryptography.fernet import Fernet

    assert Fernet(values["core.fernet_key"].encode()).decrypt(Fernet(secrets["fernet_key"].encode()).encrypt(b"x"))


def published(port: Any) -> tuple[str | None, int, int]:
    """(host ip or None for every interface, host port, container port) of a `ports` entry."""
    if isinstance(port, dict):
        return port.get("host_ip"), int(port["published"]), int(port["target"])
    parts = str(port).split("/")[0].split(":")
    host_ip = parts[0] if len(parts) == 3 else None
    return host_ip, int(parts[-2]), int(parts[-1])


def test_ports_are_published_on_loopback_unless_the_user_says_otherwise(compose: dict[str, Any]) -> None:
    ports = {name: [published(p) for p in s.get("ports") or ()] for name, s in compose["services"].items()}
    assert {n: p for n, p in ports.items() if p} == {"airflow-api-server": [("127.0.0.1", 8080, 8080)],
                                                     "spark-master": [("127.0.0.1", 8081, 8081)]}
    everywhere = compose_config(AIRFLOW_LAKE_BIND="0.0.0.0")
    assert [published(p) for p in everywhere["services"]["airflow-api-server"]["ports"]] == [("0.0.0.0", 8080, 8080)]


def test_spark_connect_and_the_master_port_are_not_published(compose: dict[str, Any]) -> None:
    """Spark Connect (15002) and the master's RPC port (7077) take no login: reachable on the stack's network
    only, where Airflow's tasks use them."""
    for name, service in compose["services"].items():
        for port in service.get("ports") or ():
            assert published(port)[2] not in (15002, 7077), (name, port)
    assert not compose["services"]["spark-connect"].get("ports")
