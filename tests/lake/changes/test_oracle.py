"""The oracle of `LakeTable.changes` (issue 36): over random sequences of commits, for pairs of snapshots a < b,
snapshot(a) with changes(a, b) applied equals snapshot(b) — as multisets of rows for plain tables, by key for
primary-key tables — and the window (c-1, c) of each data-free commit gives no rows.

The snapshots are read without Spark (`to_arrow`: pyarrow, the merge of `upsert.arrow_merge`), an implementation
independent of the change read; the changes with Spark."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs.runner import run
from airflow_lake.lake.changes.window import change_window, changes_data
from airflow_lake.lake.table import LakeTable

DAYS = ("d1", "d2", "d3")
BIG = 10**12  # every file is "small" for clustering, every group fits


def rows_of(table: LakeTable, seq: int, columns: list[str]) -> list[tuple[Any, ...]]:
    """Snapshot `seq` as tuples in `columns` (a column the snapshot lacks reads None, as a read in the end
    snapshot's columns has it)."""
    return [tuple(r.get(c) for c in columns) for r in table.to_arrow(as_of=seq).to_pylist()]


CHANGE_COLUMNS = ("_change_type", "_commit_seq", "_commit_time")


def changes_of(spark: Any, table: LakeTable, windows: list[tuple[int, int]], **kwargs: Any
               ) -> dict[tuple[int, int], tuple[list[str], list[dict[str, Any]]]]:
    """Per window, its columns (the end snapshot's) and its changes as dicts, all collected in one Spark job (a
    union tagged by window: one job's overhead, not one per window)."""
    from pyspark.sql import functions as F

    frames = [table.changes(spark, a, b, **kwargs).withColumn("window", F.lit(i)) for i, (a, b) in
              enumerate(windows)]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    out = {w: ([c for c in frame.columns if c not in (*CHANGE_COLUMNS, "window")], []) for w, frame in
           zip(windows, frames, strict=True)}
    for row in union.collect():
        columns, rows = out[windows[row["window"]]]
        rows.append({c: row[c] for c in (*columns, *CHANGE_COLUMNS)})
    return out


def data_free_windows_give_nothing(spark: Any, table: LakeTable) -> int:
    """Assert the window (c-1, c) of every data-free commit is empty and reads as no rows; how many there were."""
    checked = 0
    for entry in table.entries_since(0):
        if changes_data(entry):
            continue
        window = change_window(table, entry.seq - 1, entry.seq)
        assert window.empty and window.skipped == (entry.seq,), (entry.operation, window)
        checked += 1
    free = [(e.seq - 1, e.seq) for e in table.entries_since(0) if not changes_data(e)]
    assert not any(rows for _, rows in changes_of(spark, table, free).values())
    return checked


def pairs(rnd: random.Random, head: int, count: int) -> list[tuple[int, int]]:
    """`count` random windows a < b of snapshots 0..head (and the whole history, and from the empty table)."""
    every = [(a, b) for a in range(-1, head + 1) for b in range(max(a, 0) + 1, head + 1)]
    chosen = {(0, head), (-1, head)}
    chosen.update(rnd.sample(every, min(count, len(every))))
    return sorted(chosen)


# -- plain tables ----------------------------------------------------------------------------------------------------
def plain_frame(spark: Any, rows: Iterable[tuple[Any, ...]], columns: list[str]) -> Any:
    types = {"id": "bigint", "v": "string", "dt": "string", "w": "string"}
    return spark.createDataFrame(list(rows), ", ".join(f"{c} {types[c]}" for c in columns))


def random_plain_commits(spark: Any, table: LakeTable, rnd: random.Random, steps: int) -> None:
    """Appends (exact duplicates too), partition overwrites that keep some rows, deletes, clustering, a bucket
    rewrite, restores, an added column and a property change, in a random order."""
    next_id = 0

    def new_rows(count: int, columns: list[str]) -> list[tuple[Any, ...]]:
        nonlocal next_id
        out = []
        for _ in range(count):
            next_id += 1
            row = {"id": next_id % 7, "v": f"v{next_id % 5}", "dt": rnd.choice(DAYS), "w": f"w{next_id % 3}"}
            out.append(tuple(row[c] for c in columns))
        return out

    kinds = ["overwrite", "delete", "cluster", "bucket", "restore", "alter"]  # each once, in a random order
    kinds += rnd.choices(["append", "overwrite", "delete", "alter"], k=steps - len(kinds) - 2)
    rnd.shuffle(kinds)
    for step, kind in enumerate(["append", "append", *kinds]):
        columns = table.spec.column_names
        live = rows_of(table, table.commit_log.head(), columns)
        if kind == "append":
            batch = new_rows(rnd.randint(3, 8), columns)
            if live:
                batch += rnd.sample(live, min(2, len(live)))  # rows the table holds already: a multiset
            table.write(plain_frame(spark, batch, columns))
        elif kind == "overwrite":
            day = rnd.choice(DAYS)
            index = columns.index("dt")
            kept = [r for r in live if r[index] == day and rnd.random() < 0.6]  # carried over
            fresh = [(*r[:index], day, *r[index + 1:]) for r in new_rows(rnd.randint(0, 3), columns)]
            table.write(plain_frame(spark, kept + fresh, columns), mode="overwrite", partitions=[{"dt": day}])
        elif kind == "delete":
            table.delete(spark, filters=[("id", "in", rnd.sample(range(7), 2))])
        elif kind == "cluster":
            plan = run(None, "schedule_clustering", {"table": table.url, "small_file_limit_bytes": BIG,
                                                     "max_bytes_per_group": BIG, "min_commits": 0, "layout": "LINEAR",
                                                     "sort_columns": ["v"]})
            if plan.get("plan_id"):
                run(spark, "execute_clustering", {"table": table.url, "plan_id": plan["plan_id"]})
        elif kind == "bucket":
            spec = table.spec
            bucket = {"columns": ["id"], "count": 2} if spec.bucket is None else None
            from airflow_lake.lake.buckets.rewrite import bucket_rewrite

            bucket_rewrite(table, spark, partitions=[{"dt": rnd.choice(DAYS)}], bucket=bucket)
        elif kind == "restore":
            head = table.commit_log.head()
            table.restore(to_seq=rnd.randint(1, head - 1))
        elif kind == "alter":
            if "w" not in columns:
                table.alter_table([{"add": "w", "type": "string"}])
            else:
                table.alter_table([{"set_properties": {"user.note": f"step {step}"}}])


def apply_plain(start: list[tuple[Any, ...]], changes: list[dict[str, Any]], columns: list[str]
                ) -> Counter[tuple[Any, ...]]:
    table = Counter(start)
    for row in changes:
        values = tuple(row[c] for c in columns)
        if row["_change_type"] == "insert":
            table[values] += 1
        else:
            assert row["_change_type"] == "delete", row
            table[values] -= 1
    assert all(n >= 0 for n in table.values()), "a delete of a row the start did not hold"
    return +table


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plain_table_snapshot_plus_changes_is_the_later_snapshot(spark: Any, tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT, v STRING, dt STRING",
                                                   "partition_by": ["dt"]})
    random_plain_commits(spark, table, rnd, steps=9 if seed == 0 else 8)
    head = table.commit_log.head()
    operations = {e.operation for e in table.entries_since(0)}
    assert {"write", "delete", "execute_clustering", "bucket_rewrite", "restore", "alter_table"} <= operations
    windows = pairs(rnd, head, 6 if seed == 0 else 2)
    for (a, b), (columns, changes) in changes_of(spark, table, windows).items():
        start = [] if a == -1 else rows_of(table, a, columns)
        expected = Counter(rows_of(table, b, columns))
        assert apply_plain(start, changes, columns) == expected, (a, b, operations)
        assert all(max(a, 0) < r["_commit_seq"] <= b for r in changes) or a == -1
    assert data_free_windows_give_nothing(spark, table) >= 1


