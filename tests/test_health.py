"""Table health (`airflow_lake.health`) as `airflow-lake ls` and the Lake page meet it: each check fires just over
its threshold and not at it, thresholds come from the table's `health.*` properties, and "commits since clustering"
is judged only on tables that have clustering (the issue: it showed on tables never clustered). Metadata only:
tables with synthetic commits, no Spark."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.health import THRESHOLDS, table_health, thresholds
from airflow_lake.jobs import run
from airflow_lake.lake import DataFile, LakeTable
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format import instants
from airflow_lake.reports import summary_data
from tests.lake.lake_core_helpers import FAST, backdate


def commit(table: LakeTable, files: Sequence[tuple[str, int, int, int | None]]) -> None:
    """Commit synthetic files given as (dt, rows, bytes, bucket), bucketed ones under the table's bucketing."""
    txn = table.begin("commit", "write")
    added = []
    for n, (dt, rows, size, bucket) in enumerate(files):
        suffix = "" if bucket is None else f"_{bucket:05d}"
        added.append(DataFile(f"dt={dt}/part-{txn.instant}-h-{n:05d}{suffix}.parquet", {"dt": dt}, rows, size,
                              bucket=bucket, instant=txn.instant))
    txn.commit(added=added)


def checks(table: LakeTable) -> dict[str, dict[str, Any]]:
    """The table's warnings by check, as `airflow-lake ls --json` reports them."""
    return {w["check"]: w for w in table_health(table, summary_data(table))}


def set_property(table: LakeTable, key: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alter", table.url, "--set", f"{key}={value}", "--json"]) == 0
    capsys.readouterr()


def test_thresholds_are_table_properties_with_defaults(tmp_path: Path) -> None:
    assert THRESHOLDS == {"small_file_bytes": 128 * 1024 * 1024, "small_file_share": 0.5, "bucket_skew": 5.0,
                          "bucket_skew_min_rows": 10_000, "pending_age_seconds": 3600.0,
                          "commits_since_clustering": 8}
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                                   "properties": {"health.bucket_skew": "2.5"}})
    assert thresholds(table.spec) == {**THRESHOLDS, "bucket_skew": 2.5}
    for key, value in (("health.small_file_share", "0"), ("health.bucket_skew", "nan"),
                       ("health.small_file_bytes", "1.5"), ("health.nonsense", "1")):
        with pytest.raises(LakeSpecError) as err:
            LakeTable.create(str(tmp_path / "bad"), {"schema": "id BIGINT", "properties": {key: value}})
        assert err.value.field == f"properties.{key}"


def test_small_file_share_fires_over_its_threshold_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                                   "properties": {"health.small_file_bytes": "1000"}})
    # dt=a: two small files beside two big ones; dt=b: one small file alone (nothing could merge it: not counted)
    commit(table, [("a", 10, 100, None), ("a", 10, 999, None), ("a", 10, 1000, None), ("a", 10, 5000, None),
                   ("b", 1, 10, None)])
    assert "small_files" not in checks(table)  # 2 of 5 = 40%, threshold 50%

    commit(table, [("a", 10, 200, None)])  # 3 of 6 = 50%: at the threshold, not over it
    assert "small_files" not in checks(table)

    commit(table, [("b", 1, 10, None)])  # dt=b's two small files can now be merged: 5 of 7
    warning = checks(table)["small_files"]
    assert (warning["value"], warning["threshold"]) == (round(5 / 7, 4), 0.5)
    assert "71% of live files (5 of 7) are under 1000 B" in warning["message"] and "clustering" in warning["message"]

    set_property(table, "health.small_file_share", "0.75", capsys)
    assert "small_files" not in checks(table)


def test_bucket_skew_names_the_worst_bucket_over_the_threshold(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                                   "bucket": {"columns": ["id"], "count": 4},
                                                   "properties": {"health.bucket_skew_min_rows": "100"}})
    # dt=a: bucket 2 holds 40 of 100 rows, 1.6x the mean of 25; dt=b: bucket 0 holds 60 of 100 (2.4x), one
    # bucket empty (no file); dt=c: 90 of 99 rows, but under the 100-row minimum: too small to judge
    commit(table, [("a", 20, 10, 0), ("a", 20, 10, 1), ("a", 40, 10, 2), ("a", 20, 10, 3),
                   ("b", 60, 10, 0), ("b", 20, 10, 1), ("b", 20, 10, 3), ("c", 90, 10, 0), ("c", 9, 10, 1)])
    assert "bucket_skew" not in checks(table)  # default threshold 5x

    set_property(table, "health.bucket_skew", "2.4", capsys)  # dt=b is exactly at it
    assert "bucket_skew" not in checks(table)

    set_property(table, "health.bucket_skew", "2.3", capsys)
    warning = checks(table)["bucket_skew"]
    assert (warning["value"], warning["threshold"], warning["where"]) == (2.4, 2.3, "dt=b bucket 0")
    assert "bucket 0 of dt=b holds 60 of its 100 rows: 2.4x the mean of its 4 buckets" in warning["message"]

    set_property(table, "health.bucket_skew_min_rows", "99", capsys)  # now dt=c counts: 90 / 24.75 = 3.6x
    assert checks(table)["bucket_skew"]["where"] == "dt=c bucket 0"


