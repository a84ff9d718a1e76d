"""A Spark without airflow-lake (`tests/engines/foreign_spark.py`) reads what we publish: after appends, a partition
overwrite, a copy-on-write delete, a rename and a restore, with stray Parquet files beside the live ones,
`spark.read.format("delta").load(path)` (Delta Lake 4.4.0's jars) returns our rows at every version, and Iceberg's
Spark runtime (1.12.0, on a plain pyspark 4.1: it has none for Spark 4.2) reading the table through the same SQLite
catalog returns our rows at every snapshot."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_lake.lake.table import LakeTable
from tests.engines.foreign_spark import DeltaRead, IcebergRead, read_deltas, read_icebergs, require_foreign_spark
from tests.lake.publish import iceberg_readers

SCHEMA = "id BIGINT, name STRING, amount BIGINT, dt DATE"


def bag(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset, values as the foreign job sends them (dates as ISO text)."""
    return Counter(json.dumps({k: (v.isoformat() if isinstance(v, dt.date) else v) for k, v in r.items()},
                              sort_keys=True) for r in rows)


def test_spark_with_delta_and_iceberg_jars_reads_every_version(spark: SparkSession, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    require_foreign_spark()
    catalog = iceberg_readers.configure(monkeypatch, tmp_path)
    path = str(tmp_path / "t")
    table = LakeTable.create(path, {"schema": SCHEMA, "partition_by": ["dt"],
                                    "properties": iceberg_readers.properties()})
    day1, day2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    rows = [(i, f"n{i}", i * 10, day1 if i % 2 else day2) for i in range(8)]
    table.write(spark.createDataFrame(rows, SCHEMA))
    table.write(spark.createDataFrame([(100, "late", 1, day1)], SCHEMA))
    table.write(spark.createDataFrame([(7, "again", 70, day1)], SCHEMA), mode="overwrite",
                partitions=[{"dt": "2024-01-01"}])
    for data_file in table.snapshot().files:  # strays: a copy of each live file under a new name
        source = Path(path) / data_file.path
        shutil.copy(source, source.with_name("stray-" + source.name))
    table.delete(spark, where="id = 2")
    table.alter_table([{"rename": "name", "to": "label"}])
    table.write(spark.createDataFrame([(200, "renamed", 2, day2)], "id BIGINT, label STRING, amount BIGINT, dt DATE"))
    table.restore(to_seq=2)
    head = table.commit_log.head()
    versions = list(range(1, head + 1))
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