# -- primary-key tables ----------------------------------------------------------------------------------------------
PK_COLUMNS = ["k", "a", "n", "dt"]


def random_keyed_commits(spark: Any, table: LakeTable, rnd: random.Random, steps: int) -> None:
    """Upserts with versions out of order (partial ones too: only some columns), versioned deletes, compactions
    and restores, in a random order."""
    from airflow_lake.lake.upsert.compact import compact
    from airflow_lake.lake.upsert.upsert import versioned_upsert

    versions = rnd.sample(range(1, 100), steps)  # each upsert and delete its own version, in a random order
    kinds = ["delete", "compact", "restore", "partial"]
    kinds += rnd.choices(["upsert", "upsert", "delete", "compact"], k=steps - len(kinds) - 2)
    rnd.shuffle(kinds)
    for kind, version in zip(["upsert", "upsert", *kinds], versions, strict=True):
        keys = rnd.sample(range(12), rnd.randint(2, 6))
        day = rnd.choice(DAYS[:2])
        if kind == "upsert":
            rows = [(k, f"a{version}_{k}", version * 10 + k, day) for k in keys]
            versioned_upsert(table, spark.createDataFrame(rows, "k bigint, a string, n bigint, dt string"),
                             version=version)
        elif kind == "partial":  # only `a`: `n` keeps what it had
            versioned_upsert(table, spark.createDataFrame([(k, f"p{version}", day) for k in keys],
                                                          "k bigint, a string, dt string"), version=version)
        elif kind == "delete":
            table.delete_keys(spark, spark.createDataFrame([(k, day) for k in keys], "k bigint, dt string"),
                              version=version)
        elif kind == "compact":
            compact(table, spark)
        elif kind == "restore":
            table.restore(to_seq=rnd.randint(1, table.commit_log.head() - 1))


