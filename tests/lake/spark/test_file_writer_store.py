"""A Spark write into a table on an object store is refused before Spark writes anything (the data path there is
not built yet: placing files renames, which stores lack), and the table stays as it was."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeError


def test_a_spark_write_to_a_store_is_refused_and_changes_nothing(spark: Any, s3_root: str) -> None:
    import s3fs

    table = LakeTable.create(s3_root, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    with pytest.raises(LakeError, match=r"writing data files to an object store is not supported yet.*local or "
                                        r"mounted path"):
        table.write(spark.createDataFrame([(1, "d1")], "id BIGINT, dt STRING"))
    reopened = LakeTable.open(s3_root)
    assert reopened.commit_log.head() == 1 and reopened.commit_log.read(1).action == "rollback"
    assert reopened.snapshot().files == ()
    keys = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False).find(s3_root)
    assert [k for k in keys if "/_lake/" not in k] == []  # no data file, no staging
