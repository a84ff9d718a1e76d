"""The data path on an object store (a real S3-protocol server, `tests/s3_server.py`) with this suite's own `spark`
fixture, which has no Hadoop S3 connector (the pip package ships none; `airflow-lake jars s3` fetches it, and
tests/jobs/test_store_s3_spark.py runs every operation with it on the same server, by spark-submit and over Spark
Connect). Here:

- a Spark write to a store table from a session without the connector (what a user's Spark without the jars
  is) fails with the fix named (the connector), and the table stays as it was;
- what the writer does after Spark wrote — list its write directories, check, read the footers, delete Spark's
  leftovers — runs on the store against the files a real Spark write produced, and gives exactly the data files
  (paths, rows, buckets, partition values, stats) it gives on local disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark import file_writer
from airflow_lake.lake.spark.bucket_assign import assign_buckets
from airflow_lake.lake.spark.session_conf import session_conf

SPEC = {"schema": "id BIGINT, v STRING, dt STRING", "partition_by": ["dt"]}


def test_a_spark_write_to_a_store_without_its_connector_fails_clearly_and_changes_nothing(
        spark: Any, s3_root: str) -> None:
    import s3fs

    table = LakeTable.create(s3_root, SPEC)
    with pytest.raises(LakeError, match=r"Spark has no file system for s3a:// .*nothing was committed.*hadoop-aws"):
        table.write(spark.createDataFrame([(1, "a", "d1")], "id BIGINT, v STRING, dt STRING"))
    reopened = LakeTable.open(s3_root)
    assert reopened.commit_log.head() == 1 and reopened.commit_log.read(1).action == "rollback"
    assert reopened.snapshot().files == ()
    keys = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False).find(s3_root)
    assert [k for k in keys if "/_lake/" not in k and "/_delta_log/" not in k] == []  # no data file


@pytest.mark.parametrize("bucketed", [False, True], ids=["plain", "bucketed"])
def test_after_spark_wrote_the_writer_gives_the_same_files_on_a_store_as_on_disk(
        spark: Any, s3_root: str, tmp_path: Path, bucketed: bool) -> None:
    import s3fs

    spec_dict: dict[str, Any] = dict(SPEC)
    if bucketed:
        spec_dict["bucket"] = {"columns": ["id"], "count": 4, "sort_columns": ["id"]}
    local = LakeTable.create(str(tmp_path / "t"), spec_dict)
    store = LakeTable.create(s3_root, spec_dict)
    spec = local.spec
    rows = spark.createDataFrame([(i, f"v{i}" if i % 7 else None, f"d{i % 3}") for i in range(600)], SPEC["schema"])
    target = "data/20261126000000000-0badcafe" + ("-b4" if bucketed else "")
    with session_conf(spark, file_writer.WRITE_CONF):  # Spark's own output, .crc files included, written locally
        if bucketed:
            df = assign_buckets(rows, spec, file_writer.COUNT_COLUMN, file_writer.BUCKET_COLUMN)
            targets = [file_writer._insert_bucketed(df.drop(file_writer.BUCKET_COLUMN), local.storage, spec, target,
                                                    4, sort_within=None, helper_order=False)]
        else:
            targets = [file_writer._write_plain(rows, local.storage, target, spec.partition_columns)]
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    fs.put(local.storage.path(target), f"{Storage(s3_root).path(target)}", recursive=True)
    crc = [k for k in fs.find(Storage(s3_root).path(target)) if k.endswith(".crc")]
    assert crc  # Spark's leftovers are on the store too

    on_store = file_writer.finish_write(store.storage, spec, "20261126000000000", targets, spark=spark)
    on_disk = file_writer.finish_write(local.storage, spec, "20261126000000000", targets, spark=spark)
    assert {f.partition["dt"] for f in on_disk} == {"d0", "d1", "d2"} and len(on_disk) >= (12 if bucketed else 3)
    assert [f.to_dict() for f in on_store] == [f.to_dict() for f in on_disk]
    assert sum(f.rows for f in on_store) == 600
    assert sorted(k[len(Storage(s3_root).path("")) + 1:] for k in fs.find(Storage(s3_root).path(target))) \
        == sorted(f.path for f in on_store)  # only the data files are left under the write directory
