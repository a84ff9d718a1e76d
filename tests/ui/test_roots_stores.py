"""The Lake page over store roots (S3, GCS and Azure: real servers on 127.0.0.1, `tests/stores.py`): store roots
come from the same
configuration as local ones, the tables under them are found by bounded listings, a table reference is confined to
its root by its text (no real path on a store) and names the table's URL, an operator's table URL links to its page,
and the page's data and HTML are made from an S3 table's metadata."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_lake.jobs.runner import run as run_job
from airflow_lake.lake import DataFile, LakeSpecError, LakeTable
from airflow_lake.lake.format import instants, table_roots
from airflow_lake.lake.format.identity import canonical_url
from airflow_lake.lake.format.storage import Storage
from airflow_lake.ui import access, data, pages
from airflow_lake.ui.links import LakeTableLink
from airflow_lake.ui.roots import BadTableRef, configured_roots, find_tables, relative_to_root, resolve
from airflow_lake.ui.svg import layout_svg
from tests.stores import BUCKET, STORES, StoreServer, server_of, without_gcsfs

BUCKETED = {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"], "bucket": {"columns": ["id"], "count": 4}}


def commit(table: LakeTable, dt: str, bucket: int, *, rows: int = 10, removed: tuple[str, ...] = (),
           action: str = "commit") -> DataFile:
    """One data file written to the store (manifest, then the file) and committed."""
    txn = table.begin(action, "write")
    item = DataFile(path=f"dt={dt}/part-{txn.instant}-t-00000_{bucket:05d}.parquet", partition={"dt": dt},
                    rows=rows, bytes=rows * 10, bucket=bucket, instant=txn.instant, stats={})
    instants.write_manifest(table.storage, txn.instant, [item.path])
    table.storage.write_bytes(item.path, b"PAR1")
    txn.commit(added=[item], removed=list(removed))
    return item


@pytest.fixture(scope="module", params=STORES)
def lake(request: pytest.FixtureRequest) -> dict[str, Any]:
    """ods/sales (bucketed: commits, a replace, a pending clustering plan), dims/users, tables the page leaves out
    (under a hidden prefix, and one whose name a reference cannot carry), other files (raw/); read only by the
    tests. Once per store."""
    server = server_of(request, request.param)
    s3_root = f"{server.url}/ui{uuid.uuid4().hex[:16]}"
    sales = LakeTable.create(f"{s3_root}/ods/sales", BUCKETED)
    first = commit(sales, "a", 1)
    for _ in range(4):
        commit(sales, "b", 0)
    commit(sales, "a", 2, removed=(first.path,), action="replace")
    plan = run_job(None, "schedule_clustering", {"table": sales.url, "min_commits": 1})
    LakeTable.create(f"{s3_root}/dims/users", {"schema": "id BIGINT"})
    LakeTable.create(f"{s3_root}/.hidden/t", {"schema": "id BIGINT"})
    LakeTable.create(f"{s3_root}/odd#name", {"schema": "id BIGINT"})
    Storage(s3_root).write_bytes("raw/x.csv", b"1")
    return {"root": s3_root, "sales": sales, "plan": plan, "server": server}


def test_store_roots_are_configured_as_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW__LAKE__ROOTS", f" s3://bucket/lake/ , {tmp_path}/a/, s3a://other , file://{tmp_path}/b")
    assert configured_roots() == ["s3://bucket/lake", f"{tmp_path}/a", "s3a://other", f"{tmp_path}/b"]


def test_tables_under_a_store_root_resolve_to_their_urls(lake: dict[str, Any], tmp_path: Path) -> None:
    server: StoreServer = lake["server"]
    roots = [str(tmp_path), lake["root"]]  # a local root first: store refs carry their root's number
    mark = server.counter.mark() if server.counter else Counter()
    found = find_tables(roots)
    counts = server.counter.since(mark) if server.counter else Counter()
    assert [t.ref for t in found] == ["1/dims/users", "1/ods/sales"]
    assert [t.path for t in found] == [f"{lake['root']}/dims/users", f"{lake['root']}/ods/sales"]
    assert not any(kind == "data" and method != "LIST" for method, kind in counts), counts  # no data file read
    ref = resolve("1/ods/sales", roots)
    assert (ref.root, ref.relative, ref.path) == (1, "ods/sales", lake["sales"].url)
    # the asset whose read access guards the table: its URL in the store's own scheme (az:// -> abfs://)
    assert access.table_uri(ref) == canonical_url(lake["sales"].url)
    assert find_tables([f"{lake['root']}/ods/sales"]) == []  # a root that is a table: nothing below it listed
    assert find_tables([server.url.replace(BUCKET, "no-such-bucket-here") + "/lake"]) == []
    with pytest.raises(LakeSpecError, match="more than 2 prefixes within 4 levels"):  # each a request: bounded
        table_roots.store_tables_below(lake["root"], 4, limit=2)


def test_a_store_that_cannot_be_read_hides_no_other_root(lake: dict[str, Any], tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if lake["server"].name == "gcs":
        pytest.skip("the unreadable store here is GCS: the lake's own store in this case")
    without_gcsfs(monkeypatch)
    LakeTable.create(str(tmp_path / "local"), {"schema": "id BIGINT"})
    roots = ["gs://bucket/lake", str(tmp_path), lake["root"]]  # gcsfs made uninstalled above
    assert [t.ref for t in find_tables(roots)] == ["1/local", "2/dims/users", "2/ods/sales"]
    assert "gs://bucket/lake cannot be listed" in caplog.text and "airflow-lake[gcs]" in caplog.text
    with pytest.raises(LakeSpecError, match="gcsfs"):
        find_tables(roots, strict=True)
    with pytest.raises(BadTableRef, match="its store cannot be read"):
        resolve("0/t", roots)


@pytest.mark.parametrize("bad", [
    "", "1/a", "0/", "0//ods/sales", "0/ods//sales", "0/ods/sales/", "0/./ods/sales", "0/../x", "0/ods/../ods/sales",
    "0/ods/sales/..", "0/ods/sales?x=1", "0/ods/sales#top", "0/odd#name", "0/ods%2Fsales", "0/ods/sal*",
    "0/ods/sale[s]", "0/ods/sales\x00", "0/ods/sales\x01", "0/ods\\sales", "0/raw", "0/ods", "0/missing",
    "0/ods/sales/_lake", "0/.hidden", "\u0660/ods/sales",
])
def test_bad_or_escaping_references_under_a_store_root_are_refused(lake: dict[str, Any], bad: str) -> None:
    with pytest.raises(BadTableRef):
        resolve(bad, [lake["root"]])


def test_a_reference_is_confined_by_its_text(lake: dict[str, Any]) -> None:
    root = lake["root"]
    assert resolve("0/.hidden/t", [root]).path == f"{root}/.hidden/t"  # listed or not, it is a table under the root
    sibling = f"{root}x"  # shares the root's leading characters: not under it
    assert relative_to_root(f"{sibling}/t", root) is None
    assert relative_to_root(f"{root}/ods/sales", root) == "ods/sales"
    assert relative_to_root(f"{root}/ods/sales/", root) == "ods/sales"
    scheme, rest = f"{root}/ods/sales".split("://", 1)
    alias = {"s3": "s3a", "gs": "gcs", "az": "abfs"}[scheme]
    assert relative_to_root(f"{alias}://{rest}", root) == "ods/sales"  # the store's other spelling
    assert relative_to_root(root, root) is None and relative_to_root("/local/path", root) is None
    assert relative_to_root(f"{root}/ods/sales", "/local/root") is None


def test_an_operators_table_url_links_to_its_page(lake: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW__LAKE__ROOTS", f"{tmp_path},{lake['root']}/")
    link = LakeTableLink()

    def href(table: str) -> str:
        return link.get_link(SimpleNamespace(table=table), ti_key=None)

    assert href(lake["sales"].url).endswith("/plugin/lake/lake/table?ref=1/ods/sales")
    scheme, rest = lake["sales"].url.split("://", 1)
    alias = {"s3": "s3a", "gs": "gcs", "az": "abfs"}[scheme]
    assert href(f"{alias}://{rest}").endswith("?ref=1/ods/sales")
    assert href(f"{lake['root']}/raw") == ""  # under the root, not a table
    assert href("s3://elsewhere/t") == "" and href("") == ""
    local = LakeTable.create(str(tmp_path / "local"), {"schema": "id BIGINT"})
    assert href(local.url).endswith("?ref=0/local")  # local roots as before


def test_the_page_of_a_table_on_a_store(lake: dict[str, Any]) -> None:
    server: StoreServer = lake["server"]
    ref = resolve("0/ods/sales", [lake["root"]])
    mark = server.counter.mark() if server.counter else Counter()
    opened = data.Opened.of(ref)
    detail = data.table_detail(ref, opened=opened)
    counts = server.counter.since(mark) if server.counter else Counter()
    summary = detail["summary"]
    assert summary["path"] == lake["sales"].url and summary["ref"] == "0/ods/sales"
    assert summary["files"] == 5 and summary["rows"] == 50 and summary["pending_plans"] == 1
    assert [p["name"] for p in detail["partitions"]] == ["dt=a", "dt=b"]
    assert detail["total_instants"] == 7 and detail["instants"][0]["state"] == "requested"
    assert [p["id"] for p in detail["plans"]["plans"]] == [lake["plan"]["plan_id"]]
    assert not any(kind == "data" for _, kind in counts), counts  # metadata only
    pictures = [layout_svg(data.layout(ref, None, opened), "now"),
                layout_svg(data.layout(ref, "1", opened), "as of 1")]
    html = pages.table_page(detail, pictures)
    assert "ods/sales" in html and "dt=b" in html and all(p.startswith("<svg") for p in pictures)
    assert data.table_summary(ref)["files"] == 5
