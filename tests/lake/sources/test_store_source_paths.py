"""A file source on a store that reads a lake table's files (which also hold replaced, no longer live files) is
refused before anything runs, as a local path is (`refuse_lake_table_path`): on the S3 test server."""

from __future__ import annotations

import pytest

from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.sources.load import Source
from airflow_lake.lake.sources.strict_files import refuse_lake_table_path
from tests.s3_server import S3Server


def test_a_store_source_in_or_above_a_table_is_refused(s3_server: S3Server, s3_root: str) -> None:
    LakeTable.create(f"{s3_root}/lake/t", {"schema": "id BIGINT"})
    s3_server.client.put_object(Bucket=s3_server.bucket, Key=f"{s3_server.key_of(s3_root)}/landing/a.parquet",
                                Body=b"x")
    for inside in (f"{s3_root}/lake/t", f"{s3_root}/lake/t/", f"{s3_root}/lake/t/data/x-1/part-0.parquet",
                   f"{s3_root}/lake/t/data/*/", f"{s3_root.replace('s3://', 's3a://')}/lake/t/data"):
        with pytest.raises(LakeSpecError, match=r"is inside the lake table '.*/lake/t'.*SELECT \* FROM t"):
            refuse_lake_table_path(inside)
    with pytest.raises(LakeSpecError, match=r"source\.path.*holds the lake table 's3://.*/lake/t'"):
        Source.from_dict({"path": f"{s3_root}/lake"})  # validated before Spark starts
    with pytest.raises(LakeSpecError, match=r"holds the lake table"):
        refuse_lake_table_path(s3_root)
    for fine in (f"{s3_root}/landing", f"{s3_root}/landing/a.parquet", f"{s3_root}/landing/*.parquet",
                 f"{s3_root}/lake/t2", f"{s3_root}/lake/*/x"):  # a glob above a table: Spark's listing decides
        refuse_lake_table_path(fine)


def test_a_store_the_worker_cannot_read_is_left_to_spark(s3_server: S3Server, s3_root: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: no access from here
    refuse_lake_table_path(f"{s3_root}/lake/t/data")  # not checked here, no error: Spark's side may reach it
