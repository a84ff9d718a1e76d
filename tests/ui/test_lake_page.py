"""The Lake page served by a real `airflow api-server` (the plugin from the package's entry point): refused
without an Airflow login and for references outside the roots; with one, its numbers are the tables'; every
kind of table has a page (plain, partitioned, bucketed, bucketed from a partition on, primary key, with a
pending plan), a damaged one a page that names it and its problem; and in headless Chromium a user logs in
through Airflow's login form and reads the page (screenshots are kept). Who may read what: test_access.py.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import CommitLog, LogEntry
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
    plain = LakeTable.create(str(root / "plain"), {"schema": "k BIGINT, name STRING"})
    plain.write(spark.createDataFrame([(k, f"p{k}") for k in range(50)], "k BIGINT, name STRING"))
    build_bucketed_from_a_partition_on(spark, root / "events")
    build_keyed(spark, root / "keyed", base / "landing")
    build_evolved(spark, root / "evolved")
    planned = LakeTable.create(str(root / "planned"), {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]})
    for _ in range(2):
        planned.write(spark.createDataFrame([(k, "d1") for k in range(500)], "k BIGINT, dt STRING").repartition(3))
    run(spark, "schedule_clustering", {"table": planned.url, "min_commits": 2, "sort_columns": ["k"]})
    for name, damage in DAMAGES.items():
        damage(build_long_timeline(root / name, 105))
    LakeTable.create(str(base / "secret"), {"schema": "x BIGINT"})
    os.symlink(base / "secret", root / "escape")
    (root / "innocent").mkdir()
    os.symlink(base / "secret" / "_lake", root / "innocent" / "_lake")  # a table's metadata planted from outside
    yield root


def build_bucketed_from_a_partition_on(spark: Any, path: Path) -> LakeTable:
    """A plain partitioned table bucketed from partition d2 on (a bucket_rewrite with a from-partition), then
    written to: d1 stays plain, d2 and d3 have 4 buckets."""
    table = LakeTable.create(str(path), {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]})
    schema = "k BIGINT, dt STRING"
    table.write(spark.createDataFrame([(k, d) for d in ("d1", "d2") for k in range(200)], schema).repartition(3))
    run(spark, "bucket_rewrite", {"table": table.url, "partitions": {"from": {"dt": "d2"}},
                                  "bucket": {"columns": ["k"], "count": 4}})
    table.write(spark.createDataFrame([(k, "d3") for k in range(200)], schema))
    return table


def build_evolved(spark: Any, path: Path) -> LakeTable:
    """A table that lived: a column added and one renamed, a row deleted, then restored to before the delete."""
    table = LakeTable.create(str(path), {"schema": "k BIGINT, name STRING"})
    table.write(spark.createDataFrame([(k, f"e{k}") for k in range(30)], "k BIGINT, name STRING"))
    table.alter_table([{"add": "score", "type": "double"}, {"rename": "name", "to": "label"}])
    later = [(k, f"f{k}", k / 2) for k in range(30, 40)]
    table.write(spark.createDataFrame(later, "k BIGINT, label STRING, score DOUBLE"))
    before = table.commit_log.head()
    table.delete(spark, filters=[("k", "=", 3)])
    table.restore(to_seq=before)
    return table


def build_keyed(spark: Any, path: Path, landing: Path) -> LakeTable:
    """A primary-key table after three versioned upserts (version 1; versions 2 and 3 from a column; version
    4), the last one's log entry stored as releases before this one stored it ("versions": a count)."""
    table = LakeTable.create(str(path), {"schema": "k BIGINT NOT NULL, name STRING, v BIGINT", "primary_key": ["k"],
                                         "bucket": {"columns": ["k"], "count": 4}})
    batches: dict[str, tuple[list[tuple[int, str, int]], dict[str, Any]]] = {
        "b1": ([(k, f"n{k}", 1) for k in range(40)], {"version": 1}),
        "b23": ([(k, f"m{k}", 2 + k % 2) for k in range(20, 60)], {"version_column": "v"}),
        "b4": ([(k, f"o{k}", 4) for k in range(5)], {"version": 4})}
    for name, (rows, version) in batches.items():
        spark.createDataFrame(rows, "k BIGINT, name STRING, v BIGINT").write.parquet(str(landing / name))
        run(spark, "versioned_upsert", {"table": table.url, **version,
                                        "source": {"path": str(landing / name), "format": "parquet"}})
    entry = max((path / "_lake" / "log").iterdir())
    stored = json.loads(entry.read_text())
    stored["metrics"]["versions"] = len(stored["metadata"]["versions"])
    stored["metrics"].pop("version_count", None)
    entry.write_text(json.dumps(stored))
    return table


