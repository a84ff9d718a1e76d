"""The `airflow-lake` CLI on real tables on disk: commits made through the transaction API, no Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.cli_format import fmt_bytes, render_table
from airflow_lake.lake import DataFile, LakeTable
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.maintenance import clean as clean_module

BUCKETED = {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"], "bucket": {"columns": ["id"], "count": 4}}
AIRFLOW_LAKE = Path(sys.executable).with_name("airflow-lake")


def commit(table: LakeTable, files: Sequence[tuple[str, int, int | None]], removed: Sequence[str] = (),
           action: str = "commit", write_files: bool = False) -> LogEntry:
    """Commit synthetic files given as (partition value of dt, rows, bucket); bytes are rows * 10.
    `write_files`: put each file in storage first (the manifest, then the bytes), as a store test needs."""
    txn = table.begin(action, "write")
    added = []
    for n, (dt, rows, bucket) in enumerate(files):
        suffix = "" if bucket is None else f"_{bucket:05d}"
        prefix = "" if dt == "" else f"dt={dt}/"
        added.append(DataFile(path=f"{prefix}part-{txn.instant}-t-{n:05d}{suffix}.parquet",
                              partition={} if dt == "" else {"dt": dt}, rows=rows, bytes=rows * 10,
                              bucket=bucket, instant=txn.instant, stats={}))
    if write_files:
        instants.write_manifest(table.storage, txn.instant, [f.path for f in added])
        for item in added:
            table.storage.write_bytes(item.path, b"PAR1")
    return txn.commit(added=added, removed=removed)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Call the CLI in-process; return (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def row(text: str, first: str) -> list[str]:
    """The whitespace-split words of the first line of `text` that starts with `first`."""
    for line in text.splitlines():
        if line.startswith(first):
            return line.split()
    raise AssertionError(f"no line starting with {first!r} in:\n{text}")


@pytest.fixture
def table(tmp_path: Path) -> LakeTable:
    """A bucketed, partitioned table with two commits: seq 1 adds dt=a, seq 2 adds dt=a and dt=b."""
    lake = LakeTable.create(str(tmp_path / "sales"), BUCKETED)
    commit(lake, [("a", 10, 1)])
    commit(lake, [("a", 15, 3), ("a", 10, 3), ("b", 7, 0)])
    return lake


# -- timeline ---------------------------------------------------------------------------------------
def test_timeline_text_shows_every_state(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    doomed = instants.request(table.storage, "commit", "write", {}, None,
        not_before=table.state().instant, finished=table.is_finished)
    instants.mark_inflight(table.storage, doomed, base_seq=2)
    rollback = table.rollback_unchecked([doomed], reason="x")
    assert rollback is not None
    requested = instants.request(table.storage, "replace", "cluster", {}, None,
        not_before=table.state().instant, finished=table.is_finished)
    inflight = instants.request(table.storage, "commit", "write", {}, None,
        not_before=table.state().instant, finished=table.is_finished)
    instants.mark_inflight(table.storage, inflight, base_seq=3)

    code, out, err = run(capsys, "timeline", table.url)

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["INSTANT", "ACTION", "OPERATION", "STATE", "SEQ"]
    ids = [line.split()[0] for line in lines[1:]]
    entries = [table.commit_log.read(seq).instant for seq in range(3)]
    assert ids == [*entries, doomed, rollback.instant, requested, inflight]
    assert row(out, entries[0])[1:5] == ["create", "create_table", "completed", "0"]
    assert row(out, entries[1])[1:5] == ["commit", "write", "completed", "1"]
    assert "files +1/-0, rows +10" in out
    assert "files +3/-0, rows +32" in out
    assert row(out, doomed)[1:5] == ["commit", "write", "rolled_back", "3"]
    assert row(out, rollback.instant)[1:5] == ["rollback", "rollback_pending", "completed", "3"]
    assert f"rolled back {doomed}" in out
    assert row(out, requested)[1:6] == ["replace", "cluster", "requested", "-", "-"]
    assert row(out, inflight)[1:6] == ["commit", "write", "inflight", "-", "-"]
    completed = time.strftime("%Y-%m-%d", time.gmtime(table.commit_log.read(1).completed_at))
    assert row(out, entries[1])[5] == completed


def test_timeline_json(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    pending = instants.request(table.storage, "commit", "write", {}, "req-1",
        not_before=table.state().instant, finished=table.is_finished)

    code, out, _ = run(capsys, "timeline", table.url, "--json")

    assert code == 0
    data = json.loads(out)
    assert data["table"] == table.url
    got = [(i["id"], i["action"], i["state"], i["seq"]) for i in data["instants"]]
    assert got == [(table.commit_log.read(0).instant, "create", "completed", 0),
                   (table.commit_log.read(1).instant, "commit", "completed", 1),
                   (table.commit_log.read(2).instant, "commit", "completed", 2),
                   (pending, "commit", "requested", None)]
    assert data["instants"][2]["metrics"]["rows_added"] == 32
    assert data["instants"][2]["metrics"]["files_added"] == 3
    assert data["instants"][3]["request_id"] == "req-1"


def test_timeline_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = LakeTable.create(str(tmp_path / "t"), {**BUCKETED, "properties": {"checkpoint.interval": "2"}})
    for n in range(5):
        commit(lake, [("a", n + 1, n % 4)])
    assert lake.storage.list_dir("_lake/checkpoints")  # the fold is checkpointed; the timeline still reads the log

    _, out, _ = run(capsys, "timeline", lake.url, "--limit", "2", "--json")
    assert [i["seq"] for i in json.loads(out)["instants"]] == [4, 5]
    _, out, _ = run(capsys, "timeline", lake.url, "--limit", "0", "--json")
    assert [i["seq"] for i in json.loads(out)["instants"]] == [0, 1, 2, 3, 4, 5]
    _, out, _ = run(capsys, "timeline", lake.url)  # default: the last 50
    assert len(out.splitlines()) == 1 + 6


# -- files ------------------------------------------------------------------------------------------
def test_files_text_per_partition_and_bucket(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "files", table.url)

    assert (code, err) == (0, "")
    assert f"snapshot 2 (instant {table.commit_log.read(2).instant}" in out
    assert row(out, "PARTITION") == ["PARTITION", "BUCKETS", "BUCKET", "FILES", "ROWS", "SIZE"]
    assert row(out, "dt=a") == ["dt=a", "4", "3", "35", "350", "B"]  # 4 buckets, 3 files
    assert row(out, "dt=b") == ["dt=b", "4", "1", "7", "70", "B"]
    lines = out.splitlines()
    under_a = lines[lines.index(next(x for x in lines if x.startswith("dt=a"))) + 1:][:2]
    assert [x.split() for x in under_a] == [["1", "1", "10", "100", "B"], ["3", "2", "25", "250", "B"]]
    under_b = lines[lines.index(next(x for x in lines if x.startswith("dt=b"))) + 1]
    assert under_b.split() == ["0", "1", "7", "70", "B"]
    assert row(out, "total") == ["total", "(2", "partition(s))", "4", "42", "420", "B"]


def test_files_json(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "files", table.url, "--json")

    assert code == 0
    data = json.loads(out)
    assert data["seq"] == 2
    assert data["bucket_count"] == 4
    assert data["files"] == [f.to_dict() for f in table.snapshot().files]
    assert data["totals"] == {"files": 4, "rows": 42, "bytes": 420, "partitions": 2}
    part_a, part_b = data["partitions"]
    assert (part_a["partition"], part_a["name"], part_a["files"], part_a["rows"]) == ({"dt": "a"}, "dt=a", 3, 35)
    assert part_a["buckets"] == [{"bucket": 1, "files": 1, "rows": 10, "bytes": 100},
                                 {"bucket": 3, "files": 2, "rows": 25, "bytes": 250}]
    assert part_b["buckets"] == [{"bucket": 0, "files": 1, "rows": 7, "bytes": 70}]
    assert (part_a["bucket_counts"], part_a["plain_files"]) == ([4], 0)


def test_files_shows_each_partitions_bucket_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = LakeTable.create(str(tmp_path / "t"), {**BUCKETED, "bucket": {
        "columns": ["id"], "count": 8, "from_partition": {"dt": "b"},
        "partition_counts": [{"partition": {"dt": "c"}, "count": 16}]}})
    txn = lake.begin("commit", "write")
    files = [DataFile(f"dt={dt}/part-{txn.instant}-t-{n:05d}{'' if b is None else f'_{b:05d}'}.parquet",
                      {"dt": dt}, 5, 50, bucket=b, instant=txn.instant,
                      bucketing=None if b is None else f"murmur3:{count}:id")
             for n, (dt, b, count) in enumerate([("a", None, 0), ("b", 7, 8), ("c", 15, 16), ("c", 1, 16)])]
    txn.commit(added=files)
    _, out, _ = run(capsys, "files", lake.url)
    assert row(out, "dt=a")[:3] == ["dt=a", "plain", "1"]
    assert row(out, "dt=b")[:3] == ["dt=b", "8", "1"]
    assert row(out, "dt=c")[:3] == ["dt=c", "16", "2"]
    _, out, _ = run(capsys, "files", lake.url, "--json")
    assert [p["bucket_counts"] for p in json.loads(out)["partitions"]] == [[], [8], [16]]


def test_files_as_of_seq_and_instant(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    first = table.commit_log.read(1)
    commit(table, [("b", 1, 2)], removed=[first.added[0].path])  # seq 3 replaces the file of seq 1

    for as_of in ("1", first.instant):
        _, out, _ = run(capsys, "files", table.url, "--as-of", as_of, "--json")
        data = json.loads(out)
        assert [f["path"] for f in data["files"]] == [first.added[0].path]
        assert data["totals"] == {"files": 1, "rows": 10, "bytes": 100, "partitions": 1}
    _, out, _ = run(capsys, "files", table.url)
    assert row(out, "dt=a") == ["dt=a", "4", "2", "25", "250", "B"]
    assert row(out, "dt=b") == ["dt=b", "4", "2", "8", "80", "B"]
    _, out, _ = run(capsys, "files", table.url, "--as-of", "0")
    assert out.splitlines()[-1] == "no live files"


def test_files_unpartitioned_unbucketed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = LakeTable.create(str(tmp_path / "plain"), {"schema": "id BIGINT, name STRING"})
    commit(lake, [("", 3000, None), ("", 500, None)])

    _, out, _ = run(capsys, "files", lake.url)
    assert row(out, "PARTITION") == ["PARTITION", "BUCKETS", "BUCKET", "FILES", "ROWS", "SIZE"]
    assert row(out, "(unpartitioned)") == ["(unpartitioned)", "plain", "2", "3,500", "34.2", "KiB"]
    _, out, _ = run(capsys, "files", lake.url, "--json")
    assert json.loads(out)["partitions"][0]["buckets"] == []


# -- show -------------------------------------------------------------------------------------------
def test_show_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = LakeTable.create(str(tmp_path / "orders"), {
        "schema": "id BIGINT NOT NULL, amount DOUBLE, v BIGINT, dt STRING", "partition_by": ["dt"],
        "bucket": {"columns": ["id"], "count": 8, "sort_columns": ["id"]}, "primary_key": ["id"],
        "version_column": "v", "merge_operators": {"amount": "sum"}, "properties": {"clean.retain.hours": "24"}})
    commit(lake, [("a", 10, 5), ("b", 20, 6)])
    pending = instants.request(lake.storage, "replace", "cluster", {}, None,
        not_before=lake.state().instant, finished=lake.is_finished)

    code, out, err = run(capsys, "show", lake.url)

    assert (code, err) == (0, "")
    assert row(out, "snapshot")[:4] == ["snapshot", "1", "(instant", lake.commit_log.read(1).instant + ","]
    assert row(out, "partition_by") == ["partition_by", "dt"]
    assert row(out, "bucket ") == ["bucket", "8", "buckets", "by", "id,", "sorted", "by", "id"]
    assert row(out, "primary_key") == ["primary_key", "id"]
    assert row(out, "version_column") == ["version_column", "v"]
    assert row(out, "merge_operators") == ["merge_operators", "amount=sum"]
    assert row(out, "files") == ["files", "2"]
    assert row(out, "rows") == ["rows", "30"]
    assert row(out, "size") == ["size", "300", "B", "(300", "bytes)"]
    assert row(out, "partitions") == ["partitions", "2"]
    assert row(out, "pending instants") == ["pending", "instants", "1", f"({pending})"]
    assert row(out, "id ") == ["id", "bigint", "no"]
    assert row(out, "amount") == ["amount", "double", "yes"]
    assert row(out, "clean.retain.hours") == ["clean.retain.hours", "24"]
    assert row(out, "checkpoint.interval") == ["checkpoint.interval", "100", "(default)"]


def test_show_json_as_of(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", table.url, "--as-of", "1", "--json")

    assert code == 0
    data = json.loads(out)
    assert (data["seq"], data["instant"]) == (1, table.commit_log.read(1).instant)
    assert data["spec"] == table.spec.to_dict()
    assert [(c["name"], c["type"]) for c in data["spec"]["columns"]] == [("id", "bigint"), ("dt", "string")]
    assert data["spec"]["bucket"]["count"] == 4
    assert data["totals"] == {"files": 1, "rows": 10, "bytes": 100, "partitions": 1}
    assert data["effective_properties"]["heartbeat.timeout.seconds"] == "120"
    assert (data["pending"], data["pending_count"]) == ([], 0)


# -- remove-orphan-files ----------------------------------------------------------------------------
def orphan(table: LakeTable, rel: str, age_hours: float) -> str:
    """A file no log entry holds, last modified `age_hours` ago."""
    path = Path(table.storage.path(rel))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * 2048)
    when = time.time() - age_hours * 3600
    os.utime(path, (when, when))
    return rel


def test_remove_orphan_files_dry_run_then_delete(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    old = orphan(table, "dt=a/part-20200101000000000-lost_00001.parquet", age_hours=200)
    new = orphan(table, "dt=b/copied.parquet", age_hours=1)
    live = table.snapshot().files

    code, out, err = run(capsys, "remove-orphan-files", table.url, "--dry-run")  # guard: clean.retain.hours, 168 h

    assert (code, err) == (0, "")
    assert out.splitlines() == [f"table {table.url}",
                                "dry run: would delete 1 orphan file(s) and 0 staging dir(s), 2.0 KiB "
                                "(untouched for 168 h)", "", old]
    assert Path(table.storage.path(old)).exists() and table.commit_log.head() == 2

    code, out, _ = run(capsys, "remove-orphan-files", table.url, "--json")

    assert code == 0
    data = json.loads(out)
    assert (data["table"], data["orphans"], data["staging"], data["deleted"], data["dry_run"]) == (
        table.url, [old], [], True, False)
    assert (data["files_deleted"], data["bytes_freed"], data["seq"]) == (1, 2048, 3)
    assert data["instant"] == table.commit_log.read(3).instant
    assert not Path(table.storage.path(old)).exists() and Path(table.storage.path(new)).exists()
    _, out, _ = run(capsys, "timeline", table.url)
    assert row(out, data["instant"])[1:5] == ["clean", "remove_orphan_files", "completed", "3"]
    assert "removed 1 orphan file(s), 0 staging dir(s), 2.0 KiB freed" in out

    _, out, _ = run(capsys, "remove-orphan-files", table.url, "--older-than-hours", "0.5", "--dry-run", "--json")
    assert json.loads(out)["orphans"] == [new]
    code, out, _ = run(capsys, "remove-orphan-files", table.url, "--older-than-hours", "0.5", "--force")
    assert code == 0 and row(out, "deleted")[:3] == ["deleted", "1", "orphan"]
    assert f"recorded as instant {table.commit_log.read(4).instant}, seq 4" in out
    _, out, _ = run(capsys, "remove-orphan-files", table.url)
    assert out.splitlines() == [f"table {table.url}", "no orphans untouched for 168 h"]
    assert table.commit_log.head() == 4
    assert table.snapshot().files == live


def test_remove_orphan_files_usage_errors(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    for hours in ("-1", "soon", "nan"):
        assert main(["remove-orphan-files", table.url, "--older-than-hours", hours]) == 2
        assert "--older-than-hours" in capsys.readouterr().err
    assert table.commit_log.head() == 2


def test_vacuum_still_works_warns_and_its_old_entries_still_read(table: LakeTable,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`vacuum` is the deprecated name of `remove-orphan-files` (issue 21): it does the same, says so on stderr,
    and an entry an older release recorded as operation `vacuum` shows in the timeline and on the Lake page."""
    old_entry = table.append_entry("clean", "vacuum", request_id="old-1",  # as releases before issue 21 wrote it
                                   metadata={"orphans": ["dt=a/x.parquet"], "staging": []},
                                   metrics_of=lambda: {"orphans_found": 1, "files_deleted": 1, "bytes_freed": 10})
    assert old_entry is not None
    debris = orphan(table, "dt=a/part-20200101000000000-lost_00001.parquet", age_hours=200)

    code, out, err = run(capsys, "vacuum", table.url, "--json")

    assert code == 0 and not Path(table.storage.path(debris)).exists()
    assert err == "airflow-lake: `airflow-lake vacuum` is deprecated; use `airflow-lake remove-orphan-files` " \
                  "(same arguments).\n"
    new_entry = table.commit_log.read(json.loads(out)["seq"])
    assert (new_entry.action, new_entry.operation) == ("clean", "remove_orphan_files")
    _, out, _ = run(capsys, "timeline", table.url)
    assert row(out, old_entry.instant)[1:5] == ["clean", "vacuum", "completed", "3"]
    assert row(out, new_entry.instant)[1:5] == ["clean", "remove_orphan_files", "completed", "4"]
    assert out.count("removed 1 orphan file(s)") == 2

    from airflow_lake.ui.data import table_detail
    from airflow_lake.ui.pages import table_page
    from airflow_lake.ui.roots import resolve

    page = table_page(table_detail(resolve(f"0/{Path(table.url).name}", [str(Path(table.url).parent)])), [])
    assert "<td>vacuum</td>" in page and "<td>remove_orphan_files</td>" in page


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["timeline", "files", "show", "remove-orphan-files"])
def test_missing_table(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, err = run(capsys, command, str(tmp_path / "nothing"))

    assert (code, out) == (2, "")
    assert err.startswith("airflow-lake: no lake table at ")
    assert "Traceback" not in err


def test_bad_as_of(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    rolled = instants.request(table.storage, "commit", "write", {}, None,
        not_before=table.state().instant, finished=table.is_finished)
    table.rollback_unchecked([rolled], reason="x")
    for as_of, message in [("99", "snapshot 99 does not exist"), ("yesterday", "is neither a sequence number"),
                           ("\u00b2", "as_of: '\u00b2' is neither"), ("\u0663", "is neither a sequence number"),
                           (rolled, f"instant {rolled} is not completed")]:
        code, out, err = run(capsys, "files", table.url, "--as-of", as_of)
        assert (code, out) == (2, "")
        assert err.startswith("airflow-lake: ") and message in err, err


def test_as_of_before_clean(table: LakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    old = table.commit_log.read(1).added[0].path
    commit(table, [("a", 1, 1)], removed=[old])
    entry = clean_module.clean(table, 0, now=time.time() + 60, force=True)
    assert entry is not None and entry.metadata["deleted"] == [old]

    code, _, err = run(capsys, "show", table.url, "--as-of", "2")
    assert code == 2
    assert "older than the retention" in err
    _, out, _ = run(capsys, "timeline", table.url)
    assert row(out, entry.instant)[1:5] == ["clean", "clean", "completed", "4"]
    assert "deleted 1 file(s)" in out


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["timeline", "x", "--limit", "-1"]) == 2
    assert "--limit" in capsys.readouterr().err
    for limit in ("\u00b2", "\u0663", "3.0"):  # '²'.isdigit() and int('٣') hold: only ASCII digits count
        assert main(["timeline", "x", "--limit", limit]) == 2
        assert "--limit" in capsys.readouterr().err


# -- formatting helpers -----------------------------------------------------------------------------
def test_render_table_aligns() -> None:
    text = render_table(["A", "NUM"], [["long value", "1"], ["x", "1234"]], right={1})
    assert text.splitlines() == ["A            NUM", "long value     1", "x           1234"]
    assert [fmt_bytes(n) for n in (0, 1023, 1024, 5 * 1024**3)] == ["0 B", "1023 B", "1.0 KiB", "5.0 GiB"]


# -- the installed console script -------------------------------------------------------------------
def test_console_script(table: LakeTable, tmp_path: Path) -> None:
    ok = subprocess.run([str(AIRFLOW_LAKE), "files", table.url, "--json"], capture_output=True, text=True,
                        timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr
    data: dict[str, Any] = json.loads(ok.stdout)
    assert data["totals"]["rows"] == 42

    text = subprocess.run([str(AIRFLOW_LAKE), "timeline", table.url], capture_output=True, text=True,
                          timeout=120, check=False)
    assert text.returncode == 0
    assert table.commit_log.read(2).instant in text.stdout

    bad = subprocess.run([str(AIRFLOW_LAKE), "show", str(tmp_path / "none")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.startswith("airflow-lake: no lake table") and "Traceback" not in bad.stderr


def test_cli_imports_neither_spark_nor_airflow() -> None:
    code = ("import sys, airflow_lake.cli; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow', 'py4j')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_plans_lists_pending_clustering_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_lake.jobs.runner import run as run_operation

    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    code, out, _ = run(capsys, "plans", table.url)
    assert code == 0 and "0 commit(s) since the last clustering (none yet)" in out
    assert "no pending clustering plans" in out
    for _ in range(4):
        commit(table, [("a", 10, None), ("b", 10, None)])
    plan = run_operation(None, "schedule_clustering", {"table": table.url, "layout": "LINEAR",
                                                       "sort_columns": ["id"]})
    code, out, _ = run(capsys, "plans", table.url)
    assert code == 0
    header, row = out.splitlines()[1:3]
    assert header.split()[:3] == ["PLAN", "REQUESTED", "(UTC)"]
    assert row.split()[0] == plan["plan_id"] and "LINEAR(id)" in row
    assert row.split()[3:6] == ["2", "2", "8"]  # groups, partitions, input files
    code, out, _ = run(capsys, "plans", table.url, "--json")
    data = json.loads(out)
    assert data["commits_since_last_clustering"] == 4 and data["last_clustering"] is None
    (item,) = data["plans"]
    assert item["id"] == plan["plan_id"] and item["input_files"] == 8 and item["attempts"] == []
    assert sorted(g["partition"]["dt"] for g in item["groups_detail"]) == ["a", "b"]
    assert [(p["name"], p["groups"], p["files"], p["rows"]) for p in item["partitions_detail"]] == [
        ("dt=a", 1, 4, 40), ("dt=b", 1, 4, 40)]


def test_plans_text_lists_each_plans_partitions_and_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    from airflow_lake.jobs.runner import run as run_operation

    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    for _ in range(4):
        commit(table, [("a", 10, None), ("b", 5, None), ("c", 1, None)])
    plan = run_operation(None, "schedule_clustering", {"table": table.url, "partitions": [{"dt": "a"}, {"dt": "c"}]})
    code, out, _ = run(capsys, "plans", table.url)
    assert code == 0
    lines = out.splitlines()
    at = lines.index(f"plan {plan['plan_id']}: partitions")
    assert [line.split() for line in lines[at + 1:at + 4]] == [
        ["PARTITION", "GROUPS", "FILES", "INPUT", "ROWS", "OUTPUT", "FILES"],
        ["dt=a", "1", "4", "400", "B", "40", "1"], ["dt=c", "1", "4", "40", "B", "4", "1"]]
    at = lines.index(f"plan {plan['plan_id']}: groups")
    assert sorted(line.split()[1] for line in lines[at + 2:at + 4]) == ["dt=a", "dt=c"]
    assert "dt=b" not in out


def test_show_lists_null_values_of_a_primary_key_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = LakeTable.create(str(tmp_path / "users"), {
        "schema": "k BIGINT NOT NULL, name STRING", "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 4},
        "merge_operators": {"name": "last_non_null"}, "null_values": {"name": ["null", "N/A"]}})
    _, out, _ = run(capsys, "show", lake.url)
    assert row(out, "merge_operators") == ["merge_operators", "name=last_non_null"]
    assert row(out, "null_values") == ["null_values", 'name=["null","N/A"]']
