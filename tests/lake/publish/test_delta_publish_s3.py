"""The Delta log published on S3 (moto's server on 127.0.0.1, `tests/s3_server.py`): versions by conditional
creates, read by delta-rs through its own S3 client, exactly the live files whatever else lies under the table;
two publishers at once on the store leave one run of versions."""

from __future__ import annotations

import io
import json

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.publish import delta_log, delta_publisher
from airflow_lake.lake.table import LakeTable
from tests.s3_server import REGION, S3Server

SPEC = {"columns": [{"name": "id", "type": "bigint"}, {"name": "dt", "type": "string"}], "partition_by": ["dt"]}


def upload(root: str, rel: str, ids: list[int]) -> DataFile:
    """A Parquet file of `ids` under the table (as Spark writes them: no partition column inside)."""
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), sink)
    data = sink.getvalue()
    with fsspec.open(f"{root}/{rel}", "wb") as handle:
        handle.write(data)
    dt = rel.split("dt=", 1)[1].split("/", 1)[0]
    return DataFile(rel, {"dt": dt}, len(ids), len(data))


def delta_rows(s3_server: S3Server, url: str, version: int | None = None) -> list[tuple[int, str]]:
    deltalake = pytest.importorskip("deltalake")
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": REGION,
               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    table = deltalake.DeltaTable(url, storage_options=options, version=version)
    return sorted(zip(*table.to_pyarrow_table().select(["id", "dt"]).to_pydict().values(), strict=True))


def commit(table: LakeTable, added: list[DataFile], removed: tuple[str, ...] = ()) -> int:
    txn = table.begin("commit", "write")
    return txn.commit(added=added, removed=removed).seq


def test_published_on_s3_and_read_by_delta_rs(s3_server: S3Server, s3_root: str) -> None:
    table = LakeTable.create(s3_root, SPEC)
    a = upload(s3_root, "data/w1/dt=a/part-0.parquet", [1, 2])
    b = upload(s3_root, "data/w1/dt=b/part-0.parquet", [3])
    commit(table, [a, b])
    a2 = upload(s3_root, "data/w2/dt=a/part-0.parquet", [10])
    upload(s3_root, "data/w2/dt=a/stray.parquet", [99])  # a file no entry names: never read
    head = commit(table, [a2], (a.path,))
    assert delta_log.published_upto(table.storage, head) == head
    assert delta_rows(s3_server, s3_root) == [(3, "b"), (10, "a")]
    assert delta_rows(s3_server, s3_root, version=1) == [(1, "a"), (2, "a"), (3, "b")]
    first = json.loads(table.storage.read_bytes(delta_log.version_file(head)).splitlines()[0])
    assert first["commitInfo"]["airflowLake"]["seq"] == head


def test_two_publishers_on_s3_leave_one_run(s3_server: S3Server, s3_root: str, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    table = LakeTable.create(s3_root, {**SPEC, "properties": {"publish.delta": "true"}})
    monkeypatch.setattr("airflow_lake.lake.publish.publisher.after_commit", lambda table, seq: None)  # publish off
    files = [upload(s3_root, f"data/w{i}/dt=a/part-0.parquet", [i]) for i in range(3)]
    for data_file in files:
        commit(table, [data_file])
    head = table.commit_log.head()
    assert delta_log.published_upto(table.storage, head) == 0
    # the other publisher lands versions 1 and 2 between this one's search and its first create
    other = LakeTable.open(s3_root)
    real = delta_log.published_upto
    calls = []

    def search_then_race(storage: object, upto: int) -> int:
        found = real(storage, upto)  # type: ignore[arg-type]
        if not calls:
            calls.append(found)
            delta_publisher.publish(other, 2)
        return found

    monkeypatch.setattr(delta_log, "published_upto", search_then_race)
    done = delta_publisher.publish(LakeTable.open(s3_root))
    # (both publishers make the same bytes for a version, so on a store a create that finds the key with our bytes
    # counts as written: `Storage.create_bytes` reads back after a 412)
    assert calls == [0] and done.version == head
    monkeypatch.setattr(delta_log, "published_upto", real)
    seqs = [json.loads(table.storage.read_bytes(delta_log.version_file(v)).splitlines()[0])
            ["commitInfo"]["airflowLake"]["seq"] for v in range(head + 1)]
    assert seqs == list(range(head + 1))
    assert delta_rows(s3_server, s3_root) == [(0, "a"), (1, "a"), (2, "a")]
