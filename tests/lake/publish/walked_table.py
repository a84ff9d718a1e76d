"""One table walked through the commits other engines must follow, for the tests that read it with a foreign engine
(a Spark with Delta's or Iceberg's jars, Trino): appends, a partition overwrite, stray copies of every live file, a
copy-on-write delete, a rename (column mapping), a write after it and a restore; published as Delta and to the
test's Iceberg catalog (`iceberg_readers`)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import Catalog
from pyspark.sql import SparkSession

from airflow_lake.lake.table import LakeTable
from tests.lake.publish import iceberg_readers

SCHEMA = "id BIGINT, name STRING, amount BIGINT, dt DATE"
DAY1, DAY2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)


@dataclass(frozen=True)
class Walked:
    """The walked table, its Iceberg catalog, and the versions to read (1..head)."""

    table: LakeTable
    catalog: Catalog
    versions: list[int]

    @property
    def head(self) -> int:
        return self.versions[-1]


def walk(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Walked:
    """Create and walk the table under `tmp_path` (its catalog there too)."""
    catalog = iceberg_readers.configure(monkeypatch, tmp_path)
    path = str(tmp_path / "t")
    table = LakeTable.create(path, {"schema": SCHEMA, "partition_by": ["dt"],
                                    "properties": iceberg_readers.properties()})
    rows = [(i, f"n{i}", i * 10, DAY1 if i % 2 else DAY2) for i in range(8)]
    table.write(spark.createDataFrame(rows, SCHEMA))
    table.write(spark.createDataFrame([(100, "late", 1, DAY1)], SCHEMA))
    table.write(spark.createDataFrame([(7, "again", 70, DAY1)], SCHEMA), mode="overwrite",
                partitions=[{"dt": "2024-01-01"}])
    for data_file in table.snapshot().files:  # strays: a copy of each live file under a new name
        source = Path(path) / data_file.path
        shutil.copy(source, source.with_name("stray-" + source.name))
    table.delete(spark, where="id = 2")
    table.alter_table([{"rename": "name", "to": "label"}])
    table.write(spark.createDataFrame([(200, "renamed", 2, DAY2)], "id BIGINT, label STRING, amount BIGINT, dt DATE"))
    table.restore(to_seq=2)
    return Walked(table, catalog, list(range(1, table.commit_log.head() + 1)))


def bag(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset, values as a foreign engine's JSON sends them (dates as ISO text)."""
    return Counter(json.dumps({k: (v.isoformat() if isinstance(v, dt.date) else v) for k, v in r.items()},
                              sort_keys=True) for r in rows)
