"""Lake tables as Airflow Assets: stable URIs, outlets of the operators that commit, metrics as extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk import Asset

from airflow_lake.assets import event_extra, table_asset, table_uri
from airflow_lake.operators.bucket_rewrite import BucketRewriteOperator
from airflow_lake.operators.clustering import ExecuteClusteringOperator, ScheduleClusteringOperator
from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.table import LakeCleanOperator, LakeCreateTableOperator
from airflow_lake.operators.upsert import VersionedUpsertOperator
from airflow_lake.operators.write import LakeWriteOperator


def test_a_table_has_one_uri_however_its_path_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    expected = f"file://{tmp_path}/lake/t"
    for spelling in (f"{tmp_path}/lake/t", f"{tmp_path}/lake/t/", "lake/t", f"file://{tmp_path}/lake/t",
                     f"{tmp_path}/lake/../lake/t"):
        assert table_uri(spelling) == expected, spelling
    (tmp_path / "lake" / "t").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "lake")
    assert table_uri(f"{tmp_path}/link/t") == expected  # a symlinked path: the real path (issue 33 item 2)
    for spelling in ("s3a://bucket/lake/t/", "s3://bucket/lake/t", "S3://bucket/lake/t", "s3n://bucket/lake/t"):
        assert table_uri(spelling) == "s3://bucket/lake/t", spelling  # the store's own scheme, as the project's
    assert table_uri("gcs://bucket/t/") == table_uri("gs://bucket/t") == "gs://bucket/t"
    asset = table_asset("/lake/t")
    assert (asset.uri, asset.name, asset.group) == ("file:///lake/t", "file:///lake/t", "lake")


def test_event_extra_keeps_the_commits_scalar_metrics() -> None:
    metrics = {"table": "/lake/t", "operation": "write", "rows_added": 5, "duration_seconds": 1.5,
               "already_committed": False, "plan_id": None, "bucket_counts": {"dt=1": 8}, "versions": [1, 2]}
    assert event_extra(metrics) == {"table": "/lake/t", "operation": "write", "rows_added": 5,
                                    "duration_seconds": 1.5, "already_committed": False, "plan_id": None}


def test_operators_that_commit_data_have_their_table_as_outlet() -> None:
    committing = [
        LakeWriteOperator(task_id="w", table="/lake/a", source_path="/in"),
        VersionedUpsertOperator(task_id="u", table="/lake/a", source_path="/in", version=1),
        BucketRewriteOperator(task_id="b", table="/lake/a"),
        ExecuteClusteringOperator(task_id="e", table="/lake/a"),
        CompactUpsertsOperator(task_id="c", table="/lake/a"),
    ]
    for op in committing:
        assert op.outlets == [Asset(name="file:///lake/a", uri="file:///lake/a", group="lake")], op.task_id
    metadata_only = [LakeCreateTableOperator(task_id="t", table="/lake/a", schema="x INT"),
                     ScheduleClusteringOperator(task_id="s", table="/lake/a"),
                     LakeCleanOperator(task_id="cl", table="/lake/a")]
    assert all(op.outlets == [] for op in metadata_only)
    # a templated path is unknown at parse time; outlets given by the DAG author win
    assert LakeWriteOperator(task_id="x", table="/lake/{{ params.t }}", source_path="/in").outlets == []
    mine = Asset("s3://elsewhere/x")
    assert LakeWriteOperator(task_id="y", table="/lake/a", source_path="/in", outlets=[mine]).outlets == [mine]
