"""The Lake page shows versions as they are written (issue 33, item 12: "20,240,301" for the version 20240301):
versions, seqs and bucket ids are names, not amounts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