def _cut_the_newest_log_entry(table: LakeTable) -> None:
    newest = max((Path(table.url) / "_lake" / "log").iterdir())
    newest.write_text(newest.read_text()[:40])


def _damage_the_checkpoint_the_log_was_cleaned_up_to(table: LakeTable) -> None:
    lake_dir = Path(table.url) / "_lake"
    for checkpoint in (lake_dir / "checkpoints").iterdir():
        checkpoint.write_bytes(checkpoint.read_bytes()[:-40] + bytes(40))
    for entry in (lake_dir / "log").iterdir():
        if int(entry.stem) < 100:
            entry.unlink()


def _store_a_metric_the_page_cannot_read(table: LakeTable) -> None:
    newest = max((Path(table.url) / "_lake" / "log").iterdir())
    stored = json.loads(newest.read_text())
    stored["metrics"]["rows_added"] = "many"
    newest.write_text(json.dumps(stored))


DAMAGES = {"broken_log": _cut_the_newest_log_entry,
           "broken_checkpoint": _damage_the_checkpoint_the_log_was_cleaned_up_to,
           "broken_metrics": _store_a_metric_the_page_cannot_read}
READABLE = ["0/big", "0/dims/users", "0/events", "0/evolved", "0/keyed", "0/plain", "0/planned", "0/sales"]


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
                                 "/etc", "0//etc/passwd", "1/sales", "0/dims", "0/missing", "0/innocent"])
def test_references_outside_the_roots_are_refused(stack: AirflowStack, ref: str) -> None:
    for route in ("/lake/table", "/lake/api/table", "/lake/api/layout.svg"):
        response = stack.api.get(route, params={"ref": ref})
        assert response.status_code == 404, (route, ref, response.text)
        assert "secret" not in response.text.replace(ref, "")


@pytest.mark.slow
def test_the_data_endpoints_tell_the_tables_numbers(stack: AirflowStack, lake: Path) -> None:
    listed = stack.api.get("/lake/api/tables").json()
    assert [t["ref"] for t in listed["tables"]] == sorted([*READABLE, "0/broken_metrics"])
    assert [e.split(" ")[1] for e in listed["errors"]] == ["0/broken_checkpoint", "0/broken_log"]
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
        assert sorted(rows) == sorted([*READABLE, "0/broken_metrics"])
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
        read_the_primary_key_table(driver, stack, lake)
        driver.get(stack.url + "/lake/table?ref=0/broken_log")
        assert driver.find_element(By.ID, "table-name").text == "broken_log"
        assert "Table 0/broken_log" in driver.find_element(By.ID, "error").text
        assert "is damaged (not JSON" in driver.find_element(By.ID, "error").text
    finally:
        driver.quit()


def read_the_primary_key_table(driver: Any, stack: AirflowStack, lake: Path) -> None:
    """From the list to the primary-key table's page: its key, rows and the versions of each upsert."""
    from selenium.webdriver.common.by import By

    driver.get(stack.url + "/lake/")
    row = driver.find_element(By.CSS_SELECTOR, "#tables tr[data-table='0/keyed']")
    row.find_element(By.TAG_NAME, "a").click()
    assert driver.find_element(By.ID, "table-name").text == "keyed"
    keyed = LakeTable.open(str(lake / "keyed")).snapshot()
    assert driver.find_element(By.CSS_SELECTOR, "#totals td.rows").text == f"{sum(f.rows for f in keyed.files):,}"
    assert driver.find_elements(By.CSS_SELECTOR, "#totals td")[-1].text == "k"
    timeline = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.instant")
    assert [(r.find_elements(By.TAG_NAME, "td")[3].text, r.find_element(By.CSS_SELECTOR, "td.versions").text)
            for r in timeline] == KEYED_TIMELINE
    pictures = driver.find_elements(By.CSS_SELECTOR, "svg.layout")
    assert len(pictures[0].find_elements(By.CSS_SELECTOR, "rect.cell")) == 4  # one cell per bucket
    assert driver.save_screenshot(str(ARTIFACTS / "lake-page-keyed.png"))


KEYED_TIMELINE = [("versioned_upsert", "4"), ("versioned_upsert", "2, 3"), ("versioned_upsert", "1"),
                  ("create_table", "")]


