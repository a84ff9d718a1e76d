"""`airflow-lake restore PATH --to SEQ|INSTANT|TIMESTAMP [--dry-run]` and `remove-orphan-files --force` (metadata
only, no Spark)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from airflow_lake.cli import main
from airflow_lake.lake.maintenance.restore import iso
from tests.lake.lake_core_helpers import append, live_paths, make_table


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_restore_dry_run_then_restore_by_seq_instant_and_time(table_path: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(table_path)
    good, (f1,) = append(table, "a", disk=True)
    time.sleep(0.02)
    bad, (b1, b2) = append(table, "b", files=2, disk=True)

    code, out, err = cli(capsys, "restore", table_path, "--to", "1", "--dry-run")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"table {table.url}: restore to seq 1 (instant {good.instant}, completed ")
    assert lines[1] == "dry run: would commit 2 file(s) removed, 0 re-added"
    assert sorted(lines[2:]) == [f"remove  {b1.path}", f"remove  {b2.path}"]
    assert table.commit_log.head() == 2

    code, out, _ = cli(capsys, "restore", table_path, "--to", good.instant, "--json")  # an instant id
    data = json.loads(out)
    assert code == 0 and (data["committed"], data["seq"], data["restored_to_seq"]) == (True, 3, 1)
    assert sorted(data["removed"]) == sorted([b1.path, b2.path]) and live_paths(table) == {f1.path}

    code, out, _ = cli(capsys, "restore", table_path, "--to", iso(bad.completed_at + 0.001))  # a time: seq 2
    assert code == 0 and out.splitlines()[1] == "restored as log entry 4 (instant " + \
        table.commit_log.read(4).instant + "): 0 file(s) removed, 2 re-added"
    assert live_paths(table) == {f1.path, b1.path, b2.path}
    code, out, _ = cli(capsys, "restore", table_path, "--to", f"{time.time() + 5:.3f}")  # UNIX seconds: the latest
    assert code == 0 and out.splitlines()[-1] == "nothing to do: the latest snapshot already equals it"
    code, out, _ = cli(capsys, "timeline", table_path)
    assert code == 0 and sum(line.split()[1:3] == ["restore", "restore"] for line in out.splitlines()[1:]) == 2


@pytest.mark.parametrize(("to", "message"), [
    ("9", "snapshot 9 does not exist"),
    ("1767225600", "give it as to_timestamp or with a decimal point"),  # all digits: a seq, with a hint
    ("20200101000000000", "is not a completed instant"),
    ("last tuesday", "--to: 'last tuesday' is not a point in time"),
    ("1999-01-01", "is before the table was created"),
])
def test_restore_errors_exit_2_and_change_nothing(table_path: str, capsys: pytest.CaptureFixture[str], to: str,
                                                 message: str) -> None:
    table = make_table(table_path)
    append(table, "a", disk=True)
    code, out, err = cli(capsys, "restore", table_path, "--to", to)
    assert (code, out) == (2, "") and err.startswith("airflow-lake: ") and message in err, err
    assert table.commit_log.head() == 1
    assert cli(capsys, "restore", table_path)[0] == 2  # --to is required


def test_remove_orphan_files_below_the_table_retention_needs_force(table_path: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(table_path)
    debris = Path(table.storage.path("dt=a/debris.parquet"))
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"x")
    os.utime(debris, (time.time() - 7200, time.time() - 7200))
    code, out, _ = cli(capsys, "remove-orphan-files", table_path, "--older-than-hours", "1", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["orphans"] == ["dt=a/debris.parquet"]  # a dry run deletes nothing: allowed
    code, out, err = cli(capsys, "remove-orphan-files", table_path, "--older-than-hours", "1")
    assert (code, out) == (2, "") and debris.exists()
    assert "older_than_hours: 1 h is shorter than the table's retention (clean.retain.hours = 168 h)" in err
    assert "--force" in err and "alter_table" in err
    code, out, _ = cli(capsys, "remove-orphan-files", table_path, "--older-than-hours", "1", "--force", "--json")
    data = json.loads(out)
    assert code == 0 and data["deleted"] is True and not debris.exists()
    assert table.commit_log.read(data["seq"]).metadata["forced"] is True
