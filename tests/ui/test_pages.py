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