def test_pending_instants_older_than_the_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                                   "properties": dict(FAST)})
    commit(table, [("a", 1, 10, None)])
    writer = table.begin("commit", "write")  # alive: its heartbeat beats
    assert "pending_instants" not in checks(table)
    writer._heartbeat.stop()
    backdate(table, writer.instant, 3599)  # its last sign of life, 3599 s ago
    assert "pending_instants" not in checks(table)
    backdate(table, writer.instant, 2 * 3600)
    warning = checks(table)["pending_instants"]
    assert warning["where"] == writer.instant and warning["threshold"] == 3600
    assert 7190 < warning["value"] < 7300
    assert f"instant {writer.instant} (commit write, inflight) has shown no sign of life for 2.0 h" \
        in warning["message"]

    set_property(table, "health.pending_age_seconds", "86400", capsys)
    assert "pending_instants" not in checks(table)
    writer.abort()


def test_a_plan_waiting_for_an_executor(tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    for _ in range(4):
        commit(table, [("a", 10, 100, None), ("a", 10, 100, None)])
    plan = run(None, "schedule_clustering", {"table": table.url})["plan_id"]
    assert "pending_instants" not in checks(table)
    requested = Path(table.storage.path(instants.requested_file(plan)))
    raw = json.loads(requested.read_text())
    raw["requested_at"] = time.time() - 3 * 3600  # scheduled three hours ago
    requested.write_text(json.dumps(raw))
    warning = checks(table)["pending_instants"]
    assert warning["where"] == plan and f"clustering plan {plan} has waited 3.0 h for an executor" \
        in warning["message"]


def test_commits_since_clustering_only_for_tables_with_clustering(tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    for _ in range(12):
        commit(table, [("a", 10, 100, None)])
    summary = summary_data(table)
    assert summary["clustering"] == {"clustered": False, "applies": False, "pending_plans": 0,
                                     "last_clustering": None, "last_clustering_seq": None,
                                     "last_clustering_at": None, "commits_since": None}
    assert "commits_since_clustering" not in checks(table)  # 12 commits, but the table was never clustered

    plan = run(None, "schedule_clustering", {"table": table.url})["plan_id"]  # now it has clustering
    warning = checks(table)["commits_since_clustering"]
    assert (warning["value"], warning["threshold"]) == (12, 8)
    assert "12 commits since the table's start (never clustered)" in warning["message"]

    table.rollback_pending([plan])  # the plan dropped: no clustering again
    assert "commits_since_clustering" not in checks(table)


def test_ls_of_a_healthy_and_an_unhealthy_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fine = LakeTable.create(str(tmp_path / "lake" / "fine"), {"schema": "id BIGINT, dt STRING",
                                                              "partition_by": ["dt"]})
    commit(fine, [("a", 10, 200 * 1024 * 1024, None)])
    busy = LakeTable.create(str(tmp_path / "lake" / "busy"), {"schema": "id BIGINT, dt STRING",
                                                              "partition_by": ["dt"]})
    commit(busy, [("a", 10, 100, None)] * 3)

    code, out, err = main(["ls", str(tmp_path / "lake")]), *capsys.readouterr()
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["TABLE", "KIND", "ROWS"]
    assert lines[2].split()[0] == "busy" and lines[2].endswith("small_files 1 > 0.5")
    assert lines[3].split()[0] == "fine" and lines[3].endswith("ok")
    assert "busy: 100% of live files (3 of 3) are under 128.0 MiB" in out
    code, out, _ = main(["ls", str(tmp_path / "lake"), "--json"]), *capsys.readouterr()
    data = json.loads(out)
    assert [(t["path"], [w["check"] for w in t["health"]]) for t in data["tables"]] == [
        ("busy", ["small_files"]), ("fine", [])]
    assert data["tables"][0]["last_commit"]["airflow"] is None  # committed outside Airflow: no task


def test_ls_names_the_airflow_task_of_the_last_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_lake.lake.format.commit_info import recorded_with

    table = LakeTable.create(str(tmp_path / "lake" / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    task = {"dag_id": "daily", "run_id": "scheduled__2024-03-01", "task_id": "load", "map_index": -1,
            "try_number": 2}
    with recorded_with({"airflow": task}):  # as the job runner records the task instance of an operator
        commit(table, [("a", 10, 100, None)])
    assert main(["ls", str(tmp_path / "lake"), "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["tables"]
    assert item["last_commit"]["airflow"] == task and item["last_commit"]["seq"] == 1


def test_a_compacted_buckets_tombstone_file_is_not_a_small_file_beside_its_data(tmp_path: Path) -> None:
    """Compaction writes a bucket's tombstones into a file of their own beside its file of rows with data
    (`lake/upsert/compact.py`): one file split in two, which compaction would not merge again; a delta beside them
    is a small file to compact."""
    from airflow_lake.lake.format.data_files import ColumnStats

    table = LakeTable.create(str(tmp_path / "pk"), {"schema": "k BIGINT NOT NULL, a STRING", "primary_key": ["k"],
                                                    "bucket": {"columns": ["k"], "count": 2}})

    def files(instant: str, kinds: Sequence[str]) -> list[DataFile]:
        return [DataFile(f"data/{instant}-{kind}-b2/part-00000-{kind}_{bucket:05d}.c000.snappy.parquet", {}, 3, 900,
                         bucket=bucket, instant=instant, bucketing="murmur3:2:k",
                         stats={"__lake_v": ColumnStats(None, None, 3) if kind == "tomb" else ColumnStats(1, 4, 0)})
                for bucket in (0, 1) for kind in kinds]

    txn = table.begin("replace", "compact_upserts")
    txn.commit(added=files(txn.instant, ["data", "tomb"]))
    assert "small_files" not in checks(table)
    txn = table.begin("commit", "write")
    txn.commit(added=files(txn.instant, ["delta"]))
    assert checks(table)["small_files"]["value"] == round(4 / 6, 4)  # each bucket: its data and a delta, of 6 files
