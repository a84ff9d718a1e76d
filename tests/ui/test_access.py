"""Who may read what on the Lake page, decided by Airflow's auth manager in a real `airflow api-server`.

The auth manager is `tests/ui/grants_auth_manager.py` (Airflow's SimpleAuthManager plus per-asset grants, as
FAB or Keycloak can give them): "analyst" may read the asset of table `open` only, "linker" that of table
`linked` only, which the DAG declares through a symlink to the root (another spelling of its path), "outsider" may
open no custom view, "admin" may read everything. The tables' assets are registered as Airflow registers them, by
serializing a DAG that names them (`airflow dags reserialize`); table `unregistered` has no asset.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_lake.assets import table_uri
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from tests.airflow_stack import AIRFLOW, AirflowStack
from tests.conftest import ROOT

SECRET_LITERAL = "closed-literal-4711"
SECRET_REQUEST = "closed-request-42"
SECRET_COLUMN = "salary_band"
TABLE_ROUTES = ("/lake/table", "/lake/api/table", "/lake/api/layout.svg")


@pytest.fixture(scope="module")
def lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake-access") / "lake"
    for name in ("open", "closed", "unregistered", "linked"):
        table = LakeTable.create(str(root / name), {"schema": f"k BIGINT, {SECRET_COLUMN} STRING"})
        run(spark, "write", {"table": table.url, "request_id": SECRET_REQUEST,
                             "source": {"query": f"SELECT id AS k, '{SECRET_LITERAL}' AS {SECRET_COLUMN} "
                                                 "FROM range(3)"}})
    (root.parent / "lake-link").symlink_to(root)  # how a DAG names the `linked` table
    return root


def linked(lake: Path) -> str:
    """The `linked` table's path as its DAG spells it: through a symlink to the root."""
    return str(lake.parent / "lake-link" / "linked")


@pytest.fixture(scope="module")
def stack(lake: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    dags = tmp_path_factory.mktemp("access-dags")
    (dags / "lake_assets.py").write_text(textwrap.dedent(f"""
        from airflow.sdk import DAG
        from airflow_lake.assets import table_asset

        with DAG("lake_assets", schedule=[table_asset({str(lake / 'open')!r}), table_asset({str(lake / 'closed')!r}),
                                          table_asset({linked(lake)!r})]):
            pass
        """))
    env = {**os.environ, "AIRFLOW__LAKE__ROOTS": str(lake), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__AUTH_MANAGER": "tests.ui.grants_auth_manager.GrantsAuthManager",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,analyst:viewer,outsider:viewer,linker:viewer",
           "LAKE_TEST_ASSET_GRANTS": json.dumps({"analyst": [table_uri(str(lake / "open"))],
                                                 "linker": [table_uri(linked(lake))]}),
           "LAKE_TEST_NO_CUSTOM_VIEWS": "outsider"}
    with AirflowStack(tmp_path_factory.mktemp("airflow-access"), env, components=("api-server",)) as running:
        done = subprocess.run([AIRFLOW, "dags", "reserialize"], env=running.env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        assets = running.api.get("/api/v2/assets").json()["assets"]
        assert sorted(a["uri"] for a in assets) == sorted(table_uri(p) for p in (str(lake / "open"),
                                                                                 str(lake / "closed"), linked(lake)))
        yield running


def client(stack: AirflowStack, user: str) -> httpx.Client:
    return httpx.Client(base_url=stack.url, timeout=30, headers={"Authorization": f"Bearer {stack.token(user)}"})


def assert_no_table_data(body: str) -> None:
    for secret in (SECRET_LITERAL, SECRET_REQUEST, SECRET_COLUMN, "closed", "unregistered"):
        assert secret not in body, (secret, body)


@pytest.mark.slow
def test_a_user_whom_the_auth_manager_denies_a_table_gets_403_and_none_of_its_data(stack: AirflowStack) -> None:
    with client(stack, "admin") as admin, client(stack, "analyst") as analyst:
        for name in ("closed", "unregistered"):
            assert admin.get("/lake/table", params={"ref": f"0/{name}"}).status_code == 200
            shown = admin.get("/lake/api/table", params={"ref": f"0/{name}"})
            assert shown.status_code == 200  # what there is to hide: the query with its literal, the request id
            assert SECRET_LITERAL in shown.text and SECRET_REQUEST in shown.text and SECRET_COLUMN in shown.text
            for route in TABLE_ROUTES:
                denied = analyst.get(route, params={"ref": f"0/{name}"})
                assert denied.status_code == 403, (route, name, denied.text)
                assert_no_table_data(denied.text)
        for route in TABLE_ROUTES:
            assert analyst.get(route, params={"ref": "0/open"}).status_code == 200, route
        listed = analyst.get("/lake/api/tables").json()
        assert [t["ref"] for t in listed["tables"]] == ["0/open"] and not listed["errors"]
        assert [t["ref"] for t in admin.get("/lake/api/tables").json()["tables"]] == [
            "0/closed", "0/linked", "0/open", "0/unregistered"]
        index = analyst.get("/lake/")
        assert index.status_code == 200 and "data-table='0/open'" in index.text
        assert_no_table_data(index.text)


@pytest.mark.slow
def test_a_table_a_dag_declared_under_another_spelling_is_read_by_that_assets_grant(stack: AirflowStack) -> None:
    """Issue 33 item 2: the DAG names the table through a symlink, the page finds it under its root by its real
    path; both are one table, so its asset decides — not the generic asset permission, which "linker" lacks."""
    with client(stack, "linker") as linker, client(stack, "analyst") as analyst:
        for route in TABLE_ROUTES:
            assert linker.get(route, params={"ref": "0/linked"}).status_code == 200, route
            assert linker.get(route, params={"ref": "0/open"}).status_code == 403, route
            assert analyst.get(route, params={"ref": "0/linked"}).status_code == 403, route  # not granted to them
        assert [t["ref"] for t in linker.get("/lake/api/tables").json()["tables"]] == ["0/linked"]


@pytest.mark.slow
def test_a_user_who_may_not_open_the_lake_view_gets_403_everywhere(stack: AirflowStack) -> None:
    with client(stack, "outsider") as outsider:
        assert outsider.get("/api/v2/assets").status_code == 200  # a logged-in viewer of Airflow otherwise
        for route in ("/lake/", "/lake/api/tables", *(f"{r}?ref=0/open" for r in TABLE_ROUTES)):
            denied = outsider.get(route)
            assert denied.status_code == 403 and "custom view 'Lake'" in denied.text, (route, denied.text)
            assert_no_table_data(denied.text)
            assert "0/open" not in denied.text and "salary" not in denied.text
