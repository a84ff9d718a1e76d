"""Exactly-once consumption (issue 36, item 2): write and versioned_upsert jobs whose query reads an upstream's
changes since the position this downstream consumed, recorded in the downstream's own commit.

Real Spark (the session fixture), the in-process runner; crashes are exceptions raised at the named fault points or
at monkeypatched steps, and races are made to happen: the other run commits between this job's read and its commit.
After every story the downstream equals a full rebuild from the upstream's current snapshot."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.jobs.ops import write as write_op
from airflow_lake.lake import ColumnStats, DataFile, LakeCommitConflict, LakeTable, faults
from airflow_lake.lake.format.instants import markers_dir
from airflow_lake.lake.format.parquet_footers import file_facts
from airflow_lake.lake.sources import load as load_module

SCHEMA = "id BIGINT, v BIGINT, dt STRING"
DOUBLED = "SELECT id, v * 10 AS v, dt FROM ch WHERE _change_type = 'insert'"


class Lake:
    """An upstream table and the downstream tables that consume it."""

    def __init__(self, spark: Any, root: Path) -> None:
        self.spark = spark
        self.root = root
        self.up = LakeTable.create(str(root / "up"), {"schema": SCHEMA, "partition_by": ["dt"]})
        self.next_id = 0

    def add(self, n: int = 2, dt: str = "a") -> int:
        """Append `n` new rows (id = v) upstream; returns the upstream's new head."""
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return self.commit([(i, i) for i in ids], dt)

    def commit(self, rows: list[tuple[int, int]], dt: str, removed: tuple[str, ...] = ()) -> int:
        """One upstream commit of a file of (id, v) `rows` in partition `dt` (removing `removed`: a rewrite),
        written without Spark (a real Parquet file where our writer puts its files); returns its seq."""
        txn = self.up.begin("replace" if removed else "commit", "delete" if removed else "write")
        rel = f"data/{txn.instant}-t/dt={dt}/part-{txn.instant}-00000.c000.parquet"
        self.up.storage.touch(f"{markers_dir(txn.instant)}/{rel}")
        self.up.storage.makedirs(rel.rsplit("/", 1)[0])
        pq.write_table(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                                 "v": pa.array([r[1] for r in rows], pa.int64())}), self.up.storage.path(rel))
        count, size, stats = file_facts(self.up.storage.path(rel), {"id": "bigint", "v": "bigint"})
        added = DataFile(path=rel, partition={"dt": dt}, rows=count, bytes=size, instant=txn.instant,
                         stats={k: ColumnStats.from_list(v) for k, v in stats.items()})
        return txn.commit(added=[added], removed=removed).seq

    def files(self, dt: str) -> tuple[str, ...]:
        """The upstream's live files in partition `dt`."""
        return tuple(f.path for f in LakeTable.open(self.up.url).snapshot().files if f.partition == {"dt": dt})

    def head(self) -> int:
        return LakeTable.open(self.up.url).commit_log.head()

    def downstream(self, name: str = "down") -> str:
        return LakeTable.create(str(self.root / name), {"schema": SCHEMA, "partition_by": ["dt"]}).url

    def consume(self, down: str, request_id: str, query: str = DOUBLED, **upstream: Any) -> dict[str, Any]:
        source = {"query": query, "incremental": [{"view": "ch", "table": self.up.url, **upstream}]}
        return run(self.spark, "write", {"table": down, "source": source, "request_id": request_id})

    def rebuild(self) -> Counter[tuple[Any, ...]]:
        """What a full rebuild of a `DOUBLED` downstream from the upstream's current snapshot holds."""
        return Counter((r["id"], r["v"] * 10, r["dt"]) for r in LakeTable.open(self.up.url).to_arrow().to_pylist())


def rows(path: str) -> Counter[tuple[Any, ...]]:
    return Counter((r["id"], r["v"], r["dt"]) for r in LakeTable.open(path).to_arrow().to_pylist())


@pytest.fixture
def lake(spark: Any, tmp_path: Path) -> Lake:
    return Lake(spark, tmp_path)


def raising_at(point: str) -> Callable[[str], None]:
    real = faults.reach

    def reach(name: str) -> None:
        if name == point:
            raise RuntimeError(f"killed at {point}")
        real(name)
    return reach


