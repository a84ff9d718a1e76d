"""The Lake page served by a real `airflow api-server` (the plugin from the package's entry point): refused
without an Airflow login and for references outside the roots; with one, its numbers are the tables'; every
kind of table has a page (plain, partitioned, bucketed, bucketed from a partition on, clustered, clustered with
a pending plan, primary key with deltas, altered/deleted/restored, written by a DAG run), a damaged one a page
that names it and its problem. In headless Chromium a user logs in through Airflow's login form, finds the page
in the UI's own navigation, reads every kind of table there (its schema, partitions, plans, charts, health and
primary-key state checked against the log and snapshots; a screenshot per kind, kept in the test's temporary
directory and copied to $LAKE_PAGE_SCREENSHOTS if set), sees it follow the UI's dark mode, and follows a commit
to the task instance that made it. Who may read what: test_access.py.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urljoin

import httpx
import pytest

from airflow_lake import health, reports
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.clustering.timeline import pending_plans
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import CommitLog, LogEntry
from airflow_lake.ui.pages import task_link
from tests.airflow_stack import AIRFLOW, AirflowStack
from tests.browser import browser, login

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
    build_reclustered(spark, root / "reclustered")
    LakeTable.create(str(root / "linked"), {"schema": "k BIGINT, name STRING"})  # altered by a DAG run (`stack`)
    tricky = LakeTable.create(str(root / "tricky"), {"schema": "k BIGINT, dt STRING", "partition_by": ["dt"]})
    for _ in range(2):
        tricky.write(spark.createDataFrame([(k, XSS) for k in range(20)], "k BIGINT, dt STRING"))
    run(spark, "schedule_clustering", {"table": tricky.url, "min_commits": 1, "sort_columns": ["k"]})
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


def build_reclustered(spark: Any, path: Path) -> LakeTable:
    """Clustered once (days d1, d2), then written twice more into d2 and planned again: a pending plan on d2."""
    table = LakeTable.create(str(path), {"schema": "k BIGINT, v BIGINT, dt STRING", "partition_by": ["dt"]})
    schema = "k BIGINT, v BIGINT, dt STRING"
    table.write(spark.createDataFrame([(k, k % 7, d) for d in ("d1", "d2") for k in range(300)], schema)
                .repartition(3))
    run(spark, "schedule_clustering", {"table": table.url, "min_commits": 1, "sort_columns": ["k"]})
    run(spark, "execute_clustering", {"table": table.url})
    for batch in range(2):
        table.write(spark.createDataFrame([(k, batch, "d2") for k in range(100)], schema).repartition(2))
    run(spark, "schedule_clustering", {"table": table.url, "min_commits": 2, "sort_columns": ["k"],
                                       "partitions": [{"dt": "d2"}]})
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
READABLE = ["0/big", "0/dims/users", "0/events", "0/evolved", "0/keyed", "0/linked", "0/plain", "0/planned",
            "0/reclustered", "0/sales", "0/tricky"]
XSS = "<img src=x onerror=\"window.lakeXss=1\">'&"  # a partition value that is HTML
# what each kind of table is, for people: the table the test reads for it
KINDS = {"plain": "0/plain", "partitioned": "0/big", "bucketed": "0/dims/users",
         "bucketed-from-a-partition-on": "0/events", "clustered": "0/sales", "clustered-with-a-pending-plan":
         "0/reclustered", "planned-never-clustered": "0/planned", "primary-key-with-deltas": "0/keyed",
         "altered-deleted-restored": "0/evolved", "written-by-a-dag-run": "0/linked"}
LINKS_DAG = "lake_page_links"
LINKS_DAG_FILE = """
import pendulum
from airflow.sdk import DAG
from airflow_lake.operators.alter_table import LakeAlterTableOperator

with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False):
    one = LakeAlterTableOperator(task_id="add.note", table={table!r}, changes=[{{"add": "note", "type": "string"}}])
    one >> LakeAlterTableOperator.partial(task_id="add_mapped", table={table!r}).expand(
        changes=[[{{"add": "m0", "type": "string"}}], [{{"add": "m1", "type": "string"}}]])
