"""The Lake page shows versions as they are written (issue 33, item 12: "20,240,301" for the version 20240301):
versions, seqs and bucket ids are names, not amounts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.upsert import versioned_upsert
from airflow_lake.ui import data, pages
from airflow_lake.ui.roots import resolve


def test_versions_are_shown_plainly(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "dim"), {"schema": "k BIGINT NOT NULL, v STRING", "primary_key": ["k"],
                                                     "bucket": {"columns": ["k"], "count": 2}})
    for version in (20240301, 20240302):
        versioned_upsert(table, spark.createDataFrame([(1, str(version))], "k BIGINT, v STRING"), version=version)
    ref = resolve("0/dim", [str(tmp_path)])
    html = pages.table_page(data.table_detail(ref), [])
    assert "<td class='n lowest'>20240301</td>" in html and "<td class='n highest'>20240302</td>" in html
    assert "20,240,30" not in html


def test_the_page_shows_what_other_engines_see(spark: Any, tmp_path: Path) -> None:
    """Issue 34: per table the published Delta seq against our head, and for a primary-key table the upserts other
    engines see only after the next compaction (counted against what delta-rs reads of the published log)."""
    from deltalake import DeltaTable

    from airflow_lake.lake.upsert.compact import compact

    table = LakeTable.create(str(tmp_path / "dim"), {"schema": "k BIGINT NOT NULL, v STRING", "primary_key": ["k"],
                                                     "bucket": {"columns": ["k"], "count": 1}})
    for version in (1, 2):
        versioned_upsert(table, spark.createDataFrame([(version, "x")], "k BIGINT, v STRING"), version=version)
    compact(table, spark)
    versioned_upsert(table, spark.createDataFrame([(3, "y"), (4, "z")], "k BIGINT, v STRING"), version=3)
    off = LakeTable.create(str(tmp_path / "off"), {"schema": "k BIGINT", "properties": {"publish.delta": "false"}})
    published = {uri.removeprefix(table.url + "/") for uri in DeltaTable(table.url).file_uris()}
    waiting = [f for f in table.snapshot().files if f.path not in published]
    assert published and len(waiting) == 1

    row = data.table_summary(resolve("0/dim", [str(tmp_path)]))
    assert row["published"] == {"seq": 4, "published_seq": 4, "unpublished_commits": 0, "hidden_files": 1,
                                "hidden_commits": 1, "hidden_rows": 2, "tombstone_files": 0}
    index = pages.index_page([str(tmp_path)], [row, data.table_summary(resolve("0/off", [str(tmp_path)]))], [])
    assert "<th title='The newest Delta Lake version other engines read, against our log'>Published</th>" in index
    assert ("<td class='published' data-published-seq='4'>Delta <span class='published-seq'>4</span> / "
            "<span class='head-seq'>4</span><div class='hidden muted' data-hidden-commits='1' data-hidden-files='1'>"
            "1 upsert commit(s), 1 file(s) not visible elsewhere until the next compaction</div></td>") in index
    assert "<td class='published' data-published-seq=''>off <span class='muted'>(publish.delta is false)</span>" \
        in index
    html = pages.table_page(data.table_detail(resolve("0/dim", [str(tmp_path)])), [])
    assert "<th>Published for other engines</th>" in html and "data-hidden-commits='1'" in html
    assert off.commit_log.head() == 0


def test_the_timeline_shows_each_commits_change_counts_bounded(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: per commit the rows it inserted, deleted and updated (read from the files it touched, no Spark),
    '—' for a commit that changes no row, 'n/a' for one that would read more than [lake] change_counts_max_mb, one
    beyond the newest counted commits, and one whose files are gone."""
    from tests.lake.publish.arrow_commits import commit, make_table

    table = make_table(str(tmp_path / "t"))
    first = commit(table, [1, 2, 3], "a")
    commit(table, [1, 3], "a", removed=[first.added[0].path])  # a copy-on-write delete of id 2
    table.alter_table([{"add": "note", "type": "string"}])
    commit(table, [4, 5], "b")
    detail = data.table_detail(resolve("0/t", [str(tmp_path)]))
    assert [(i["seq"], i["changes"]) for i in detail["instants"]] == [
        (4, {"state": "counted", "inserted": 2, "deleted": 0, "updated": 0}), (3, {"state": "data_free"}),
        (2, {"state": "counted", "inserted": 0, "deleted": 1, "updated": 0}),
        (1, {"state": "counted", "inserted": 3, "deleted": 0, "updated": 0}), (0, {"state": "data_free"})]
    html = pages.table_page(detail, [])
    cells = [cell.split("</td>")[0] for cell in html.split("<td class='n changes")[1:]]
    assert cells[:3] == [
        "' data-state='counted' data-inserted='2' data-deleted='0' data-updated='0' title='2 inserted, 0 deleted, "
        "0 updated'>+2 &minus;0 ~0", "' data-state='data_free' title='changes no row'>—",
        "' data-state='counted' data-inserted='0' data-deleted='1' data-updated='0' title='0 inserted, 1 deleted, "
        "0 updated'>+0 &minus;1 ~0"]

    big = make_table(str(tmp_path / "big"))
    appended = {part: commit(big, list(range(1000)), part) for part in ("a", "b", "c")}  # seqs 1-3
    for part in ("a", "b", "c"):  # seqs 4-6: rewrites (only reading tells what they changed)
        commit(big, list(range(1, 1001)), part, removed=[appended[part].added[0].path])
    sizes = {seq: sum(f.bytes for f in big.commit_log.read(seq).added) + sum(
        f.bytes for f in big.commit_log.read(seq - 3).added) for seq in (4, 5, 6)}
    monkeypatch.setenv("AIRFLOW__LAKE__CHANGE_COUNTS_MAX_MB", str((sizes[6] - 1) / 1024 / 1024))
    opened = data.Opened.of(resolve("0/big", [str(tmp_path)]))
    counts = data.commit_changes(opened, [6, 5, 4, 3, 0], commits=1)
    assert counts[6]["state"] == "not_counted" and counts[6]["bytes"] == sizes[6]
    assert "more than [lake] change_counts_max_mb" in counts[6]["reason"]
    for seq in (5, 4):
        assert counts[seq]["state"] == "not_counted" and "only the newest 1 data-changing commits" in \
            counts[seq]["reason"]
    assert counts[0] == {"state": "data_free"}
    monkeypatch.setenv("AIRFLOW__LAKE__CHANGE_COUNTS_MAX_MB", "1")
    Path(big.storage.path(big.commit_log.read(5).added[0].path)).unlink()
    Path(big.storage.path(big.commit_log.read(1).added[0].path)).unlink()
    counts = data.commit_changes(opened, [6, 5, 1])
    assert counts[6] == {"state": "counted", "inserted": 1, "deleted": 1, "updated": 0}
    assert counts[5]["state"] == "not_counted" and "its files cannot be read (FileNotFoundError" in counts[5]["reason"]
    assert "title='its files cannot be read" in pages.table_page(data.table_detail(opened.ref, opened=opened), [])
    # an append is counted from its files' row counts in the log: nothing is read (its file is gone, no bound)
    monkeypatch.setenv("AIRFLOW__LAKE__CHANGE_COUNTS_MAX_MB", "0.000001")
    assert data.commit_changes(opened, [1]) == {1: {"state": "counted", "inserted": 1000, "deleted": 0,
                                                    "updated": 0}}
