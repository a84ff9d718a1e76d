"""A snapshot read reads exactly the snapshot's live files (issue 33, item 1), whatever else lies in the directories
it lists: here the files of a clean killed between its log entry (which forgets their tombstones) and its deletes,
whose names repeat live names of the same write in other partition directories."""

from __future__ import annotations

import posixpath
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark.plan_text import plan_text, shuffles
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.table import LakeTable
from tests.lake.buckets.bucket_helpers import PLAN_CONF
from tests.lake.spark.write_helpers import one_task_write

SCHEMA = "id BIGINT, v BIGINT, dt STRING"
ROWS = [(i, i * 10, day) for day, ids in (("a", range(0, 100)), ("b", range(100, 200))) for i in ids]


class Killed(Exception):
    """The clean's process dying at its first delete (after its entry landed)."""



def killed_clean(table: LakeTable, monkeypatch: pytest.MonkeyPatch, request_id: str) -> None:
    """A clean (retention 0) whose process dies at its first delete, after its entry landed."""
    def die(self: Storage, rel: str) -> bool:
        raise Killed(rel)

    with monkeypatch.context() as patch:
        patch.setattr(Storage, "delete", die)
        with pytest.raises(Killed):
            table.clean(0, request_id=request_id, force=True)
    assert table.commit_log.read(table.commit_log.head()).operation == "clean"


def every_read(spark: Any, table: LakeTable, as_of: int | None = None, *, pruned: bool = True
               ) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of every read path of the snapshot, sorted (`pruned`: with partition pruning and stats skipping)."""
    def rows(df: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in df.select("id", "v", "dt").collect())

    view = f"exact_{table.snapshot(as_of).seq}"
    table.register(spark, view, as_of=as_of)
    arrow = table.to_arrow(as_of=as_of, columns=["id", "v", "dt"])
    got = {
        "read": rows(table.read(spark, as_of=as_of)),  # bucketed where the table is
        "plain": rows(table.scan(as_of=as_of).to_df(spark)),
        "sql": rows(spark.sql(f"SELECT * FROM {view}")),
        "to_arrow": sorted(zip(*arrow.to_pydict().values(), strict=True)),
    }
    if pruned:
        got["one day"] = rows(table.read(spark, as_of=as_of, filters=[("dt", "=", "a")])) + rows(
            table.read(spark, as_of=as_of, filters=[("dt", "=", "b")]))  # partition pruning, one directory set
        got["stats"] = sorted(rows(table.read(spark, as_of=as_of, filters=[("id", "<", 50)])) + rows(
            table.read(spark, as_of=as_of, filters=[("id", ">=", 50)])))  # files skipped by their stats
    return got


@pytest.mark.parametrize("bucketed", [False, True], ids=["plain", "bucketed"])
def test_a_clean_killed_between_its_entry_and_its_deletes_leaves_every_read_exact(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bucketed: bool) -> None:
    spec: dict[str, Any] = {"schema": SCHEMA, "partition_by": ["dt"]}
    if bucketed:
        spec["bucket"] = {"columns": ["id"], "count": 4}
    table = LakeTable.create(str(tmp_path / "t"), spec)
    one_task_write(spark, table, ROWS, SCHEMA)
    assert all(n == 2 for n in Counter(posixpath.basename(f.path) for f in table.snapshot().files).values())
    deleted = table.delete(spark, filters=[("id", "=", 1)])  # rewrites one file of day a
    assert deleted is not None
    replaced = list(deleted.removed)
    killed_clean(table, monkeypatch, "clean-1")
    assert all(Path(table.storage.path(p)).exists() for p in replaced)  # on disk, and no longer tombstoned
    expected = sorted(r for r in ROWS if r[0] != 1)

    for as_of in (None, deleted.seq):  # the latest snapshot, and time travel to the delete
        got = every_read(spark, table, as_of, pruned=as_of is None)
        assert {path: rows == expected for path, rows in got.items()} == dict.fromkeys(got, True), {
            path: sorted((Counter(rows) - Counter(expected)).elements())[:5] for path, rows in got.items()}
    # a query over the table (copied to another table), and the table overwritten from itself: a read pinned
    # to the job's base
    copy = str(tmp_path / "copy")
    LakeTable.create(copy, {"schema": SCHEMA})
    query = {"query": "SELECT id, v, dt FROM t", "tables": {"t": {"path": table.url}}}
    run(spark, "write", {"table": copy, "source": query})
    assert sorted(tuple(r) for r in LakeTable.open(copy).read(spark).collect()) == expected
    run(spark, "write", {"table": table.url, "mode": "overwrite", "source": query})
    assert every_read(spark, table)["read"] == expected

    # the retry of the clean (same request id) finishes the deletes of its first run
    assert table.clean(0, request_id="clean-1", force=True).instant == \
        table.commit_log.read(deleted.seq + 1).instant
    assert not any(Path(table.storage.path(p)).exists() for p in replaced)


def test_the_clean_job_retry_finishes_the_deletes_of_its_first_run(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": SCHEMA, "partition_by": ["dt"]})
    one_task_write(spark, table, ROWS, SCHEMA)
    deleted = table.delete(spark, filters=[("id", "=", 1)])
    assert deleted is not None
    killed_clean(table, monkeypatch, "clean-job")
    first = run(None, "clean", {"table": table.url, "retain_hours": 0, "force": True, "request_id": "clean-job"})
    assert first["already_committed"] is True and first["files_deleted"] == len(deleted.removed)
    assert not any(Path(table.storage.path(p)).exists() for p in deleted.removed)


def test_files_dropped_into_live_directories_under_live_names_are_never_read(spark: Any, tmp_path: Path) -> None:
    """Files no entry ever named (a dead writer's, a hand copy) under the name of a live file of another write
    directory: not read by any path, and the bucketed scan stays bucketed (pruned to one bucket, a self-join with no
    Exchange)."""
    table = LakeTable.create(str(tmp_path / "t"), {"schema": SCHEMA, "partition_by": ["dt"],
                                                   "bucket": {"columns": ["id"], "count": 4}})
    one_task_write(spark, table, ROWS[:100], SCHEMA)  # day a
    one_task_write(spark, table, ROWS[100:], SCHEMA)  # day b, another write directory
    day_a = [f for f in table.snapshot().files if f.partition["dt"] == "a"]
    day_b = [f for f in table.snapshot().files if f.partition["dt"] == "b"]
    beside = Path(table.storage.path(day_a[0].path)).parent
    for source in day_b[1:]:  # day b's rows beside day a's files, under their live names in day b
        shutil.copyfile(table.storage.path(source.path), beside / posixpath.basename(source.path))
    # and a file that is not Parquet at all under a live name: a read that opened it would fail, so every read
    # passing shows that Spark prunes the files not named at planning, before it opens any
    (beside / posixpath.basename(day_b[0].path)).write_bytes(b"not parquet")
    got = every_read(spark, table)
    assert got == dict.fromkeys(got, sorted(ROWS))
    with session_conf(spark, PLAN_CONF):
        df = table.read(spark)
        assert "SelectedBucketsCount: 1 out of 4" in plan_text(df.where("id = 5"))
        assert shuffles(plan_text(df.alias("l").join(df.alias("r"), ["id", "dt"]))) == 0
        assert df.where("id = 5").count() == 1
