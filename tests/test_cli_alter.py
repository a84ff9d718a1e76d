"""`airflow-lake alter`: changes in the order given, one commit, errors on stderr with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_lake.cli import main
from airflow_lake.lake import LakeTable


def test_alter_applies_the_flags_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "a INT, b STRING, dt STRING", "partition_by": ["dt"]})
    code = main(["alter", table.url, "--add", "c2 DECIMAL(10, 2) AFTER a", "--rename", "b=label", "--widen",
                 "a BIGINT", "--drop", "c2", "--add", "first_col int FIRST", "--set", "clean.retain.hours=24",
                 "--set", "user.owner=me", "--unset", "user.owner"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "label string  (in files: b)" in out and "no data file written" in out
    spec = LakeTable.open(table.url).spec
    assert spec.column_names == ["first_col", "a", "label", "dt"] and spec.retired_physical == ("c2",)
    assert dict(spec.properties) == {"clean.retain.hours": "24"}
    assert main(["alter", table.url, "--add", "z int", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == [{"add": "z", "type": "int"}]


def test_alter_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "a INT, dt STRING", "partition_by": ["dt"]})
    assert main(["alter", table.url]) == 2
    assert "no change given" in capsys.readouterr().err
    assert main(["alter", table.url, "--drop", "dt"]) == 2
    assert "column 'dt' cannot be dropped: it is a partition column" in capsys.readouterr().err
    assert main(["alter", table.url, "--rename", "a"]) == 2
    assert "expected OLD=NEW" in capsys.readouterr().err
    assert main(["alter", table.url, "--add", "x"]) == 2
    assert LakeTable.open(table.url).commit_log.head() == 0