def by_key(rows: Iterable[tuple[Any, ...]]) -> dict[tuple[Any, Any], tuple[Any, ...]]:
    return {(r[3], r[0]): r for r in rows}


def apply_keyed(start: dict[tuple[Any, Any], tuple[Any, ...]], changes: list[dict[str, Any]]
                ) -> dict[tuple[Any, Any], tuple[Any, ...]]:
    table = dict(start)
    kinds: dict[tuple[Any, Any], list[str]] = {}
    for row in changes:
        values = tuple(row[c] for c in PK_COLUMNS)
        key = (values[3], values[0])
        kinds.setdefault(key, []).append(row["_change_type"])
        if row["_change_type"] in ("delete", "update_preimage"):
            assert table.get(key) == values, (row, table.get(key))  # the row the start held
        if row["_change_type"] == "insert":
            assert key not in start, row
    for key, found in kinds.items():  # one net change per key
        assert sorted(found) in (["insert"], ["delete"], ["update_postimage", "update_preimage"]), (key, found)
    for row in changes:
        values = tuple(row[c] for c in PK_COLUMNS)
        key = (values[3], values[0])
        if row["_change_type"] in ("insert", "update_postimage"):
            table[key] = values
        elif row["_change_type"] == "delete":
            del table[key]
    return table


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_primary_key_table_snapshot_plus_changes_is_the_later_snapshot(spark: Any, tmp_path: Path,
                                                                        seed: int) -> None:
    rnd = random.Random(100 + seed)
    table = LakeTable.create(str(tmp_path / "t"), {
        "schema": "k BIGINT NOT NULL, a STRING, n BIGINT, dt STRING", "primary_key": ["k"], "partition_by": ["dt"],
        "bucket": {"columns": ["k"], "count": 2}})
    random_keyed_commits(spark, table, rnd, steps=8 if seed == 0 else 6)
    head = table.commit_log.head()
    operations = {e.operation for e in table.entries_since(0)}
    assert {"versioned_upsert", "delete", "restore"} <= operations
    windows = pairs(rnd, head, 6 if seed == 0 else 2)
    for (a, b), (columns, changes) in changes_of(spark, table, windows).items():
        assert columns == PK_COLUMNS
        start = {} if a == -1 else by_key(rows_of(table, a, columns))
        assert apply_keyed(start, changes) == by_key(rows_of(table, b, columns)), (a, b, operations)
    assert data_free_windows_give_nothing(spark, table) >= 1
