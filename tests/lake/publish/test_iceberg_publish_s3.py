"""A table on S3 (a real S3-protocol server on 127.0.0.1, `tests/s3_server.py`) published to Iceberg: its data files
are registered by their s3:// URLs, and pyiceberg, reading them from the store, sees exactly our rows; a stray file
on the store is not read. Data files are written with pyarrow and committed as the writer would describe them, so
no Spark is needed."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.lake import ColumnStats, DataFile, LakeTable
from tests.lake.lake_core_helpers import FAST
from tests.lake.publish import iceberg_readers as readers


def put_parquet(table: LakeTable, instant: str, part: str, ids: list[int]) -> DataFile:
    """A real Parquet file of `ids` in partition dt=`part`, on the store, as a DataFile of `instant`."""
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), buffer)
    path = f"data/{instant}/dt={part}/part-{uuid.uuid4().hex}.parquet"
    table.storage.write_bytes(path, buffer.getvalue())
    return DataFile(path=path, partition={"dt": part}, rows=len(ids), bytes=len(buffer.getvalue()), instant=instant,
                    stats={"id": ColumnStats(min(ids), max(ids), 0)})


def test_a_table_on_s3_is_published_with_s3_urls_and_read_from_the_store(s3_server: Any, s3_root: str,
                                                                          tmp_path: Path, monkeypatch: Any) -> None:
    # the Iceberg readers reach the store by the catalog's FileIO properties (pyarrow does not read AWS_ENDPOINT_URL)
    catalog = readers.configure(monkeypatch, tmp_path, **{"s3.endpoint": s3_server.endpoint, "s3.region": "us-east-1"})
    table = LakeTable.create(s3_root, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                       "properties": {**FAST, **readers.properties()}})
    txn = table.begin("commit", "write")
    first = [put_parquet(table, txn.instant, "a", [1, 2]), put_parquet(table, txn.instant, "b", [3])]
    txn.commit(added=first)
    txn = table.begin("replace", "write")
    second = put_parquet(table, txn.instant, "a", [4])
    txn.commit(added=[second], removed=[first[0].path])
    table.storage.write_bytes("data/stray/dt=a/stray.parquet", table.storage.read_bytes(first[0].path))
    published = catalog.load_table(("db", "t"))
    locations = {task.file.file_path for task in published.scan().plan_files()}
    assert locations == {f"{s3_root}/{first[1].path}", f"{s3_root}/{second.path}"}
    # our snapshot's rows (LakeTable.to_arrow cannot read a table on a store yet: it opens the paths as local files)
    assert readers.rows(readers.by_pyiceberg(published), ["id", "dt"]) == {(3, "b"): 1, (4, "a"): 1}
