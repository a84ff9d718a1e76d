"""The Lake page served by a real `airflow api-server` (the plugin from the package's entry point): refused
without an Airflow login and for references outside the roots; with one, its numbers are the tables'; and in
headless Chromium a user logs in through Airflow's login form and reads the page (a screenshot is kept)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.files import DataFile
from airflow_lake.lake.log import CommitLog, LogEntry
from tests.airflow_stack import AirflowStack
from tests.browser import ARTIFACTS, browser, login
from tests.conftest import ROOT

BIG_INSTANTS = 10_000


def build_long_timeline(path: Path, commits: int) -> LakeTable:
    """A table with `commits` small appends, written straight into its log (checkpoints as a writer makes)."""
    table = LakeTable.create(str(path), {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]})
    log = CommitLog(table.storage)
    base = int(log.read(0).instant)
    for seq in range(1, commits + 1):
        instant = str(base + seq)
        added = (DataFile(f"dt=d{seq % 7}/part-{seq}.parquet", {"dt": f"d{seq % 7}"}, 10, 1000, instant=instant),)
        entry = LogEntry(seq=seq, instant=instant, action="commit", operation="write", started_at=time.time(),
                         completed_at=time.time(), base_seq=seq - 1, added=added,
                         metrics={"files_added": 1, "rows_added": 10, "bytes_added": 1000})
        assert log.try_append(entry)
        if seq % 10 == 0:
            table.after_commit(entry)
    return table


@pytest.fixture(scope="module")
def lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("lake-page")
    root = base / "lake"
    sales = LakeTable.create(str(root / "sales"), {"schema": "k BIGINT, v BIGINT, dt STRING", "partition_by": ["dt"]})
    for day in ("d1", "d2"):
        rows = [(k, (k * 7919) % 1000, day) for k in range(2000)]
        sales.write(spark.createDataFrame(rows, "k BIGINT, v BIGINT, dt STRING").repartition(4))
    run(spark, "schedule_clustering", {"table": sales.url, "min_commits": 2, "layout": "ZORDER",
                                       "sort_columns": ["k", "v"], "target_file_max_bytes": 8000})
    run(spark, "execute_clustering", {"table": sales.url})
    users = LakeTable.create(str(root / "dims" / "users"),
                             {"schema": "k BIGINT, name STRING", "bucket": {"columns": ["k"], "count": 4}})
    users.write(spark.createDataFrame([(k, f"u{k}") for k in range(100)], "k BIGINT, name STRING"))
    build_long_timeline(root / "big", BIG_INSTANTS)
    LakeTable.create(str(base / "secret"), {"schema": "x BIGINT"})
    os.symlink(base / "secret", root / "escape")
    yield root


@pytest.fixture(scope="module")
def stack(lake: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    env = {**os.environ, "AIRFLOW__LAKE__ROOTS": str(lake), "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
           "AIRFLOW_LAKE_ROOT": str(lake)}
    with AirflowStack(tmp_path_factory.mktemp("airflow"), env, components=("api-server",)) as running:
        yield running


PROTECTED = ["/lake/", "/lake/table?ref=0/sales", "/lake/api/tables", "/lake/api/table?ref=0/sales",
             "/lake/api/layout.svg?ref=0/sales"]


@pytest.mark.slow
def test_every_lake_route_needs_an_airflow_login(stack: AirflowStack) -> None:
    for route in PROTECTED:
        assert httpx.get(stack.url + route, timeout=30).status_code == 401, route
        forged = httpx.get(stack.url + route, headers={"Authorization": "Bearer forged"}, timeout=30)
        assert forged.status_code in (401, 403), route
        cookie = httpx.get(stack.url + route, cookies={"_token": "forged"}, timeout=30)
        assert cookie.status_code in (401, 403), route
        assert stack.api.get(route).status_code == 200, route


@pytest.mark.slow
@pytest.mark.parametrize("ref", ["0/../secret", "0/sales/../../secret", "0/escape", "0/%2e%2e/secret",
                                 "/etc", "0//etc/passwd", "1/sales", "0/dims", "0/missing"])
def test_references_outside_the_roots_are_refused(stack: AirflowStack, ref: str) -> None:
    for route in ("/lake/table", "/lake/api/table", "/lake/api/layout.svg"):
        response = stack.api.get(route, params={"ref": ref})
        assert response.status_code == 404, (route, ref, response.text)
        assert "secret" not in response.text.replace(ref, "")


@pytest.mark.slow
def test_the_data_endpoints_tell_the_tables_numbers(stack: AirflowStack, lake: Path) -> None:
    listed = stack.api.get("/lake/api/tables").json()
    assert [t["ref"] for t in listed["tables"]] == ["0/big", "0/dims/users", "0/sales"] and not listed["errors"]
    for row in listed["tables"]:
        snap = LakeTable.open(row["path"]).snapshot()
        assert (row["rows"], row["files"], row["seq"]) == (sum(f.rows for f in snap.files), len(snap.files),
                                                           snap.seq), row
    sales = stack.api.get("/lake/api/table", params={"ref": "0/sales"}).json()
    assert [i["operation"] for i in sales["instants"]] == ["execute_clustering", "write", "write", "create_table"]
    assert sales["plans"]["commits_since_last_clustering"] == 0 and sales["clustered_at"] == 3
    big = stack.api.get("/lake/api/table", params={"ref": "0/big"}).json()
    assert big["total_instants"] == BIG_INSTANTS + 1 and len(big["instants"]) == 100
    assert big["instants"][0]["seq"] == BIG_INSTANTS and big["summary"]["commits_since_last_clustering"] == 10_000
    svg = stack.api.get("/lake/api/layout.svg", params={"ref": "0/dims/users"})
    assert svg.headers["content-type"].startswith("image/svg+xml") and svg.text.count("class=\"cell\"") == 4
    plugins = stack.api.get("/api/v2/plugins").json()["plugins"]
    ours = next(p for p in plugins if p["name"] == "airflow_lake")
    assert ours["external_views"][0]["name"] == "Lake" and ours["fastapi_apps"][0]["url_prefix"] == "/lake"


@pytest.mark.slow
def test_a_user_logs_in_and_reads_the_lake_page_in_chromium(stack: AirflowStack, lake: Path) -> None:
    from selenium.webdriver.common.by import By

    driver = browser()
    try:
        driver.get(stack.url + "/lake/")
        assert "Not authenticated" in driver.page_source  # no login yet: refused
        login(driver, stack)
        driver.get(stack.url + "/lake/")
        rows = {r.get_attribute("data-table"): r for r in driver.find_elements(By.CSS_SELECTOR, "#tables tbody tr")}
        assert sorted(rows) == ["0/big", "0/dims/users", "0/sales"]
        sales = LakeTable.open(str(lake / "sales")).snapshot()
        assert rows["0/sales"].find_element(By.CSS_SELECTOR, "td.rows").text == f"{sum(f.rows for f in sales.files):,}"
        assert rows["0/big"].find_element(By.CSS_SELECTOR, "td.instants").text == f"{BIG_INSTANTS + 1:,}"
        rows["0/sales"].find_element(By.TAG_NAME, "a").click()
        assert driver.find_element(By.ID, "table-name").text == "sales"
        timeline = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.instant")
        assert [r.find_elements(By.TAG_NAME, "td")[3].text for r in timeline] == [
            "execute_clustering", "write", "write", "create_table"]
        pictures = driver.find_elements(By.CSS_SELECTOR, "svg.layout")
        assert [p.get_attribute("aria-label") for p in pictures] == ["now", "before the last clustering"]
        cells = [len(p.find_elements(By.CSS_SELECTOR, "rect.cell")) for p in pictures]
        assert cells == [len(sales.files), len(LakeTable.open(str(lake / "sales")).snapshot(2).files)]
        ARTIFACTS.mkdir(exist_ok=True)
        assert driver.save_screenshot(str(ARTIFACTS / "lake-page-sales.png"))
        driver.get(stack.url + "/lake/table?ref=0/..%2F..%2Fsecret")
        assert "leaves its root" in driver.page_source or "without '.'" in driver.page_source
    finally:
        driver.quit()