@pytest.mark.slow
@pytest.mark.parametrize("ref", READABLE)
def test_every_kind_of_table_has_a_page(stack: AirflowStack, lake: Path, ref: str) -> None:
    page = stack.api.get("/lake/table", params={"ref": ref})
    assert page.status_code == 200, page.text
    assert f"<h1 id='table-name'>{ref[2:]}</h1>" in page.text
    detail = stack.api.get("/lake/api/table", params={"ref": ref}).json()
    table = LakeTable.open(str(lake / ref[2:]))
    snap = table.snapshot()
    assert (detail["summary"]["rows"], detail["summary"]["files"]) == (sum(f.rows for f in snap.files),
                                                                       len(snap.files))
    assert page.text.count("<tr class='instant'>") == len(detail["instants"]) >= min(snap.seq + 1, 100)
    svg = stack.api.get("/lake/api/layout.svg", params={"ref": ref})
    assert svg.status_code == 200 and svg.text.count('class="cell"') >= (1 if snap.files else 0)


@pytest.mark.slow
def test_the_pages_of_bucketed_keyed_and_planned_tables_tell_what_they_are(stack: AirflowStack) -> None:
    keyed = stack.api.get("/lake/api/table", params={"ref": "0/keyed"}).json()
    assert [i["operation"] for i in keyed["instants"]] == [op for op, _ in KEYED_TIMELINE]
    assert keyed["instants"][0]["metrics"]["versions"] == 1  # stored by an earlier release: a count
    page = stack.api.get("/lake/table", params={"ref": "0/keyed"}).text
    assert [cell.split("</td>")[0] for cell in page.split("<td class='versions'>")[1:]] == [
        v for _, v in KEYED_TIMELINE]
    events = stack.api.get("/lake/api/table", params={"ref": "0/events"}).json()
    assert [i["operation"] for i in events["instants"]] == ["write", "bucket_rewrite", "write", "create_table"]
    assert events["summary"]["bucket"]["count"] == 4
    svg = stack.api.get("/lake/api/layout.svg", params={"ref": "0/events"}).text
    rows = svg.split("<text")[2:]  # after the title: one label per partition, then its cells
    assert [r.split(">")[1].split(" ")[0] for r in rows] == ["dt=d1", "dt=d2", "dt=d3"]
    assert [r.count('class="cell"') for r in rows][1:] == [4, 4]
    planned = stack.api.get("/lake/table", params={"ref": "0/planned"}).text
    assert "1 pending plan(s)" in planned and "<table id='plans'>" in planned


@pytest.mark.slow
@pytest.mark.parametrize(("name", "problem"), [("broken_log", "is damaged (not JSON"),
                                               ("broken_checkpoint", ".json is missing, but the log goes on"),
                                               ("broken_metrics", "ValueError: invalid literal for int()")])
def test_a_damaged_table_gets_a_page_naming_it_and_its_problem(stack: AirflowStack, name: str, problem: str) -> None:
    page = stack.api.get("/lake/table", params={"ref": f"0/{name}"})
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert f"Table 0/{name} (" in page.text and problem in page.text, page.text
    if name != "broken_metrics":  # (its data is readable: only its page cannot show an entry)
        detail = stack.api.get("/lake/api/table", params={"ref": f"0/{name}"})
        assert detail.status_code == 500 and problem in detail.json()["detail"]
        layout = stack.api.get("/lake/api/layout.svg", params={"ref": f"0/{name}"})
        assert layout.status_code == 500 and f"Table 0/{name}" in layout.json()["detail"]
    listing = stack.api.get("/lake/")
    assert listing.status_code == 200 and all(f"data-table='{ref}'" in listing.text for ref in READABLE)


@pytest.mark.slow
def test_the_timeline_page_is_capped(stack: AirflowStack) -> None:
    widest = stack.api.get("/lake/table", params={"ref": "0/big", "limit": 1000})
    assert widest.status_code == 200 and widest.text.count("<tr class='instant'>") == 1000
    assert "Show more" not in widest.text and "airflow-lake timeline" in widest.text
    assert "limit=1000'>Show more" in stack.api.get("/lake/table", params={"ref": "0/big"}).text
    for route in ("/lake/table", "/lake/api/table"):
        for limit in (1001, 100_000, 0):
            refused = stack.api.get(route, params={"ref": "0/big", "limit": limit})
            assert refused.status_code == 422 and "limit" in refused.text, (route, limit)
