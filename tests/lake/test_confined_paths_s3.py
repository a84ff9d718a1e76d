"""No path read from metadata leaves its table, on a real S3-protocol server (`tests/s3_server.py`; issue 33, item 3):
a planted manifest (recovery, run by every writer's `begin`) or log entry (`clean`) naming keys outside the table's
prefix — `..`, an `s3://` URL, an absolute key, the table's own log — deletes nothing: the keys of a victim prefix
beside the table (one that shares the table's leading characters) are all still there, and the error names the file.
"""

from __future__ import annotations

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeUnsafePath
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.storage import Storage
from tests.lake.lake_core_helpers import append, data_file, make_table
from tests.lake.test_confined_paths import attempt, plant_dead_instant, plant_entry, planted_file
from tests.s3_server import S3Server


class VictimKeys:
    """Keys under a prefix beside the table: `<table prefix>-victim/...`."""

    def __init__(self, server: S3Server, s3_root: str) -> None:
        self.server = server
        self.prefix = f"{server.key_of(s3_root)}-victim/"
        self.name = self.prefix.rstrip("/")
        for key in ("a.parquet", "b.parquet", "sub/c.parquet"):
            server.client.put_object(Bucket=server.bucket, Key=f"{self.prefix}{key}", Body=b"victim")
        self.before = self.keys()

    def keys(self) -> list[str]:
        page = self.server.client.list_objects_v2(Bucket=self.server.bucket, Prefix=self.prefix)
        return sorted(item["Key"] for item in page.get("Contents", ()))

    def untouched(self) -> bool:
        return len(self.before) == 3 and self.keys() == self.before


def bad_keys(victim: VictimKeys, server: S3Server) -> dict[str, str]:
    return {
        "dotdot-dir": f"../{victim.name}/",
        "dotdot-file": f"../{victim.name}/a.parquet",
        "s3-url": f"s3://{server.bucket}/{victim.prefix}a.parquet",
        "absolute": f"/{victim.prefix}a.parquet",
        "own-log": paths.log_file(0),
    }


NAMES = ["dotdot-dir", "dotdot-file", "s3-url", "absolute", "own-log"]


@pytest.mark.parametrize("name", NAMES)
def test_recovery_on_s3_deletes_no_key_outside_the_table(s3_server: S3Server, s3_root: str, name: str) -> None:
    table = make_table(s3_root)
    victim = VictimKeys(s3_server, s3_root)
    bad = bad_keys(victim, s3_server)[name]
    instant, own = plant_dead_instant(table, [bad])
    head = table.commit_log.head()
    error = attempt(lambda: LakeTable.open(s3_root).begin("commit", "write"))
    assert victim.untouched()
    assert error is not None and error.path == bad
    assert str(error).startswith(f"manifest {s3_root}/{paths.MARKERS}/{instant}/")
    reopened = LakeTable.open(s3_root)
    assert reopened.commit_log.head() == head and reopened.storage.exists(own)  # nothing recorded or deleted
    assert reopened.storage.exists(paths.log_file(0))


@pytest.mark.parametrize("name", NAMES)
def test_clean_on_s3_deletes_no_key_outside_the_table(s3_server: S3Server, s3_root: str, name: str) -> None:
    table = make_table(s3_root)
    victim = VictimKeys(s3_server, s3_root)
    append(table, "a")
    txn = table.begin("commit", "write")
    doomed = data_file(txn, "a")
    table.storage.write_bytes(doomed.path, b"PAR1")
    txn.commit(added=[doomed])
    txn = table.begin("replace", "rewrite")
    txn.commit(added=[data_file(txn, "a")], removed=[doomed.path])  # a tombstone clean would delete
    bad = bad_keys(victim, s3_server)[name].rstrip("/")
    added_at = plant_entry(table, added=(planted_file(bad),))
    plant_entry(table, removed=(bad,))
    error = attempt(lambda: LakeTable.open(s3_root).clean(retain_hours=0, force=True))
    assert victim.untouched()
    assert table.storage.exists(doomed.path) and table.storage.exists(paths.log_file(0))  # nothing deleted
    assert error is not None and str(error).startswith(f"log entry {s3_root}/{added_at} (added) names the path")


def test_the_storage_refuses_keys_outside_the_table(s3_server: S3Server, s3_root: str) -> None:
    victim = VictimKeys(s3_server, s3_root)
    storage = Storage(s3_root)
    for rel in (f"../{victim.name}/a.parquet", f"../{victim.name}", f"/{victim.prefix}a.parquet"):
        for method in ("delete", "delete_tree", "walk_files", "read_bytes", "exists"):
            with pytest.raises(LakeUnsafePath):
                getattr(storage, method)(rel)
    assert victim.untouched()
