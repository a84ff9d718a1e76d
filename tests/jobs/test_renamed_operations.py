"""Operations renamed in issue 21 (docs/api.md, "Names"): the job runner still runs a spec under an old name, says
in the job's log that the name is deprecated, and its log entry records the new name."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.registry import operations
from airflow_lake.lake import LakeTable
from tests.lake.lake_core_helpers import backdate, make_table

DEPRECATED = "is deprecated: it is called {new!r} now and runs as that"


def _orphan(table: LakeTable) -> tuple[dict[str, Any], dict[str, Any]]:
    """An orphan two hours old: (the spec that removes it, what the metrics then say)."""
    debris = Path(table.storage.path("dt=a/part-20200101000000000-x.parquet"))
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"debris")
    os.utime(debris, (time.time() - 7200, time.time() - 7200))
    return ({"older_than_hours": 1, "force": True},
            {"files_deleted": 1, "paths": ["dt=a/part-20200101000000000-x.parquet"]})


def _dead_writer(table: LakeTable) -> tuple[dict[str, Any], dict[str, Any]]:
    """A writer whose heartbeat stopped: (the spec that rolls it back, what the metrics then say)."""
    dead = table.begin("commit", "write")
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)
    return {"instants": [dead.instant]}, {"rolled_back": [dead.instant]}


@pytest.mark.parametrize(("old", "new", "given"), [
    ("vacuum", "remove_orphan_files", _orphan),
    ("rollback", "rollback_pending", _dead_writer),
])
def test_an_old_operation_name_still_runs_warns_and_records_the_new_name(
        table_path: str, caplog: pytest.LogCaptureFixture, old: str, new: str, given: Any) -> None:
    table = make_table(table_path)
    spec, expected = given(table)

    with caplog.at_level(logging.WARNING, logger="airflow_lake.jobs.registry"):
        metrics = run(None, old, {"table": table_path, **spec, "request_id": "dag/t/run/-1"})

    assert f"operation {old!r} " + DEPRECATED.format(new=new) in caplog.text
    assert metrics["operation"] == new and {k: metrics[k] for k in expected} == expected
    entry = table.commit_log.read(metrics["seq"])
    assert (entry.operation, entry.request_id) == (new, "dag/t/run/-1")
    assert old not in operations() and new in operations()  # listed (in errors, --help) under the new name only


def test_the_old_compact_name_still_compacts_upserts(spark: Any, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    path = str(tmp_path / "keyed")
    LakeTable.create(path, {"schema": "k BIGINT NOT NULL, v BIGINT", "primary_key": ["k"],
                            "bucket": {"columns": ["k"], "count": 1}})
    for version in (1, 2):
        source = tmp_path / f"v{version}.parquet"
        pq.write_table(pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array([version] * 2, pa.int64())}),
                       source)
        run(spark, "versioned_upsert", {"table": path, "version": version, "source": {"path": str(source)}})

    with caplog.at_level(logging.WARNING, logger="airflow_lake.jobs.registry"):
        metrics = run(spark, "compact", {"table": path})

    assert "operation 'compact' " + DEPRECATED.format(new="compact_upserts") in caplog.text
    assert (metrics["operation"], metrics["files_before"], metrics["files_after"]) == ("compact_upserts", 2, 1)
    table = LakeTable.open(path)
    assert table.commit_log.read(metrics["seq"]).operation == "compact_upserts"
    assert sorted((r["k"], r["v"]) for r in table.read(spark).collect()) == [(1, 2), (2, 2)]
