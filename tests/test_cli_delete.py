"""`airflow-lake delete` as a user runs it (the installed command, its own local Spark): a dry run lists the files
it would rewrite and changes nothing; the delete commits; bad input exits 2 before Spark starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from tests.support import table_ids, write_source

AIRFLOW_LAKE = str(Path(sys.executable).with_name("airflow-lake"))


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AIRFLOW_LAKE, *argv], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_delete_from_the_command_line(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "users"), {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    for i in range(3):  # three files with disjoint ids
        run(spark, "write", {"table": table.url, "source": {"path": write_source(
            tmp_path / f"{i}.parquet", list(range(i * 10, i * 10 + 10)), "d1")}})
    head = table.commit_log.head()
    dry = cli("delete", table.url, "--filter", "id", "in", "[4, 5]", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True and plan["rows_deleted"] == 2 and plan["files_scanned"] == 1
    assert [f["rows_deleted"] for f in plan["rewrite"]] == [2] and plan["drop"] == []
    text = cli("delete", table.url, "--where", "id >= 20", "--dry-run")
    assert text.returncode == 0 and "drop" in text.stdout and "dry run" in text.stdout
    assert table.commit_log.head() == head  # dry runs change nothing

    done = cli("delete", table.url, "--where", "id = 4 OR id = 5")
    assert done.returncode == 0, done.stderr
    assert "deleted 2 row(s)" in done.stdout and "1 file(s) rewritten" in done.stdout
    assert table_ids(spark, table.url) == [i for i in range(30) if i not in (4, 5)]


def test_bad_delete_arguments_exit_2_before_spark_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT"})
    assert main(["delete", table.url]) == 2
    assert "exactly one of --where and --filter" in capsys.readouterr().err
    assert main(["delete", table.url, "--where", "id = 1", "--filter", "id", "=", "1"]) == 2
    assert main(["delete", str(tmp_path / "none"), "--where", "id = 1"]) == 2
    assert "no lake table" in capsys.readouterr().err
