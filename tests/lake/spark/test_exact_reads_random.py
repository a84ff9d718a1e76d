"""Every read path returns exactly the snapshot's rows (issue 33, item 1), property-style: a seeded random run of
appends, overwrites, deletes, upserts, versioned deletes, compactions, clusterings, bucket rewrites, restores and
cleans — cleans killed between their entry and their deletes, and retried — with stray Parquet files (copies of real
data files under names that live files carry in other directories) dropped into every directory the tables use after
every step. After each step, the plain and bucketed Spark reads, the merged read of the primary-key table,
`to_arrow` and a time-travel read of an earlier snapshot equal a Python oracle."""

from __future__ import annotations

import itertools
import os
import posixpath
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.buckets.rewrite import bucket_rewrite
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spark.file_writer import write_dataframe
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert

SEED = 33
EXTRA_STEPS = 3  # random steps after a shuffle of every operation (15): 18 steps
SCHEMA = "id BIGINT, v BIGINT, dt STRING"
PK_SCHEMA = "id BIGINT NOT NULL, v BIGINT, dt STRING"
DAYS = ("a", "b")
Row = tuple[Any, ...]


class Killed(Exception):
    """The clean's process dying at its first delete, after its entry landed."""


class Run:
    """The two tables, the oracle of each (rows per snapshot), and the random choices."""

    def __init__(self, spark: Any, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spark, self.monkeypatch, self.rng = spark, monkeypatch, random.Random(SEED)
        self.plain = LakeTable.create(str(root / "plain"), {"schema": SCHEMA, "partition_by": ["dt"],
                                                            "bucket": {"columns": ["id"], "count": 2}})
        self.pk = LakeTable.create(str(root / "pk"), {"schema": PK_SCHEMA, "partition_by": ["dt"],
                                                      "primary_key": ["id"], "bucket": {"columns": ["id"], "count": 2}})
        self.rows: dict[int, list[Row]] = {0: []}  # plain: seq -> rows
        self.keys: dict[int, dict[Row, list[tuple[int, Row | None]]]] = {0: {}}  # pk: seq -> (id, dt) -> versions
        self.ids = itertools.count(1)
        self.versions = list(range(1, 200))
        self.rng.shuffle(self.versions)  # upserts arrive out of version order
        self.killed: list[tuple[LakeTable, str]] = []
        self.cleans = itertools.count()
        self.kills = 0

    # -- oracle --------------------------------------------------------------------------------------
    def note_plain(self, rows: list[Row]) -> None:
        self.rows[self.plain.snapshot().seq] = sorted(rows)

    def note_pk(self, keys: dict[Row, list[tuple[int, Row | None]]]) -> None:
        self.keys[self.pk.snapshot().seq] = keys

    def plain_rows(self, seq: int | None = None) -> list[Row]:
        return self.rows[self._at(self.rows, self.plain, seq)]

    def pk_rows(self, seq: int | None = None) -> list[Row]:
        """Per key the row of the highest version above its highest delete (None marks a delete)."""
        out = []
        for history in self.keys[self._at(self.keys, self.pk, seq)].values():
            deleted = max((v for v, row in history if row is None), default=None)
            alive = [(v, row) for v, row in history if row is not None and (deleted is None or v > deleted)]
            if alive:
                out.append(max(alive, key=lambda item: item[0])[1])
        return sorted(out)

    @staticmethod
    def _at(history: dict[int, Any], table: LakeTable, seq: int | None) -> int:
        seq = table.snapshot().seq if seq is None else seq
        return max(s for s in history if s <= seq)  # entries that change no row (clean) keep the rows before

    # -- operations on the plain table ---------------------------------------------------------------
    def new_rows(self, n: int, day: str | None = None) -> list[Row]:
        return [(next(self.ids), self.rng.randrange(1000), day or self.rng.choice(DAYS)) for _ in range(n)]

    def append(self) -> None:
        rows = self.new_rows(self.rng.randint(4, 9))
        txn = self.plain.begin("commit", "write")  # one task: every partition directory gets the same names
        df = self.spark.createDataFrame(rows, SCHEMA).coalesce(1)
        with session_conf(self.spark, {"spark.sql.files.maxRecordsPerFile": "2"}):
            files = write_dataframe(df, self.plain.storage, self.plain.spec, txn.instant, bucket_shuffle=False)
        txn.commit(added=files)
        self.note_plain(self.plain_rows() + rows)

    def overwrite(self) -> None:
        day = self.rng.choice(DAYS)
        rows = self.new_rows(self.rng.randint(2, 5), day)
        self.plain.write(self.spark.createDataFrame(rows, SCHEMA), mode="overwrite", partitions=[{"dt": day}])
        self.note_plain([r for r in self.plain_rows() if r[2] != day] + rows)

    def delete(self) -> None:
        if not self.plain_rows():
            return self.append()
        victim = self.rng.choice(self.plain_rows())
        self.plain.delete(self.spark, filters=[("id", "=", victim[0])])
        self.note_plain([r for r in self.plain_rows() if r[0] != victim[0]])
        return None

    def cluster(self) -> None:
        plan = run(None, "schedule_clustering", {"table": self.plain.url, "layout": "LINEAR", "sort_columns": ["v"],
                                                 "small_file_limit_bytes": 1 << 30, "max_bytes_per_group": 1 << 30})
        if plan.get("plan_id"):
            run(self.spark, "execute_clustering", {"table": self.plain.url, "plan_id": plan["plan_id"]})
            self.note_plain(self.plain_rows())

    def rebucket(self) -> None:
        count = 4 if self.plain.spec.bucket is not None and self.plain.spec.bucket.count == 2 else 2
        if bucket_rewrite(self.plain, self.spark, bucket={"columns": ["id"], "count": count}) is not None:
            self.note_plain(self.plain_rows())

    def restore(self) -> None:
        oldest = max(self.plain.state().cleaned_before, 1)
        seq = self.rng.randint(oldest, self.plain.snapshot().seq)
        rows = self.plain_rows(seq)
        if self.plain.restore(to_seq=seq).entry is not None:
            self.note_plain(rows)

    # -- operations on the primary-key table ----------------------------------------------------------
    def upsert(self) -> None:
        current = list(self.keys[self._at(self.keys, self.pk, None)])
        picked = [*self.rng.sample(current, min(len(current), 2)), (next(self.ids), self.rng.choice(DAYS))]
        version = self.versions.pop()
        rows = [(k, self.rng.randrange(1000), day) for k, day in picked]
        versioned_upsert(self.pk, self.spark.createDataFrame(rows, PK_SCHEMA), version=version)
        keys = {k: list(h) for k, h in self.keys[self._at(self.keys, self.pk, None)].items()}
        for row in rows:
            keys.setdefault((row[0], row[2]), []).append((version, row))
        self.note_pk(keys)

    def delete_keys(self) -> None:
        current = list(self.keys[self._at(self.keys, self.pk, None)])
        if not current:
            return self.upsert()
        key = self.rng.choice(current)
        version = self.versions.pop()
        self.pk.delete_keys(self.spark, self.spark.createDataFrame([key], "id BIGINT, dt STRING"), version=version)
        keys = {k: list(h) for k, h in self.keys[self._at(self.keys, self.pk, None)].items()}
        keys[key].append((version, None))
        self.note_pk(keys)
        return None

    def compact(self) -> None:
        if compact(self.pk, self.spark).entry is not None:
            self.note_pk(self.keys[self._at(self.keys, self.pk, None)])

    # -- cleans --------------------------------------------------------------------------------------
    def killed_clean(self) -> None:
        holding = [t for t in (self.plain, self.pk) if t.state().tombstones]  # removed files to clean
        if not holding:
            self.delete()  # (a delete replaces a file of the plain table)
        table = self.rng.choice(holding or [self.plain])
        request_id = f"clean-{next(self.cleans)}"

        def die(_storage: Storage, rel: str) -> bool:
            raise Killed(rel)

        head = table.commit_log.head()
        with self.monkeypatch.context() as patch:
            patch.setattr(Storage, "delete", die)
            try:
                table.clean(0, request_id=request_id, force=True)
            except Killed:
                self.killed.append((table, request_id))
                self.kills += 1
        if table.commit_log.head() != head:  # (no entry: nothing to clean) a clean changes no row
            assert table.commit_log.read(table.commit_log.head()).operation == "clean"

    def retried_clean(self) -> None:
        if not self.killed:
            return self.killed_clean()
        table, request_id = self.killed.pop(0)
        entry = table.clean(0, request_id=request_id, force=True)
        assert entry is not None
        assert not any(os.path.exists(table.storage.path(p)) for p in entry.metadata["deleted"])
        return None

    # -- debris --------------------------------------------------------------------------------------
    def drop_strays(self, table: LakeTable) -> None:
        """A copy of a real data file into every directory of the table that holds Parquet files, under the name
        of a live file of another directory (one no file there has)."""
        root = Path(table.storage.path("data"))
        directories = sorted({p.parent for p in root.rglob("*.parquet")})
        live = [f.path for f in table.snapshot().files]
        for directory in directories:
            there = {p.name for p in directory.iterdir()}
            names = sorted({posixpath.basename(p) for p in live} - there)
            if names:
                source = table.storage.path(self.rng.choice(live))
                shutil.copyfile(source, directory / self.rng.choice(names))

    # -- reads ---------------------------------------------------------------------------------------
    def check(self, table: LakeTable) -> None:
        def rows(df: Any) -> list[Row]:
            return sorted(tuple(r) for r in df.select("id", "v", "dt").collect())

        def arrow(seq: int | None = None) -> list[Row]:
            got = table.to_arrow(as_of=seq, columns=["id", "v", "dt"]).to_pydict()
            return sorted(zip(got["id"], got["v"], got["dt"], strict=True))

        oracle = self.plain_rows if table is self.plain else self.pk_rows
        expected = oracle()
        got = {"read": rows(table.read(self.spark)), "to_arrow": arrow()}  # bucketed / merged, and pyarrow
        if table is self.plain:
            got["plain"] = rows(table.scan().to_df(self.spark))
        earlier = self.rng.randint(max(table.state().cleaned_before, 1), table.snapshot().seq)
        got["time travel"], expected_then = rows(table.read(self.spark, as_of=earlier)), oracle(earlier)
        assert {k: v == (expected_then if k == "time travel" else expected) for k, v in got.items()} == \
            dict.fromkeys(got, True), (earlier, {k: (v, expected) for k, v in got.items()})


def test_random_operations_with_strays_and_killed_cleans_read_exactly_the_snapshot(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = Run(spark, tmp_path, monkeypatch)
    plain_ops: list[Callable[[], None]] = [state.append, state.append, state.overwrite, state.delete, state.delete,
                                           state.cluster, state.rebucket, state.restore]
    pk_ops: list[Callable[[], None]] = [state.upsert, state.upsert, state.delete_keys, state.compact]
    state.append()
    state.upsert()
    every = [*plain_ops, *pk_ops, state.killed_clean, state.killed_clean, state.retried_clean]
    steps = state.rng.sample(every, len(every)) + state.rng.choices(every, k=EXTRA_STEPS)  # each kind at least once
    done: list[str] = []
    for op in steps:
        op()
        done.append(op.__name__)
        changed = state.pk if op in pk_ops else state.plain if op in plain_ops else None
        for table in (state.plain, state.pk):
            state.drop_strays(table)
            if changed is None or table is changed:
                state.check(table)
    assert state.kills >= 2, done  # cleans that died with files to delete left behind
