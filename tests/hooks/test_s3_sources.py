"""Source files on S3 (issue 35): a write's `source.path` spelt `s3://` (as tables are, and as the example
pipeline's landing directory is next to a lake on S3) over a Connect server whose Spark reaches the S3 server
through S3A. Spark has no file system for `s3://`: the job hands it `s3a://`, as it does a table's own files."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import s3fs

from airflow_lake.hooks.lake import LakeHook
from airflow_lake.lake import LakeTable
from tests.connect_server import ConnectServer
from tests.s3_server import S3Server

pytestmark = pytest.mark.slow


def test_a_write_reads_its_parquet_and_csv_source_files_from_s3(
        s3_server: S3Server, s3_connect_server: ConnectServer, s3_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    host, port = s3_connect_server.url.rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_S3",
                       json.dumps({"conn_type": "spark_connect", "host": host, "port": int(port)}))
    fs = s3fs.S3FileSystem()
    landing = f"{s3_root}/landing"
    with fs.open(f"{landing}/a/part-0.parquet", "wb") as out:
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}), out)
    with fs.open(f"{landing}/b/part-0.csv", "wb") as out:
        pcsv.write_csv(pa.table({"id": [3], "v": ["c"]}), out)
    table = f"{s3_root}/lake/t"
    hook = LakeHook("spark_connect_s3")
    hook.submit("create_table", {"table": table, "schema": "id BIGINT, v STRING"})
    hook.submit("write", {"table": table, "source": {"path": f"{landing}/a"}})
    hook.submit("write", {"table": table, "source": {"path": f"{landing}/b", "format": "csv"}})
    rows = LakeTable.open(table).to_arrow().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
