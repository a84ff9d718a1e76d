"""Tables published to an Iceberg catalog (a SQL catalog on SQLite): after each kind of commit, with stray Parquet
files in the table's directories, pyiceberg and DuckDB read exactly our rows; time travel by `lake.seq`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from airflow_lake.lake import LakeTable
from tests.lake.publish import iceberg_readers as readers


def test_append_and_overwrite_read_the_same_everywhere(spark: Any, table_path: str, tmp_path: Path,
                                                        monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    table = LakeTable.create(table_path, {"schema": "id BIGINT, name STRING, dt STRING", "partition_by": ["dt"],
                                          "properties": readers.properties()})
    table.write(spark.createDataFrame([(1, "a", "d1"), (2, "b", "d2")], "id BIGINT, name STRING, dt STRING"))
    readers.assert_same(table, catalog)
    table.write(spark.createDataFrame([(3, "c", "d1")], "id BIGINT, name STRING, dt STRING"), mode="overwrite",
                partitions=[{"dt": "d1"}])
    published = readers.assert_same(table, catalog)
    print(published.metadata.snapshots)