def test_first_run_reads_everything_later_runs_only_changes_a_duplicate_run_nothing(lake: Lake) -> None:
    down = lake.downstream()
    lake.add(2)
    head = lake.add(2, "b")
    first = lake.consume(down, "run1")
    view = first["incremental"]["ch"]
    assert view["initial_files"] >= 2 and view == {"table": LakeTable.open(lake.up.url).canonical_url, "from": -1,
                                                   "to": head, "commits": 0, "initial_files": view["initial_files"],
                                                   "rows": 4, "query_ran": True}
    assert rows(down) == lake.rebuild() and first["rows_added"] == 4
    assert LakeTable.open(down).consumed() == {lake.up.identity(): head}

    head2 = lake.add(3)
    second = lake.consume(down, "run2")
    assert (second["incremental"]["ch"]["from"], second["incremental"]["ch"]["to"]) == (head, head2)
    assert second["rows_added"] == 3 and rows(down) == lake.rebuild()

    at = LakeTable.open(down).commit_log.head()
    again = lake.consume(down, "run3")  # the asset event delivered twice: a second DAG run
    assert again["noop"] is True and again["incremental"]["ch"]["query_ran"] is False
    assert LakeTable.open(down).commit_log.head() == at

    lake.up.alter_table([{"set_properties": {"clean.retain.hours": "48"}}])  # changes no data
    moved = lake.consume(down, "run4")
    assert moved["files_added"] == 0 and moved["positions_only"] is True
    assert moved["incremental"]["ch"]["query_ran"] is False and moved["incremental"]["ch"]["commits"] == 0
    assert LakeTable.open(down).consumed() == {lake.up.identity(): lake.head()}
    assert lake.consume(down, "run4")["already_committed"] is True  # its retry
    assert rows(down) == lake.rebuild()


def test_from_and_two_consumers_keep_their_own_positions(lake: Lake) -> None:
    first = lake.add(2)
    late, early = lake.downstream("late"), lake.downstream("early")
    lake.consume(early, "early1")
    second = lake.add(3)
    started = lake.consume(late, "late1", **{"from": first})  # a new consumer that starts after `first`
    assert started["incremental"]["ch"]["from"] == first and started["rows_added"] == 3
    assert sorted(i for i, _, _ in rows(late)) == [2, 3, 4]
    assert lake.consume(early, "early2")["incremental"]["ch"]["from"] == first  # its own position, not late's
    assert rows(early) == lake.rebuild()
    ident = lake.up.identity()
    assert LakeTable.open(early).consumed() == LakeTable.open(late).consumed() == {ident: second}
    lake.add(1)
    assert lake.consume(late, "late2", **{"from": 0})["incremental"]["ch"]["from"] == second  # `from`: first run only


