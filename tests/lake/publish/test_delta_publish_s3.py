"""Publishing on an object store (moto's S3 server on 127.0.0.1, `tests/s3_server.py`): versions are conditional
creates, delta-rs reads them from the store, a failed publish is caught up, and two publishers interleaved at the
exact step both finish without a gap, each counting only the versions it created."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.publish import delta_log, delta_publisher
from airflow_lake.lake.table import LakeTable
from tests.lake.publish.arrow_commits import commit, delta_rows, make_table, rows
from tests.s3_server import REGION, S3Server


def options(server: S3Server) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}


def versions(table: LakeTable) -> list[int]:
    names = table.storage.list_dir(delta_log.DELTA_LOG)
    return sorted(int(n.split(".")[0]) for n in names if n.endswith(".json"))


def test_publish_on_s3(s3_server: S3Server, s3_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_table(s3_root)
    commit(table, [1, 2])
    commit(table, [3], "b")
    assert versions(table) == [0, 1, 2]
    assert delta_rows(s3_root, storage_options=options(s3_server)) == rows(table)
    assert delta_rows(s3_root, 1, storage_options=options(s3_server)) == rows(table, as_of=1)

    def broken(table: Any, upto: int | None = None) -> Any:
        raise OSError("the store is unreachable (test)")

    with monkeypatch.context() as patch:
        patch.setattr(delta_publisher, "publish", broken)
        for ids in ([4], [5], [6]):
            commit(table, ids)
    assert versions(table) == [0, 1, 2]

    original = delta_log.published_upto
    interleaved: list[int] = []

    def search_then_other_publisher(storage: Storage, head: int) -> int:
        found = original(storage, head)
        if not interleaved:
            interleaved.append(found)
            assert delta_publisher.publish(LakeTable.open(s3_root), found + 1).written == 1
        return found

    monkeypatch.setattr(delta_log, "published_upto", search_then_other_publisher)
    done = delta_publisher.publish(LakeTable.open(s3_root))
    assert interleaved == [2]
    # version 3 was the other publisher's: its create found the key there (a 412), not its own bytes
    assert (done.version, done.written) == (5, 2)
    assert versions(table) == list(range(6))
    for version in range(6):
        assert delta_rows(s3_root, version, storage_options=options(s3_server)) == rows(table, as_of=version)
