"""Parquet files from pandas hold nanosecond timestamps, which Spark cannot read: a write or upsert of them fails
with an error that names the pyarrow options that fix it, and commits nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from tests.support import parquet_files_on_disk

THE_FIX = 'df.to_parquet(..., coerce_timestamps="us", allow_truncated_timestamps=True)'
STAMP = "2024-01-01 08:30:00.123456789"


def frame(key: int, *, tz: str | None = None, column: str = "ts") -> pd.DataFrame:
    """One row, its timestamp in pandas' own unit (nanoseconds)."""
    stamps = pd.to_datetime([STAMP])
    return pd.DataFrame({"id": [key], column: stamps.tz_localize(tz) if tz else stamps, "dt": ["d1"]})


def committed(table: LakeTable) -> tuple[list[str], list[str], set[str]]:
    """Actions of the log entries other than rollbacks (a failed writer records one), live files, data files
    on disk."""
    fresh = LakeTable.open(table.url)
    log = fresh.commit_log
    actions = [e.action for e in (log.read(seq) for seq in range(log.head() + 1)) if e.action != "rollback"]
    return actions, sorted(f.path for f in fresh.snapshot().files), parquet_files_on_disk(table.url)


def refused(spark: Any, table: LakeTable, operation: str, spec: dict[str, Any]) -> str:
    before = committed(table)
    with pytest.raises(LakeSpecError) as caught:
        run(spark, operation, {"table": table.url, **spec})
    assert caught.value.field == "source.path"
    assert THE_FIX in caught.value.fix
    assert committed(table) == before, "a refused source committed or left files"
    return str(caught.value)


@pytest.mark.parametrize("tz", [None, "UTC"])
def test_a_write_of_a_pandas_file_names_coerce_timestamps(spark: Any, tmp_path: Path, tz: str | None) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, event_time TIMESTAMP, dt STRING",
                                                   "partition_by": ["dt"]})
    source = tmp_path / "landed.parquet"
    frame(1, tz=tz, column="event_time").to_parquet(source)  # pandas' defaults: TIMESTAMP(NANOS)

    message = refused(spark, table, "write", {"source": {"path": str(source)}})

    assert "nanosecond timestamps in column(s) 'event_time'" in message
    # a naive timestamp, once in microseconds, is read as TIMESTAMP_NTZ: the hint says so, only for those
    assert ("TIMESTAMP_NTZ" in message) == (tz is None)


def test_an_upsert_of_a_pandas_directory_names_coerce_timestamps(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "u"), {
        "schema": "id BIGINT NOT NULL, ts TIMESTAMP_NTZ, dt STRING", "partition_by": ["dt"], "primary_key": ["id"],
        "bucket": {"columns": ["id"], "count": 2}})
    landed = tmp_path / "landed" / "dt=d1"
    landed.mkdir(parents=True)
    frame(1).drop(columns="dt").to_parquet(landed / "part-0.parquet")

    message = refused(spark, table, "versioned_upsert", {"source": {"path": str(landed.parent)}, "version": 1})

    assert "'ts'" in message


def test_one_nanosecond_file_among_good_ones_fails_mid_write_with_the_hint(spark: Any, tmp_path: Path) -> None:
    # Spark takes the schema from a microsecond file and meets the nanosecond one only while writing
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, ts TIMESTAMP_NTZ, dt STRING",
                                                   "partition_by": ["dt"]})
    landed = tmp_path / "landed"
    landed.mkdir()
    frame(1).to_parquet(landed / "a.parquet", coerce_timestamps="us", allow_truncated_timestamps=True)
    frame(2).to_parquet(landed / "b.parquet")

    message = refused(spark, table, "write", {"source": {"path": str(landed)}})

    assert "b.parquet holds nanosecond timestamps in column 'ts'" in message
    assert "nothing was committed" in message


def test_files_written_as_the_hint_says_are_written(spark: Any, tmp_path: Path) -> None:
    aware = LakeTable.create(str(tmp_path / "aware"), {"schema": "id BIGINT, ts TIMESTAMP, dt STRING",
                                                       "partition_by": ["dt"]})
    naive = LakeTable.create(str(tmp_path / "naive"), {"schema": "id BIGINT, ts TIMESTAMP_NTZ, dt STRING",
                                                       "partition_by": ["dt"]})
    for table, tz in ((aware, "UTC"), (naive, None)):
        source = tmp_path / f"{tz}.parquet"
        frame(1, tz=tz).to_parquet(source, coerce_timestamps="us", allow_truncated_timestamps=True)

        assert run(spark, "write", {"table": table.url, "source": {"path": str(source)}})["rows_added"] == 1

        (stamp,) = [r["ts"] for r in LakeTable.open(table.url).read(spark).collect()]
        assert stamp.isoformat().startswith("2024-01-01T08:30:00.123456")  # the nanoseconds were dropped
