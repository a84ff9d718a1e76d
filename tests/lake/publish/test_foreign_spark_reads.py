"""A Spark without airflow-lake (`tests/engines/foreign_spark.py`) reads what we publish: after appends, a partition
overwrite, a copy-on-write delete, a rename and a restore, with stray Parquet files beside the live ones,
`spark.read.format("delta").load(path)` (Delta Lake 4.4.0's jars) returns our rows at every version, and Iceberg's
Spark runtime (1.12.0, on a plain pyspark 4.1: it has none for Spark 4.2) reading the table through the same SQLite
catalog returns our rows at every snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.engines.foreign_spark import DeltaRead, IcebergRead, read_deltas, read_icebergs, require_foreign_spark
from tests.lake.publish import iceberg_readers
from tests.lake.publish.walked_table import bag, walk


def test_spark_with_delta_and_iceberg_jars_reads_every_version(spark: SparkSession, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    require_foreign_spark()
    walked = walk(spark, tmp_path, monkeypatch)
    table, catalog, versions, head = walked.table, walked.catalog, walked.versions, walked.head
    path = table.url
    got = read_deltas([DeltaRead(path, version) for version in versions] + [DeltaRead(path)])
    for version, rows_read in zip([*versions, head], got, strict=True):
        want = table.to_arrow(as_of=version).to_pylist()
        assert bag(rows_read) == bag(want), f"version {version}"
    renamed = got[versions.index(head - 1)]  # the write after the rename: its files hold `name`, read as `label`
    assert {r["label"] for r in renamed} >= {"renamed", "n0"}
    assert {tuple(sorted(r)) for r in got[-1]} == {("amount", "dt", "id", "name")}  # the restored schema

    published = catalog.load_table("db.t")
    snapshots = {v: iceberg_readers.snapshot_of_seq(published, v) for v in versions}
    at = [v for v in versions if snapshots[v] is not None]
    assert head in at and len(at) >= 5  # one snapshot per commit that changed files
    warehouse = f"file://{tmp_path}/warehouse"
    uri = f"sqlite:///{tmp_path}/catalog.db"
    got = read_icebergs([IcebergRead(uri, warehouse, "db.t", iceberg_readers.CATALOG, snapshots[v]) for v in at])
    for version, rows_read in zip(at, got, strict=True):
        assert bag(rows_read) == bag(table.to_arrow(as_of=version).to_pylist()), f"Iceberg snapshot of seq {version}"