"""


@pytest.fixture(scope="module")
def stack(lake: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """The api-server over the lake; then a real DAG run (`airflow dags test`, in the api-server's database) alters
    table `linked` from a task and two mapped tasks, whose commits the page links to."""
    dags = tmp_path_factory.mktemp("lake-page-dags")
    (dags / f"{LINKS_DAG}.py").write_text(textwrap.dedent(LINKS_DAG_FILE.format(dag_id=LINKS_DAG,
                                                                                 table=str(lake / "linked"))))
    env = {**os.environ, "AIRFLOW__LAKE__ROOTS": str(lake), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW_LAKE_ROOT": str(lake)}
    with AirflowStack(tmp_path_factory.mktemp("airflow"), env, components=("api-server",)) as running:
        done = subprocess.run([AIRFLOW, "dags", "test", LINKS_DAG], env=running.env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
        yield running


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go (the test's temporary directory; copied to $LAKE_PAGE_SCREENSHOTS if set)."""
    return tmp_path_factory.mktemp("lake-page-screenshots")


def screenshot(driver: Any, shots: Path, name: str) -> Path:
    """Save a screenshot of the browser window as `<name>.png` (and a copy in $LAKE_PAGE_SCREENSHOTS)."""
    path = shots / f"{name}.png"
    assert driver.save_screenshot(str(path)), name
    if os.environ.get("LAKE_PAGE_SCREENSHOTS"):
        keep = Path(os.environ["LAKE_PAGE_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / path.name)
    return path


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


def snapshot_numbers(path: str | Path, seq: int | None = None) -> dict[str, int]:
    """Files, rows and bytes of a snapshot, straight from the table."""
    snap = LakeTable.open(str(path)).snapshot(seq)
    return {"files": len(snap.files), "rows": sum(f.rows for f in snap.files),
            "bytes": sum(f.bytes for f in snap.files)}


@pytest.mark.slow
def test_the_data_endpoints_tell_the_tables_numbers(stack: AirflowStack, lake: Path) -> None:
    listed = stack.api.get("/lake/api/tables").json()
    assert [t["ref"] for t in listed["tables"]] == sorted([*READABLE, "0/broken_metrics"])
    assert [e.split(" ")[1] for e in listed["errors"]] == ["0/broken_checkpoint", "0/broken_log"]
    for row in listed["tables"]:
        snap = LakeTable.open(row["path"]).snapshot()
        assert (row["rows"], row["files"], row["seq"]) == (sum(f.rows for f in snap.files), len(snap.files),
                                                           snap.seq), row
    since = {t["ref"]: t["commits_since_last_clustering"] for t in listed["tables"]}
    # counted only where there is clustering: since the execution, or since the start for a plan never run
    assert {ref: n for ref, n in since.items() if n is not None} == {"0/sales": 0, "0/reclustered": 2,
                                                                     "0/planned": 2, "0/tricky": 2}
    sales = stack.api.get("/lake/api/table", params={"ref": "0/sales"}).json()
    assert [i["operation"] for i in sales["instants"]] == ["execute_clustering", "write", "write", "create_table"]
    assert sales["plans"]["commits_since_last_clustering"] == 0 and sales["clustered_at"] == 3
    big = stack.api.get("/lake/api/table", params={"ref": "0/big"}).json()
    assert big["total_instants"] == BIG_INSTANTS + 1 and len(big["instants"]) == 100
    assert big["instants"][0]["seq"] == BIG_INSTANTS
    assert big["summary"]["commits_since_last_clustering"] is None and not big["plans"]["clustered"]
    svg = stack.api.get("/lake/api/layout.svg", params={"ref": "0/dims/users"})
    assert svg.headers["content-type"].startswith("image/svg+xml") and svg.text.count("class=\"cell\"") == 4
    plugins = stack.api.get("/api/v2/plugins").json()["plugins"]
    ours = next(p for p in plugins if p["name"] == "airflow_lake")
    assert ours["fastapi_apps"][0]["url_prefix"] == "/lake"
    view = ours["external_views"][0]
    # a view of the UI's own navigation, at its top level (not under Browse), shown inside the UI at /plugin/lake
    assert (view["name"], view["destination"], view["url_route"], view["nav_top_level"], view["category"]) == (
        "Lake", "nav", "lake", True, None)
    assert view["icon"].startswith("data:image/svg+xml,") and view["icon_dark_mode"].startswith("data:image/svg+xml,")


@pytest.mark.slow
def test_the_charts_follow_the_snapshots_commit_by_commit(stack: AirflowStack, lake: Path) -> None:
    """Every point of every chart is the snapshot after that commit: files, bytes, rows and small files (below the
    table's health threshold), also across clusterings, bucket rewrites, deletes, restores and upserts."""
    for ref in ("0/sales", "0/reclustered", "0/events", "0/evolved", "0/keyed", "0/planned", "0/linked"):
        path = lake / ref[2:]
        table = LakeTable.open(str(path))
        charts = stack.api.get("/lake/api/table", params={"ref": ref}).json()["charts"]
        small = health.small_file_bytes(table.spec)
        assert charts["complete"] and charts["small_file_bytes"] == small
        assert [p["seq"] for p in charts["points"]] == list(range(table.commit_log.head() + 1)), ref
        for point in charts["points"]:
            snap = table.snapshot(point["seq"])
            expected = {**snapshot_numbers(path, point["seq"]),
                        "small_files": sum(1 for f in snap.files if f.bytes < small)}
            assert {k: point[k] for k in expected} == expected, (ref, point)
    big = stack.api.get("/lake/api/table", params={"ref": "0/big", "limit": 1000}).json()["charts"]
    assert [p["seq"] for p in big["points"]] == list(range(BIG_INSTANTS - 999, BIG_INSTANTS + 1))
    assert {k: big["points"][-1][k] for k in ("files", "rows", "bytes")} == snapshot_numbers(lake / "big")
    assert {k: big["points"][0][k] for k in ("files", "rows", "bytes")} == snapshot_numbers(lake / "big",
                                                                                           BIG_INSTANTS - 999)


def resolve_task_link(stack: AirflowStack, href: str) -> dict[str, Any]:
    """The task instance a commit's link names, as the api-server returns it (the UI page's own data)."""
    page = f"{stack.url}/lake/table"
    target = urljoin(page, html.unescape(href))
    assert target.startswith(f"{stack.url}/dags/"), target
    parts = target[len(f"{stack.url}/dags/"):].split("/")
    assert parts[1] == "runs" and parts[3] == "tasks" and len(parts) in (5, 7), parts
    route = f"/api/v2/dags/{parts[0]}/dagRuns/{parts[2]}/taskInstances/{parts[4]}"
    if len(parts) == 7:
        assert parts[5] == "mapped"
        route += f"/{parts[6]}"
    found = stack.api.get(route)
    assert found.status_code == 200, (route, found.text)
    return dict(found.json())


@pytest.mark.slow
def test_a_commit_links_to_the_task_instance_that_made_it(stack: AirflowStack, lake: Path) -> None:
    table = LakeTable.open(str(lake / "linked"))
    made = [table.commit_log.read(seq) for seq in range(1, table.commit_log.head() + 1)]
    recorded = [dict(e.metadata["airflow"]) for e in made]
    assert [(a["task_id"], a["map_index"]) for a in recorded] in (
        [("add.note", -1), ("add_mapped", 0), ("add_mapped", 1)], [("add.note", -1), ("add_mapped", 1),
                                                                    ("add_mapped", 0)])
    page = stack.api.get("/lake/table", params={"ref": "0/linked"}).text
    hrefs = re.findall(r"<a class='task-link' data-ui-link href='([^']*)' target='_top'", page)
    assert len(hrefs) == 3 and page.count("<td class='task'></td>") == 1  # the create: no task, no link
    for href, made_by in zip(hrefs, reversed(recorded), strict=True):  # (the timeline is newest first)
        assert html.unescape(href) == task_link(made_by)
        assert "%3A" in href and "%2B" in href  # the run id's ':' and '+' are encoded, not left to the browser
        instance = resolve_task_link(stack, href)
        assert (instance["dag_id"], instance["dag_run_id"], instance["task_id"], instance["map_index"]) == (
            LINKS_DAG, made_by["run_id"], made_by["task_id"], made_by["map_index"])
        assert instance["state"] == "success" and instance["try_number"] == made_by["try_number"]
    last = re.findall(r"<a class='task-link last' data-ui-link href='([^']*)'", page)  # the table's last commit
    assert len(last) == 1 and resolve_task_link(stack, last[0])["map_index"] == recorded[-1]["map_index"]


@pytest.mark.slow
def test_values_from_tables_are_escaped(stack: AirflowStack, lake: Path, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    page = stack.api.get("/lake/table", params={"ref": "0/tricky"}).text
    assert "<img" not in page and "onerror=\"" not in page  # only the escaped text
    label = f"dt={XSS}"
    assert html.escape(label) in page
    plans = stack.api.get("/lake/api/table", params={"ref": "0/tricky"}).json()["plans"]["plans"]
    assert plans[0]["partitions"] == [label]
    driver = browser()
    try:
        login(driver, stack)
        driver.get(f"{stack.url}/lake/table?ref=0/tricky")
        cells = driver.find_elements(By.CSS_SELECTOR, "#partitions tr.partition td.name")
        assert [c.text for c in cells] == [label]
        assert driver.find_element(By.CSS_SELECTOR, "#plans td.plan-partitions").text == label
        assert not driver.find_elements(By.CSS_SELECTOR, "img") and driver.execute_script("return window.lakeXss") \
            is None
        screenshot(driver, shots, "lake-page-escaped")
    finally:
        driver.quit()


def in_the_ui(driver: Any, stack: AirflowStack, page: str) -> None:
    """Open `page` of the Lake app inside the Airflow UI (`<ui>/plugin/lake/<page>`) and switch into its frame."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.switch_to.default_content()
    driver.get(f"{stack.url}/plugin/lake/{page}")
    frame = WebDriverWait(driver, 60).until(ec.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='Lake']")))
    driver.switch_to.frame(frame)
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "h1"))


@pytest.mark.slow
def test_a_user_finds_the_lake_view_in_the_ui_navigation_and_it_follows_the_ui_theme(
        stack: AirflowStack, shots: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser()
    try:
        driver.get(stack.url + "/lake/")
        assert "Not authenticated" in driver.page_source  # no login yet: refused
        login(driver, stack)
        wait = WebDriverWait(driver, 60)
        entry = wait.until(ec.element_to_be_clickable(
            (By.CSS_SELECTOR, "[data-testid='nav-sidebar'] [aria-label='Lake']")))
        entry.click()  # a top-level entry of the UI's navigation, not one under Browse
        wait.until(lambda d: d.current_url.rstrip("/") == f"{stack.url}/plugin/lake")
        frame = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='Lake']")))
        assert driver.find_element(By.CSS_SELECTOR, "[data-testid='nav-sidebar']").is_displayed()  # the UI's shell
        driver.switch_to.frame(frame)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#tables tbody tr"))
        assert driver.execute_script("return location.pathname") == "/lake/"
        light = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert driver.find_element(By.TAG_NAME, "html").get_attribute("data-ui-theme") == "light"
        screenshot(driver, shots, "lake-page-list")

        driver.switch_to.default_content()  # the UI's own switch: User > Appearance > Dark Mode
        driver.find_element(By.CSS_SELECTOR, "[data-testid='nav-sidebar'] [aria-label='User']").click()
        wait.until(lambda d: [i for i in d.find_elements(By.CSS_SELECTOR, "[role='menuitem']")
                              if i.text == "Appearance"])[0].click()
        wait.until(lambda d: [i for i in d.find_elements(By.CSS_SELECTOR, "[role='menuitem'], [role='menuitemradio']")
                              if i.text.strip() == "Dark Mode"])[0].click()
        wait.until(lambda d: "dark" in d.find_element(By.TAG_NAME, "html").get_attribute("class").split())
        ui_background = driver.execute_script(
            "return getComputedStyle(document.documentElement).getPropertyValue('--chakra-colors-bg').trim()")
        driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe[title='Lake']"))
        wait.until(lambda d: d.find_element(By.TAG_NAME, "html").get_attribute("data-ui-theme") == "dark")
        dark = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert dark != light and dark == ui_background  # the UI's own colour, not one of ours
        screenshot(driver, shots, "lake-page-list-dark")
    finally:
        driver.quit()


def page_table(driver: Any, selector: str) -> list[list[str]]:
    """The text of each cell of each row matching `selector`."""
    from selenium.webdriver.common.by import By

    return [[c.text for c in row.find_elements(By.TAG_NAME, "td")] for row in driver.find_elements(By.CSS_SELECTOR,
                                                                                                   selector)]


def check_schema(driver: Any, table: LakeTable) -> None:
    from selenium.webdriver.common.by import By

    spec = table.spec
    rows = driver.find_elements(By.CSS_SELECTOR, "#schema-table tr.column")
    shown = [(r.find_element(By.CSS_SELECTOR, ".name").text, r.find_element(By.CSS_SELECTOR, ".type").text,
              r.find_element(By.CSS_SELECTOR, ".nullable").text, r.find_element(By.CSS_SELECTOR, ".physical").text)
             for r in rows]
    assert shown == [(c.name, c.type, "yes" if c.nullable else "no", "" if c.physical == c.name else c.physical)
                     for c in spec.columns]
    roles = {r.find_element(By.CSS_SELECTOR, ".name").text: r.find_element(By.CSS_SELECTOR, ".roles").text
             for r in rows}
    for i, name in enumerate(spec.partition_columns):
        assert f"partition {i + 1}" in roles[name]
    for i, name in enumerate(spec.primary_key):
        assert f"key {i + 1}" in roles[name]
    for i, name in enumerate(spec.bucket.columns if spec.bucket else ()):
        assert f"bucket {i + 1}" in roles[name]


def check_partitions(driver: Any, table: LakeTable) -> None:
    from selenium.webdriver.common.by import By

    snap = table.snapshot()
    expected = {}
    for key, files in snap.partitions().items():
        sizes = [f.bytes for f in files]
        name = "/".join(f"{c}={v}" for c, v in key) or "(unpartitioned)"
        expected[name] = (len(files), sum(f.rows for f in files), sum(sizes), min(sizes), max(sizes))
    shown = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "#partitions tr.partition"):
        cell = {c: row.find_element(By.CSS_SELECTOR, f"td.{c}") for c in ("files", "rows", "bytes", "smallest",
                                                                          "largest")}
        shown[row.find_element(By.CSS_SELECTOR, "td.name").text] = (
            int(cell["files"].text.replace(",", "")), int(cell["rows"].text.replace(",", "")),
            *(int(cell[c].get_attribute("data-bytes")) for c in ("bytes", "smallest", "largest")))
        assert cell["bytes"].text and cell["smallest"].text and cell["largest"].text  # numbers shown, not hovered
    assert shown == expected


def check_health(driver: Any, table: LakeTable) -> None:
    from selenium.webdriver.common.by import By

    warnings = health.table_health(table, reports.summary_data(table))
    shown = driver.find_elements(By.CSS_SELECTOR, "#warnings .warning")
    assert [w.get_attribute("data-check") for w in shown] == [w["check"] for w in warnings]
    for element, warning in zip(shown, warnings, strict=True):
        assert element.find_element(By.CSS_SELECTOR, ".threshold").text == f"{warning['threshold']:,.3g}" or \
            element.find_element(By.CSS_SELECTOR, ".threshold").text == f"{warning['threshold']:,.0f}"
    if not warnings:
        assert driver.find_element(By.ID, "health-ok").text == "No warnings."


def check_charts(driver: Any, table: LakeTable) -> None:
    from selenium.webdriver.common.by import By

    snap = table.snapshot()
    latest = {c.get_attribute("data-series"): c.find_element(By.CSS_SELECTOR, ".latest").text
              for c in driver.find_elements(By.CSS_SELECTOR, "svg.chart")}
    assert latest["files"] == f"{len(snap.files):,}" and latest["rows"] == f"{sum(f.rows for f in snap.files):,}"
    small = health.small_file_bytes(table.spec)
    assert latest["small_files"] == f"{sum(1 for f in snap.files if f.bytes < small):,}"
    assert set(latest) == {"files", "bytes", "rows", "small_files"}


def check_clustering(driver: Any, table: LakeTable, kind: str) -> None:
    from selenium.webdriver.common.by import By

    plans = pending_plans(table)
    clustered = kind in ("clustered", "clustered-with-a-pending-plan")
    if not clustered and not plans:  # nothing to be behind on: no count, no section
        assert not driver.find_elements(By.ID, "clustering") and not driver.find_elements(By.ID, "since")
        return
    since = driver.find_element(By.ID, "since").text
    assert ("since the last clustering" in since) == clustered, since
    assert f"{len(plans)} pending plan(s)" in since
    for plan in plans:
        assert plan.plan is not None
        row = driver.find_element(By.CSS_SELECTOR, f"#plans tr.plan[data-plan='{plan.id}']")
        names = ["/".join(f"{c}={v}" for c, v in sorted(g.partition.items())) for g in plan.plan.groups]
        assert row.find_element(By.CSS_SELECTOR, "td.plan-partitions").text == ", ".join(dict.fromkeys(names))
        groups = page_table(driver, f"#plans tr.plan-groups[data-plan='{plan.id}'] tr.group")
        assert [(g[0], int(g[1].replace(",", "")), int(g[2].replace(",", ""))) for g in groups] == [
            (name, len(g.files), g.rows) for name, g in zip(names, plan.plan.groups, strict=True)]


def check_primary_key(driver: Any, table: LakeTable) -> None:
    from selenium.webdriver.common.by import By

    state = table.state()
    versions = sorted(state.versions or {})
    pk = driver.find_element(By.ID, "pk")
    assert (pk.find_element(By.CSS_SELECTOR, "td.versions").text, pk.find_element(By.CSS_SELECTOR, "td.lowest").text,
            pk.find_element(By.CSS_SELECTOR, "td.highest").text) == (str(len(versions)), str(versions[0]),
                                                                     str(versions[-1]))
    keyed = reports.primary_key_data(table)
    bound = "" if keyed["keys_exact"] else "\u2264 "
    assert pk.find_element(By.CSS_SELECTOR, "td.keys").text.startswith(f"{bound}{keyed['keys']:,} (")
    assert pk.find_element(By.CSS_SELECTOR, "td.stored").text == f"{sum(f.rows for f in table.snapshot().files):,}"
    # the pending deltas per bucket: every file an upsert wrote and no compaction folded yet
    deltas: dict[tuple[str, str], tuple[int, int]] = {}
    for f in table.snapshot().files:
        key = ("/".join(f"{c}={v}" for c, v in sorted(f.partition.items())) or "(unpartitioned)", str(f.bucket))
        files, rows = deltas.get(key, (0, 0))
        deltas[key] = (files + 1, rows + f.rows)
    assert {(r[0], r[1]): (int(r[2]), int(r[3])) for r in page_table(driver, "#deltas tr.delta")} == deltas


@pytest.mark.slow
def test_every_kind_of_table_in_the_ui(stack: AirflowStack, lake: Path, shots: Path) -> None:
    """Each kind of table, read in Chromium inside the Airflow UI: its sections hold the log's and snapshot's
    numbers; a screenshot of each."""
    from selenium.webdriver.common.by import By

    driver = browser()
    driver.set_window_size(1400, 2400)
    try:
        login(driver, stack)
        in_the_ui(driver, stack, "lake/")
        rows = {r.get_attribute("data-table"): r for r in driver.find_elements(By.CSS_SELECTOR, "#tables tbody tr")}
        assert sorted(rows) == sorted([*READABLE, "0/broken_metrics"])
        assert {ref: r.find_element(By.CSS_SELECTOR, "td.since").text for ref, r in rows.items()
                if r.find_element(By.CSS_SELECTOR, "td.since").text != "-"} == {
            "0/sales": "0", "0/reclustered": "2", "0/planned": "2", "0/tricky": "2"}
        for kind, ref in KINDS.items():
            table = LakeTable.open(str(lake / ref[2:]))
            in_the_ui(driver, stack, f"lake/table?ref={quote(ref, safe='/')}")
            assert driver.find_element(By.ID, "table-name").text == ref[2:]
            snap = table.snapshot()
            totals = driver.find_element(By.ID, "totals")
            assert totals.find_element(By.CSS_SELECTOR, ".rows").text == f"{sum(f.rows for f in snap.files):,}"
            assert totals.find_element(By.CSS_SELECTOR, "td.files").text == f"{len(snap.files):,}"
            check_schema(driver, table)
            check_partitions(driver, table)
            check_health(driver, table)
            check_charts(driver, table)
            check_clustering(driver, table, kind)
            if table.spec.primary_key:
                check_primary_key(driver, table)
            else:
                assert not driver.find_elements(By.ID, "pk")
            timeline = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.instant")
            assert len(timeline) == min(len(table.timeline()), 100)
            pictures = driver.find_elements(By.CSS_SELECTOR, "svg.layout")
            cells = [len(p.find_elements(By.CSS_SELECTOR, "rect.cell")) for p in pictures]
            if kind == "clustered":  # the layout now, and before the last clustering
                assert [p.get_attribute("aria-label") for p in pictures] == ["now", "before the last clustering"]
                assert cells == [len(snap.files), len(table.snapshot(2).files)]
            elif kind in ("bucketed", "primary-key-with-deltas"):
                assert cells == [4]  # one cell per bucket
            screenshot(driver, shots, f"lake-page-{kind}")
        # the bucketed-from-a-partition-on table names its plain partition beside the bucketed ones
        in_the_ui(driver, stack, "lake/table?ref=0/events")
        assert driver.find_element(By.CSS_SELECTOR, "#totals td.buckets").text == \
            "4 on k (2 partitions, dt=d2 to dt=d3); plain (dt=d1)"
        assert [r[4] for r in page_table(driver, "#partitions tr.partition")] == [
            "plain", "4 (4 with files)", "4 (4 with files)"]
        # a commit made by a DAG run: its link opens the task instance in the UI (not in the frame)
        in_the_ui(driver, stack, "lake/table?ref=0/linked")
        link = driver.find_elements(By.CSS_SELECTOR, "#timeline a.task-link")[-1]
        assert link.text == f"{LINKS_DAG} \u203a add.note"
        link.click()
        driver.switch_to.default_content()
        made = dict(LakeTable.open(str(lake / "linked")).commit_log.read(1).metadata["airflow"])
        expected = f"{stack.url}/dags/{LINKS_DAG}/runs/{quote(made['run_id'], safe='')}/tasks/add.note"
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(driver, 60).until(lambda d: unquote(d.current_url) == unquote(expected))
        WebDriverWait(driver, 60).until(lambda d: "LakeAlterTableOperator" in d.page_source)
        assert not driver.find_elements(By.CSS_SELECTOR, "iframe[title='Lake']")
        screenshot(driver, shots, "lake-page-task-instance")
    finally:
        driver.quit()


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
    assert page.text.count("<tr class='instant'") == len(detail["instants"]) >= min(snap.seq + 1, 100)
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
    # merged keys, not stored rows: 60 keys were upserted (0..59), in 85 stored delta rows
    assert keyed["summary"]["rows"] == 85 and keyed["summary"]["visible_rows"]["what"] == "keys"
    assert keyed["summary"]["visible_rows"]["count"] >= 60
    events = stack.api.get("/lake/api/table", params={"ref": "0/events"}).json()
    assert [i["operation"] for i in events["instants"]] == ["write", "bucket_rewrite", "write", "create_table"]
    assert events["summary"]["bucket"]["count"] == 4
    assert events["summary"]["layout"]["plain"]["partitions"] == 1  # the plain partition is not hidden
    svg = stack.api.get("/lake/api/layout.svg", params={"ref": "0/events"}).text
    rows = svg.split("<text")[2:]  # after the title: one label per partition, then its cells
    assert [r.split(">")[1].split(" ")[0] for r in rows] == ["dt=d1", "dt=d2", "dt=d3"]
    assert [r.count('class="cell"') for r in rows] == [3, 4, 4]
    planned = stack.api.get("/lake/table", params={"ref": "0/planned"}).text
    assert "1 pending plan(s)" in planned and "<table id='plans'>" in planned


def changes_shown(stack: AirflowStack, ref: str) -> list[tuple[str, Any]]:
    """Per instant of a table's timeline (newest first): its operation and (inserted, deleted, updated), '—' for a
    commit that changes no row, or 'n/a'."""
    out: list[tuple[str, Any]] = []
    for item in stack.api.get("/lake/api/table", params={"ref": ref}).json()["instants"]:
        changes = item["changes"]
        shown = (changes["inserted"], changes["deleted"], changes["updated"]) if changes["state"] == "counted" \
            else "—" if changes["state"] == "data_free" else "n/a"
        out.append((item["operation"], shown))
    return out


@pytest.mark.slow
def test_the_timeline_shows_what_each_commit_changed(stack: AirflowStack) -> None:
    """Issue 36: rows inserted, deleted and updated per commit (keys of a primary-key table, late versions and
    carried-over rows not counted), '—' for commits that change no row, 'n/a' beyond the newest counted commits."""
    assert changes_shown(stack, "0/keyed") == [  # keys 0-4 newer; 20-39 newer, 40-59 new; 0-39 new
        ("versioned_upsert", (0, 0, 5)), ("versioned_upsert", (20, 0, 20)), ("versioned_upsert", (40, 0, 0)),
        ("create_table", "—")]
    assert changes_shown(stack, "0/evolved") == [
        ("restore", (1, 0, 0)), ("delete", (0, 1, 0)), ("write", (10, 0, 0)), ("alter_table", "—"),
        ("write", (30, 0, 0)), ("create_table", "—")]
    assert changes_shown(stack, "0/sales") == [("execute_clustering", "—"), ("write", (2000, 0, 0)),
                                               ("write", (2000, 0, 0)), ("create_table", "—")]
    assert changes_shown(stack, "0/events") == [("write", (200, 0, 0)), ("bucket_rewrite", "—"),
                                                ("write", (400, 0, 0)), ("create_table", "—")]
    big = stack.api.get("/lake/api/table", params={"ref": "0/big"}).json()["instants"]
    # (its files are only described, never written: an append is counted from the log's row counts, not read)
    assert big[0]["changes"] == {"state": "counted", "inserted": 10, "deleted": 0, "updated": 0}
    assert "only the newest 10 data-changing commits" in big[10]["changes"]["reason"]
    page = stack.api.get("/lake/table", params={"ref": "0/keyed"}).text
    assert "data-state='counted' data-inserted='20' data-deleted='0' data-updated='20'" in page
    assert "+20 &minus;0 ~20</td>" in page and "<td class='n changes' data-state='data_free'" in page


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
    assert widest.status_code == 200 and widest.text.count("<tr class='instant'") == 1000
    assert "Show more" not in widest.text and "airflow-lake timeline" in widest.text
    assert "limit=1000'>Show more" in stack.api.get("/lake/table", params={"ref": "0/big"}).text
    for route in ("/lake/table", "/lake/api/table"):
        for limit in (1001, 100_000, 0):
            refused = stack.api.get(route, params={"ref": "0/big", "limit": limit})
            assert refused.status_code == 422 and "limit" in refused.text, (route, limit)
