"""`__HIVE_DEFAULT_PARTITION__`, the directory name of NULL, is refused as a partition value wherever one is
written or named: nothing committed, nothing left on disk, a message that names the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.errors import LakeSchemaError
from airflow_lake.lake.format.instants import pending
from airflow_lake.lake.spec.partitions import NULL_PARTITION
from tests.support import parquet_files_on_disk

SCHEMA = "k BIGINT, v BIGINT, dt STRING"


def plain(path: Path) -> LakeTable:
    return LakeTable.create(str(path), {"schema": SCHEMA, "partition_by": ["dt"]})


def source(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    """A JSON-lines source file (one Spark task reads it: a NULL row and the string land in one write task)."""
    path = tmp_path / "source.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def assert_nothing_written(table: LakeTable, seq: int) -> None:
    """No commit since `seq` but the rollback of the refused write's own instant; no file left anywhere."""
    assert [e.action for e in table.commit_log.entries(seq)] in ([], ["rollback"])
    assert table.snapshot().files == () and pending(table.storage) == []
    assert parquet_files_on_disk(table.url) == set()
    assert not any(Path(table.url, "_lake", "staging").rglob("*.parquet"))


@pytest.mark.parametrize("rows", [
    [{"k": 1, "v": 1, "dt": NULL_PARTITION}],  # was committed as a NULL partition
    [{"k": 1, "v": 1, "dt": NULL_PARTITION}, {"k": 2, "v": 2, "dt": None}],  # was a raw FileAlreadyExistsException
    [{"k": 1, "v": 1, "dt": "d1"}, {"k": 2, "v": 2, "dt": None}, {"k": 3, "v": 3, "dt": NULL_PARTITION}],
], ids=["alone", "beside-a-real-null", "among-values"])
def test_write_refuses_the_null_directory_name_in_the_data(spark: Any, tmp_path: Path,
                                                           rows: list[dict[str, Any]]) -> None:
    table = plain(tmp_path / "t")
    seq = table.snapshot().seq
    with pytest.raises(LakeSchemaError) as err:
        run(spark, "write", {"table": table.url, "source": {"path": source(tmp_path, rows), "format": "json"}})
    message = str(err.value)
    assert f"partition column 'dt' has the value '{NULL_PARTITION}'" in message and "Fix: use NULL" in message
    assert_nothing_written(table, seq)


def test_a_real_null_partition_still_writes_and_overwrites(spark: Any, tmp_path: Path) -> None:
    table = plain(tmp_path / "t")
    table.write(spark.createDataFrame([(1, 1, None), (2, 2, "d1")], SCHEMA))
    table.write(spark.createDataFrame([(3, 3, None)], SCHEMA), mode="overwrite", partitions=[{"dt": None}])
    assert sorted(tuple(r) for r in table.read(spark).collect()) == [(2, 2, "d1"), (3, 3, None)]


def test_upsert_refuses_it_in_the_data(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "pk"), {"schema": SCHEMA, "partition_by": ["dt"], "primary_key": ["k"],
                                                    "bucket": {"columns": ["k"], "count": 4}})
    rows: list[dict[str, Any]] = [{"k": 1, "v": 1, "dt": None}, {"k": 2, "v": 2, "dt": NULL_PARTITION}]
    with pytest.raises(LakeSchemaError, match=f"has the value '{NULL_PARTITION}'"):
        run(spark, "versioned_upsert", {"table": table.url, "version": 1,
                                        "source": {"path": source(tmp_path, rows), "format": "json"}})
    assert_nothing_written(table, 0)


def test_user_given_partitions_refuse_it(spark: Any, tmp_path: Path) -> None:
    table = plain(tmp_path / "t")
    table.write(spark.createDataFrame([(1, 1, None), (2, 2, "d1")], SCHEMA))
    seq = table.snapshot().seq
    named = {"dt": NULL_PARTITION}
    attempts: list[tuple[str, dict[str, Any], str]] = [
        ("write", {"mode": "overwrite", "partitions": [named],
                   "source": {"path": source(tmp_path, [{"k": 5, "v": 5, "dt": None}]), "format": "json"}},
         "partitions[0].dt"),
        ("bucket_rewrite", {"partitions": [named], "bucket": {"columns": ["k"], "count": 4}}, "partitions[0].dt"),
        ("bucket_rewrite", {"partitions": {"from": named}, "bucket": {"columns": ["k"], "count": 4}},
         "partitions.from.dt"),
        ("bucket_rewrite", {"bucket": {"columns": ["k"], "count": 4, "from_partition": named}},
         "bucket.from_partition.dt"),
        ("schedule_clustering", {"layout": "LINEAR", "sort_columns": ["k"], "partitions": [named]},
         "partitions[0].dt"),
    ]
    for operation, spec, field in attempts:
        with pytest.raises(LakeSpecError) as err:
            run(spark, operation, {"table": table.url, **spec})
        assert err.value.field.endswith(field), (operation, err.value.field)
        assert "directory name of a NULL partition value" in str(err.value) and "Give null" in str(err.value)
    assert table.snapshot().seq == seq and pending(table.storage) == []
    with pytest.raises(LakeSpecError, match=r"bucket\.from_partition\.dt"):
        LakeTable.create(str(tmp_path / "u"), {"schema": SCHEMA, "partition_by": ["dt"],
                                               "bucket": {"columns": ["k"], "count": 4, "from_partition": named}})
    assert not (tmp_path / "u").exists()
