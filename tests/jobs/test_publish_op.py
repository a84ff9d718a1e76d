"""The `publish` operation, and where publishing stands in every operation's metrics (issue 34, items 3 and 4): the
runner adds `published_seq` (the newest Delta version other engines read), `unpublished_commits` and, for a
primary-key table, `hidden_files` / `hidden_commits` (what other engines see only after the next compaction), on
every path a job's metrics take (in-process, the job's result line). Checked against delta-rs reading the log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_lake.jobs import run
from airflow_lake.jobs.command_line import main as runner_main
from airflow_lake.jobs.protocol import RESULT_PREFIX
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.publish import delta_publisher
from tests.lake.lake_core_helpers import append, make_table


def published_files(table: LakeTable) -> set[str]:
    """The files of the newest Delta version, as delta-rs reads the published log (paths within the table)."""
    return {uri.removeprefix(table.url.rstrip("/") + "/") for uri in DeltaTable(table.url).file_uris()}


def test_publish_catches_up_a_table_never_published(table_path: str) -> None:
    table = make_table(table_path)
    for day in ("a", "b"):
        append(table, day, disk=True)
    shutil.rmtree(table.storage.path("_delta_log"))  # a table created before publishing existed

    done = run(None, "publish", {"table": table_path, "request_id": "r1"})

    assert (done["operation"], done["seq"], done["published_seq"], done["delta_versions_written"]) == \
        ("publish", 2, 2, 3)
    assert (done["unpublished_commits"], done["noop"]) == (0, False) and "hidden_files" not in done
    assert DeltaTable(table_path).version() == 2
    assert published_files(table) == {f.path for f in table.snapshot().files}
    again = run(None, "publish", {"table": table_path})  # caught up: nothing to write
    assert (again["published_seq"], again["delta_versions_written"]) == (2, 0)
    with pytest.raises(LakeSpecError, match="publish"):
        run(None, "publish", {"table": table_path, "upto": 1})


def test_every_operations_metrics_say_how_far_other_engines_see(table_path: str, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(table_path)
    good, _ = append(table, "a", disk=True)
    append(table, "b", disk=True)

    restored = run(None, "restore", {"table": table_path, "to_instant": good.instant})
    assert (restored["seq"], restored["published_seq"], restored["unpublished_commits"]) == (3, 3, 0)

    # the publish after the next commit fails (the commit stands): the metrics say other engines are one behind
    def broken(*_: Any, **__: Any) -> Any:
        raise OSError("the store refused the Delta version")

    monkeypatch.setattr(delta_publisher, "publish", broken)
    behind = run(None, "restore", {"table": table_path, "to_seq": 2})
    assert (behind["seq"], behind["published_seq"], behind["unpublished_commits"]) == (4, 3, 1)
    assert DeltaTable(table_path).version() == 3
    # the job's result line (spark-submit's path) carries them too
    assert runner_main(["restore", "--spec", json.dumps({"table": table_path, "to_seq": 1})]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(RESULT_PREFIX))
    result = json.loads(line.removeprefix(RESULT_PREFIX))
    assert (result["seq"], result["published_seq"], result["unpublished_commits"]) == (5, 3, 2)
    monkeypatch.undo()

    caught_up = run(None, "publish", {"table": table_path})
    assert (caught_up["published_seq"], caught_up["delta_versions_written"], caught_up["unpublished_commits"]) == \
        (5, 2, 0)
    assert published_files(table) == {f.path for f in table.snapshot().files}


def test_a_primary_key_tables_metrics_count_what_waits_for_compaction(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "users")
    run(None, "create_table", {"table": path, "schema": "k BIGINT NOT NULL, name STRING", "primary_key": ["k"],
                               "bucket": {"columns": ["k"], "count": 2}})
    table = LakeTable.open(path)

    def upsert(batch: str, keys: range, version: int) -> dict[str, Any]:
        landing = str(tmp_path / batch)
        spark.createDataFrame([(k, f"{batch}{k}") for k in keys], "k BIGINT, name STRING").write.parquet(landing)
        return run(spark, "versioned_upsert", {"table": path, "version": version,
                                               "source": {"path": landing, "format": "parquet"}})

    upsert("a", range(10), 1)
    second = upsert("b", range(5, 15), 2)
    assert (second["published_seq"], second["unpublished_commits"], second["hidden_commits"]) == (2, 0, 2)
    assert second["hidden_files"] == len(table.snapshot().files) and published_files(table) == set()
    compacted = run(spark, "compact_upserts", {"table": path})  # publishes its base files at once
    assert (compacted["published_seq"], compacted["hidden_files"], compacted["hidden_commits"]) == (3, 0, 0)
    assert published_files(table) == {f.path for f in table.snapshot().files}
    third = upsert("c", range(10, 20), 3)
    base = published_files(table)
    waiting = [f for f in table.snapshot().files if f.path not in base]
    assert (third["published_seq"], third["hidden_commits"], third["hidden_files"]) == (4, 1, len(waiting))
    assert third["hidden_rows"] == sum(f.rows for f in waiting) == 10 and base
