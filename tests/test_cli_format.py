"""What the timeline shows (issue 33, item 12): a delete's row says the rows it removed, the rows its rewrites added
and the net (it said "rows +26,518" for a 43-row delete); `timeline` on a directory of tables says to give a table
(it said "create it first")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.cli_format import instant_summary, rows_change
from airflow_lake.lake.table import LakeTable


def test_rows_change_shows_removed_added_and_the_net() -> None:
    delete = {"files_added": 1, "files_removed": 1, "rows_added": 26_518, "rows_removed": 26_561}
    assert rows_change(delete) == "rows +26,518/-26,561 (net -43)"
    assert instant_summary({"state": "completed", "metrics": delete}) == \
        "files +1/-1, rows +26,518/-26,561 (net -43)"
    assert rows_change({"rows_added": 10, "rows_removed": 0}) == "rows +10"  # an append
    assert rows_change({"rows_added": 10}) == "rows +10"
    assert rows_change({"rows_added": 30, "rows_removed": 10}) == "rows +30/-10 (net +20)"  # an overwrite


def test_a_delete_in_the_timeline(spark: Any, table_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT"})
    table.write(spark.range(50).repartition(1))
    assert table.delete(spark, where="id < 3") is not None
    assert main(["timeline", table_path]) == 0
    out = capsys.readouterr().out
    assert any(line.rstrip().endswith("files +1/-0, rows +50") for line in out.splitlines())  # the append
    assert "files +1/-1, rows +47/-50 (net -3)" in out


def test_timeline_on_a_directory_of_tables_says_to_give_a_table(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    LakeTable.create(str(tmp_path / "ods" / "orders"), {"schema": "id BIGINT"})
    LakeTable.create(str(tmp_path / "dm"), {"schema": "id BIGINT"})
    assert main(["timeline", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{str(tmp_path)!r} is not a lake table but a directory holding lake tables" in err
    assert f"Fix: give one table's path, e.g. {str(tmp_path / 'dm')!r}" in err and "create it first" not in err
    assert main(["timeline", str(tmp_path / "nothing")]) == 2
    assert "create it first" in capsys.readouterr().err  # (no table anywhere there: maybe not created yet)