def test_killed_before_the_query_during_the_write_and_after_the_commit_then_retried(
        lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    down = lake.downstream()
    lake.add(2)

    def killed(*_: Any, **__: Any) -> Any:
        raise RuntimeError("killed before the query")
    with monkeypatch.context() as patch:
        patch.setattr(load_module, "read_only_query", killed)
        with pytest.raises(RuntimeError, match="before the query"):
            lake.consume(down, "run1")
    lake.add(2)  # the upstream moves on before the retry
    assert lake.consume(down, "run1")["rows_added"] == 4 and rows(down) == lake.rebuild()

    lake.add(2)
    with monkeypatch.context() as patch:
        patch.setattr(faults, "reach", raising_at("during_place"))  # the files are written, not committed
        with pytest.raises(RuntimeError, match="during_place"):
            lake.consume(down, "run2")
    assert rows(down) != lake.rebuild()  # nothing of it committed
    assert lake.consume(down, "run2")["rows_added"] == 2 and rows(down) == lake.rebuild()

    head = lake.add(2)
    with monkeypatch.context() as patch:
        patch.setattr(faults, "reach", raising_at("after_commit"))  # committed; the XCom never sent
        with pytest.raises(RuntimeError, match="after_commit"):
            lake.consume(down, "run3")
    assert rows(down) == lake.rebuild()
    lake.add(2)  # more upstream changes: the retry must neither redo run3's nor take these
    retry = lake.consume(down, "run3")
    assert retry["already_committed"] is True and retry["incremental"]["ch"]["to"] == head
    assert LakeTable.open(down).consumed() == {lake.up.identity(): head}
    assert lake.consume(down, "run4")["rows_added"] == 2
    assert rows(down) == lake.rebuild()


def test_a_second_run_that_commits_between_this_runs_read_and_commit(
        lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    down = lake.downstream()
    lake.add(2)
    real_write = write_op.lake_write.write
    other: dict[str, Any] = {}

    def write(*args: Any, **kwargs: Any) -> Any:
        if not other:  # run A has read its window; now run B takes it (and a change that came after) first
            other["b"] = {}
            lake.add(2)
            other["b"] = lake.consume(down, "runB")
        return real_write(*args, **kwargs)
    monkeypatch.setattr(write_op.lake_write, "write", write)
    with pytest.raises(LakeCommitConflict, match="another run consumed them"):
        lake.consume(down, "runA")
    assert other["b"]["incremental"]["ch"]["from"] == -1 and rows(down) == lake.rebuild()
    taken = other["b"]["incremental"]["ch"]["to"]
    lake.add(1)
    retry = lake.consume(down, "runA")  # Airflow's retry of A: only what B left
    assert retry["incremental"]["ch"]["from"] == taken and retry["rows_added"] == 1
    assert rows(down) == lake.rebuild()  # no change twice, none skipped


def test_the_tables_view_of_an_upstream_is_read_at_the_pinned_snapshot_and_a_retry_is_still_a_retry(
        lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    down = lake.downstream()
    lake.add(3)
    # each change row with the number of upstream rows at the snapshot the query read
    query = "SELECT c.id, (SELECT count(*) FROM everything) AS v, c.dt FROM ch c WHERE _change_type = 'insert'"
    source = {"query": query, "tables": {"everything": lake.up.url},
              "incremental": [{"view": "ch", "table": lake.up.url}]}
    real = write_op.resolve_tables

    def resolve(*args: Any, **kwargs: Any) -> Any:
        lake.add(2)  # lands after the window was fixed, before the tables are resolved
        return real(*args, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(write_op, "resolve_tables", resolve)
        first = run(lake.spark, "write", {"table": down, "source": source, "request_id": "r1"})
    assert first["rows_added"] == 3 and {v for _, v, _ in rows(down)} == {3}  # not 5
    lake.add(1)  # the upstream (the `tables` view's too) moved: a retry is still the same request
    assert run(lake.spark, "write", {"table": down, "source": source, "request_id": "r1"})["already_committed"]
    second = run(lake.spark, "write", {"table": down, "source": source, "request_id": "r2"})
    assert second["rows_added"] == 3 and sorted(rows(down).elements())[-1][1] == 6


def test_a_restore_of_the_downstream_consumes_again_what_it_undid(lake: Lake) -> None:
    down = lake.downstream()
    lake.add(2)
    lake.consume(down, "run1")
    kept = LakeTable.open(down).commit_log.head()
    lake.add(2)
    lake.consume(down, "run2")
    LakeTable.open(down).restore(to_seq=kept)
    assert rows(down) != lake.rebuild()
    again = lake.consume(down, "run3")
    assert again["rows_added"] == 2 and rows(down) == lake.rebuild()


def test_an_upsert_consumer_applies_inserts_updates_and_deletes(lake: Lake) -> None:
    down = LakeTable.create(str(lake.root / "keyed"), {"schema": "id BIGINT NOT NULL, v BIGINT, dt STRING",
                                                       "primary_key": ["id"],
                                                       "bucket": {"columns": ["id"], "count": 2}}).url
    # later commits win; within a commit an insert wins over a delete of the same key (a rewritten row)
    query = ("SELECT id, v, dt, _commit_seq * 2 + IF(_change_type = 'delete', 0, 1) AS ver, "
             "_change_type = 'delete' AS _delete FROM ch")
    spec = {"table": down, "version_column": "ver",
            "source": {"query": query, "incremental": [{"view": "ch", "table": lake.up.url}]}}

    def merged() -> Counter[tuple[Any, ...]]:
        return rows(down)

    def upstream() -> Counter[tuple[Any, ...]]:
        return Counter((r["id"], r["v"], r["dt"]) for r in LakeTable.open(lake.up.url).to_arrow().to_pylist())
    lake.add(3)
    lake.add(2, "b")
    assert run(lake.spark, "versioned_upsert", {**spec, "request_id": "u1"})["rows"] == 5
    assert merged() == upstream()
    # rewrites, as an overwrite or a copy-on-write delete makes them: partition a with row 0 changed, row 1
    # dropped and row 2 carried over; partition b without row 3
    lake.commit([(0, 100), (2, 2)], "a", removed=lake.files("a"))
    lake.commit([(4, 4)], "b", removed=lake.files("b"))
    second = run(lake.spark, "versioned_upsert", {**spec, "request_id": "u2"})
    assert second["incremental"]["ch"]["commits"] == 2 and merged() == upstream()
    assert LakeTable.open(down).consumed() == {lake.up.identity(): lake.head()}


def test_an_upsert_that_repeats_an_earlier_one_still_records_its_positions(lake: Lake) -> None:
    down = LakeTable.create(str(lake.root / "keyed"), {"schema": "id BIGINT NOT NULL, v BIGINT, dt STRING",
                                                       "primary_key": ["id"],
                                                       "bucket": {"columns": ["id"], "count": 2}}).url
    # the changes only trigger the query, which upserts the same rows at the same version every time
    spec = {"table": down, "version": 5,
            "source": {"query": "SELECT id, v, dt FROM everything WHERE id < 2 AND EXISTS (SELECT 1 FROM ch)",
                       "tables": {"everything": lake.up.url},
                       "incremental": [{"view": "ch", "table": lake.up.url}]}}
    lake.add(2)
    assert run(lake.spark, "versioned_upsert", {**spec, "request_id": "u1"})["rows"] == 2
    head = lake.add(2)
    repeated = run(lake.spark, "versioned_upsert", {**spec, "request_id": "u2"})
    assert repeated["files_added"] == 0 and repeated["duplicate_of"] == 1
    assert LakeTable.open(down).consumed() == {lake.up.identity(): head}  # not read again by the next run
    assert rows(down) == Counter({(0, 0, "a"): 1, (1, 1, "a"): 1})


def test_a_primary_key_upstream_consumed_by_key(spark: Any, tmp_path: Path) -> None:
    keyed = {"schema": "k BIGINT NOT NULL, v BIGINT", "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2}}
    up = LakeTable.create(str(tmp_path / "up"), keyed).url
    down = LakeTable.create(str(tmp_path / "down"), keyed).url

    def upsert(values: str) -> None:  # rows (k, v, version, delete)
        query = f"SELECT k, v, ver, del AS _delete FROM VALUES {values} AS t(k, v, ver, del)"
        run(spark, "versioned_upsert", {"table": up, "version_column": "ver", "source": {"query": query}})

    # net changes per key: an update is a pre- and a post-image (the post-image wins), a delete deletes
    query = ("SELECT k, v, _commit_seq * 2 + IF(_change_type = 'delete', 0, 1) AS ver, "
             "_change_type = 'delete' AS _delete FROM ch WHERE _change_type <> 'update_preimage'")
    spec = {"table": down, "version_column": "ver",
            "source": {"query": query, "incremental": [{"view": "ch", "table": up}]}}

    def merged(path: str) -> list[tuple[Any, ...]]:
        return sorted((r["k"], r["v"]) for r in LakeTable.open(path).to_arrow().to_pylist())
    upsert("(1, 10, 10, false), (2, 20, 10, false), (3, 30, 10, false)")
    run(spark, "versioned_upsert", {**spec, "request_id": "c1"})
    assert merged(down) == merged(up) == [(1, 10), (2, 20), (3, 30)]
    upsert("(1, 11, 12, false), (2, 21, 11, false), (3, CAST(NULL AS BIGINT), 13, true)")
    upsert("(1, 99, 9, false), (4, 40, 9, false)")  # late: key 1 keeps version 12's value, key 4 is new
    second = run(spark, "versioned_upsert", {**spec, "request_id": "c2"})
    assert second["incremental"]["ch"]["commits"] == 2
    assert merged(down) == merged(up) == [(1, 11), (2, 21), (4, 40)]
    assert LakeTable.open(down).consumed() == {LakeTable.open(up).identity(): 3}
