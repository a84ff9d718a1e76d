"""`airflow-lake changes PATH --from N [--to M] [--limit K] [--json]` on a real table without Spark (Parquet files
written with pyarrow, commits through the transaction API): counts per data commit, the changed rows, data-free
commits apart, bounds as seqs, instant ids and times, and errors with exit code 2."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.lake import LakeTable
from tests.lake.publish.arrow_commits import commit, make_table, write_file

COUNTS = ("inserted", "deleted", "updated")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> Any:
    got, out, err = cli(capsys, *argv, "--json")
    assert got == code, err
    return json.loads(out)


@pytest.fixture
def table(tmp_path: Path) -> LakeTable:
    """seq 1 appends ids 1-3 to dt=a; 2 deletes id 2 copy-on-write (1 and 3 carried over); 3 adds a column (data
    free); 4 appends id 4 to dt=b; 5 clusters dt=a (its rows into a new file: data free)."""
    lake = make_table(str(tmp_path / "t"))
    first = commit(lake, [1, 2, 3], "a")
    commit(lake, [1, 3], "a", removed=[first.added[0].path])
    lake.alter_table([{"add": "note", "type": "string"}])
    commit(lake, [4], "b")
    txn = lake.begin("replace", "execute_clustering")
    old = [f.path for f in lake.snapshot().files if f.partition == {"dt": "a"}]
    txn.commit(added=[write_file(lake, txn.instant, [3, 1], "a")], removed=old)
    return lake


def test_counts_per_data_commit_then_the_rows(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "changes", table.url, "--from", "0")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"table {table.url}: changes after seq 0 up to seq 5"
    assert lines[1].split() == ["SEQ", "COMPLETED", "(UTC)", "OPERATION", "INSERTED", "DELETED", "UPDATED"]
    assert [line.split()[:1] + line.split()[3:] for line in lines[2:5]] == [
        ["1", "write", "3", "0", "0"], ["2", "delete", "0", "1", "0"], ["4", "write", "1", "0", "0"]]
    assert lines[5] == "data-free (no row changed, no file read): seq 3, 5"
    assert lines[6] == "rows: 5 of 5 changed row(s)"
    assert lines[7].split() == ["id", "v", "dt", "note", "_change_type", "_commit_seq"]
    assert sorted(line.split() for line in lines[8:]) == sorted([
        ["1", "v1", "a", "NULL", "insert", "1"], ["2", "v2", "a", "NULL", "insert", "1"],
        ["3", "v3", "a", "NULL", "insert", "1"], ["2", "v2", "a", "NULL", "delete", "2"],
        ["4", "v4", "b", "NULL", "insert", "4"]])

    code, out, _ = cli(capsys, "changes", table.url, "--from", "0", "--limit", "2")
    assert code == 0 and "rows: 2 of 5 changed row(s) (--limit 0 shows all)" in out
    assert len(out.splitlines()) == 8 + 2
    code, out, _ = cli(capsys, "changes", table.url, "--from", "4", "--to", "5")
    assert code == 0 and out.splitlines()[1:] == ["no data-changing commit in the window",
                                                  "data-free (no row changed, no file read): seq 5",
                                                  "no rows changed"]


def test_json_holds_the_window_the_counts_and_the_rows(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    data = as_json(capsys, "changes", table.url, "--from", "1", "--to", "3")
    assert data["window"] == {"start": 1, "end": 3, "from_empty": False, "data_commits": [2], "skipped": [3]}
    entry = table.commit_log.read(2)
    assert data["commits"] == [{"seq": 2, "completed_at": entry.completed_at, "operation": "delete",
                                "initial": False, "inserted": 0, "deleted": 1, "updated": 0}]
    assert data["totals"] == {"inserted": 0, "deleted": 1, "updated": 0} and data["rows_total"] == 1
    (row,) = data["rows"]
    when = dt.datetime.fromisoformat(row.pop("_commit_time"))
    assert when.timestamp() == pytest.approx(entry.completed_at, abs=1e-6) and when.utcoffset() == dt.timedelta(0)
    assert row == {"id": 2, "v": "v2", "dt": "a", "note": None, "_change_type": "delete", "_commit_seq": 2}
    assert data["columns"] == ["id", "v", "dt", "note", "_change_type", "_commit_seq", "_commit_time"]
    assert len(as_json(capsys, "changes", table.url, "--from", "0", "--limit", "0")["rows"]) == 5


def test_bounds_are_seqs_instant_ids_or_times(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = table.commit_log.read(1), table.commit_log.read(2)
    later = first.completed_at + 1e-5  # (a time as text holds microseconds: rounded down, it would be before seq 1)
    assert later < second.completed_at
    iso = dt.datetime.fromtimestamp(later, tz=dt.UTC).isoformat()  # the last snapshot at or before it: seq 1
    for start in (iso, iso.replace("+00:00", ""), first.instant, f"{later:.6f}"):
        data = as_json(capsys, "changes", table.url, "--from", start, "--to", second.instant)
        assert (data["window"]["start"], data["window"]["end"]) == (1, 2), start
        assert [c["seq"] for c in data["commits"]] == [2]
    whole = as_json(capsys, "changes", table.url, "--from", "-1")  # the latest snapshot, every row an insert
    assert whole["window"]["from_empty"] and whole["commits"] == [
        {"seq": 5, "completed_at": table.commit_log.read(5).completed_at, "operation": None, "initial": True,
         "inserted": 3, "deleted": 0, "updated": 0}]
    assert sorted(r["id"] for r in whole["rows"]) == [1, 3, 4]
    code, out, _ = cli(capsys, "changes", table.url, "--from", "-1", "--to", "1")
    assert code == 0 and "changes after the empty table (the whole snapshot as inserts) up to seq 1" in out
    assert out.splitlines()[2].split()[3:] == ["(snapshot)", "3", "0", "0"]


def test_errors_exit_2_with_the_message(table: LakeTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "changes", str(tmp_path / "none"), "--from", "0")
    assert (code, out) == (2, "") and err.startswith("airflow-lake: no lake table at ")
    code, _, err = cli(capsys, "changes", table.url, "--from", "4", "--to", "2")
    assert code == 2 and "start 4 > end 2" in err
    code, _, err = cli(capsys, "changes", table.url, "--from", "0", "--to", "9")
    assert code == 2 and "snapshot 9 does not exist" in err
    code, _, err = cli(capsys, "changes", table.url, "--from", "last tuesday")
    assert code == 2 and "'last tuesday' is neither a snapshot nor a point in time" in err
    code, _, err = cli(capsys, "changes", table.url)
    assert code == 2 and "--from" in err  # required
    assert "--limit" in as_json(capsys, "changes", table.url, "--from", "0", "--limit", "-3", code=2)["error"]

    assert main(["clean", table.url, "--retain-hours", "0", "--force"]) == 0  # deletes what seqs 2 and 5 removed
    capsys.readouterr()
    gone = as_json(capsys, "changes", table.url, "--from", "1", code=2)
    assert "are no longer available" in gone["error"] and "The oldest snapshot changes can start from is seq 5" \
        in gone["error"] and gone["exit_code"] == 2
    assert as_json(capsys, "changes", table.url, "--from", "5")["commits"] == []  # from there on it works
