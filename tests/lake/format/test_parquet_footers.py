"""Footer facts: folded over row groups, unknown where a row group has none, the same from driver threads
and from a Spark job."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.lake.format import parquet_footers as footers
from airflow_lake.lake.format.parquet_footers import file_facts, read_footers

TYPES = {"id": "bigint", "s": "string", "day": "date", "v": "double"}


def write(path: Path, rows: list[dict[str, Any]], row_group_size: int, **options: Any) -> str:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("day", pa.date32()), ("v", pa.float64())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=row_group_size, **options)
    return str(path)


def test_stats_fold_over_row_groups(tmp_path: Path) -> None:
    rows = [{"id": i, "s": None if i < 3 else f"k{i:02d}", "day": dt.date(2024, 1, 1 + i), "v": -i / 2}
            for i in range(10)]
    path = write(tmp_path / "f.parquet", rows, row_group_size=3)  # 4 row groups; the first has only null s
    assert pq.read_metadata(path).num_row_groups == 4
    count, size, stats = file_facts(path, TYPES)
    assert (count, size) == (10, Path(path).stat().st_size)
    assert stats == {"id": [0, 9, 0], "s": ["k03", "k09", 3], "day": ["2024-01-01", "2024-01-10", 0],
                     "v": [-4.5, 0.0, 0]}


def test_a_row_group_without_min_max_makes_the_bounds_unknown(tmp_path: Path) -> None:
    rows = [{"id": i, "s": "a", "day": None, "v": 1.0} for i in range(4)]
    path = write(tmp_path / "f.parquet", rows, row_group_size=2, write_statistics=["s", "day"])
    _, _, stats = file_facts(path, TYPES)
    assert stats["id"] == [None, None, 0] and stats["v"] == [None, None, 0]  # no statistics written for them
    assert stats["s"] == ["a", "a", 0] and stats["day"] == [None, None, 4]


def test_columns_not_in_the_table_are_left_out(tmp_path: Path) -> None:
    path = write(tmp_path / "f.parquet", [{"id": 1, "s": "x", "day": None, "v": 2.0}], row_group_size=10)
    assert set(file_facts(path, {"id": "bigint"})[2]) == {"id"}


def test_a_spark_job_reads_many_footers_with_the_same_result(spark: Any, tmp_path: Path,
                                                             monkeypatch: Any) -> None:
    paths = [write(tmp_path / f"f{i:03d}.parquet",
                   [{"id": i * 10 + j, "s": f"s{i}", "day": dt.date(2024, 2, 1), "v": float(j)} for j in range(5)],
                   row_group_size=2) for i in range(60)]
    on_driver = read_footers(paths, TYPES)  # below the threshold: driver threads
    monkeypatch.setattr(footers, "SPARK_JOB_MIN_FILES", 10)
    monkeypatch.setattr(footers, "FILES_PER_TASK", 7)
    in_spark = read_footers(paths, TYPES, spark)  # 60 files: a Spark job of 8 tasks
    assert in_spark == on_driver and len(in_spark) == 60
    assert in_spark[paths[7]].stats["id"].to_list() == [70, 74, 0] and in_spark[paths[7]].rows == 5
