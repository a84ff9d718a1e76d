"""alter_table on real Spark and real files: add / widen / drop / rename, then writes and time travel across the
change (against a pandas oracle), skipping, bucketed and clustered tables, protected columns, and a race."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeCommitConflict, LakeSchemaError, LakeSpecError
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.table import LakeTable
from tests.lake.buckets.bucket_helpers import PLAN_CONF, file_rows_in_their_bucket

OLD = "id INT, name STRING, amount FLOAT, note STRING, dt STRING"
NEW = "id BIGINT, c2 BIGINT, label STRING, amount DOUBLE, dt STRING"


def data_files(table: LakeTable) -> dict[str, float]:
    """Every data file under the root with its modification time (the log and metadata left out)."""
    root = Path(table.storage.path(""))
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*.parquet") if "_lake" not in p.parts}


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def oracle(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(None if pd.isna(v) else v for v in r) for r in frame.itertuples(index=False))


@pytest.fixture
def evolved(spark: Any, table_path: str) -> tuple[LakeTable, pd.DataFrame, pd.DataFrame]:
    """A table written, altered (every kind of change), and written again; with pandas frames of the batches."""
    table = LakeTable.create(table_path, {"schema": OLD, "partition_by": ["dt"]})
    first = pd.DataFrame([(i, f"n{i}", i * 0.5, f"x{i}", f"d{i % 2}") for i in range(6)],
                         columns=["id", "name", "amount", "note", "dt"])
    table.write(spark.createDataFrame(first.astype(object), OLD))
    before = data_files(table)
    entry = table.alter_table([{"add": "c2", "type": "bigint", "after": "id"}, {"widen": "id", "type": "bigint"},
                               {"widen": "amount", "type": "double"}, {"rename": "name", "to": "label"},
                               {"drop": "note"}])
    assert (entry.seq, entry.action, entry.operation, entry.added, entry.removed) == (2, "alter", "alter_table", (), ())
    assert data_files(table) == before  # metadata only: no data file written, moved or touched
    second = pd.DataFrame([(10 + i, i * 100, f"m{i}", i * 1.5, f"d{i % 2}") for i in range(4)],
                          columns=["id", "c2", "label", "amount", "dt"])
    table.write(spark.createDataFrame(second.astype(object), NEW))
    return table, first, second


def test_reads_and_time_travel_across_the_change_match_the_oracle(spark: Any, evolved: Any) -> None:
    table, first, second = evolved
    expected = pd.concat([first.drop(columns="note").rename(columns={"name": "label"}).assign(c2=None), second])
    expected = expected[["id", "c2", "label", "amount", "dt"]]
    df = table.read(spark)
    assert df.dtypes == [("id", "bigint"), ("c2", "bigint"), ("label", "string"), ("amount", "double"),
                         ("dt", "string")]
    assert rows(df) == oracle(expected)
    with session_conf(spark, {"spark.sql.parquet.enableVectorizedReader": "false"}):
        assert rows(table.read(spark)) == oracle(expected)
    assert oracle(table.to_arrow().to_pandas()) == oracle(expected)
    # time travel reads with the spec of its snapshot: the names and types then
    old = table.read(spark, as_of=1)
    assert old.dtypes == [("id", "int"), ("name", "string"), ("amount", "float"), ("note", "string"),
                          ("dt", "string")]
    assert rows(old) == oracle(first)
    assert rows(table.read(spark, as_of=2)) == oracle(expected[expected.id < 10])
    # a column dropped, then added again under its old name, reads NULL for every old row: never the old data
    table.alter_table([{"drop": "amount"}, {"add": "amount", "type": "double"}])
    assert table.spec.physical_of("amount") == "amount__2"
    assert {r.amount for r in table.read(spark).collect()} == {None}
    assert rows(table.read(spark, as_of=3)) == oracle(expected)


def test_skipping_never_skips_old_files_on_an_added_column(spark: Any, evolved: Any) -> None:
    table = evolved[0]
    old_files = {f.path for f in table.snapshot(1).files}
    new_files = {f.path for f in table.snapshot().files} - old_files
    scan = table.scan([["c2", "=", 100]])
    assert old_files <= {f.path for f in scan.files}  # no stats for c2 in them: read, never skipped
    assert scan.files_skipped == len(new_files) - 1  # the new files skip by their c2 stats, but the one with 100
    assert rows(table.read(spark, filters=[["c2", "=", 100]])) == [(11, 100, "m1", 1.5, "d1")]
    # stats of a widened or renamed column stay right: old int / float stats against bigint / double filters,
    # the renamed column's stats under its physical name in old and new files alike
    assert table.scan([["id", ">=", 10]]).files_skipped == len(old_files)
    assert sorted(r.id for r in table.read(spark, filters=[["id", "<", 2]]).collect()) == [0, 1]
    assert new_files.isdisjoint(f.path for f in table.scan([["label", "=", "n3"]]).files)
    assert old_files.isdisjoint(f.path for f in table.scan([["label", "=", "m3"]]).files)
    assert [r.id for r in table.read(spark, filters=[["label", "=", "n3"]]).collect()] == [3]
    assert sorted(r.id for r in table.read(spark, filters=[["amount", ">", 2.2]]).collect()) == [5, 12, 13]


def test_writes_refuse_the_old_schema_and_say_how_to_add_columns(spark: Any, evolved: Any) -> None:
    table, _, _ = evolved
    head = table.commit_log.head()
    with pytest.raises(LakeSchemaError, match=r"has column\(s\) \['name', 'note'\].*schema_evolution to "
                                              r"\"add_columns\""):
        table.write(spark.createDataFrame([(1, 1, "a", "b", 1.0, "d1")],
                                          "id BIGINT, c2 BIGINT, name STRING, note STRING, amount DOUBLE, dt STRING"))
    assert table.commit_log.head() == head


def test_schema_evolution_adds_source_columns_in_the_write_commit(spark: Any, evolved: Any) -> None:
    table, _, _ = evolved
    df = spark.createDataFrame([(20, 1, "z", 2.0, "d0", "new", 7)],
                               f"{NEW}, extra STRING, `count` INT")
    entry = table.write(df, schema_evolution="add_columns")  # the door, as a user calls it
    assert entry.action == "commit" and entry.metadata["added_columns"] == ["extra", "count"]
    assert table.spec.column_names == ["id", "c2", "label", "amount", "dt", "extra", "count"]
    assert [(c.name, c.type) for c in table.spec.columns][-2:] == [("extra", "string"), ("count", "int")]
    got = {r.id: (r.extra, r["count"]) for r in table.read(spark).collect()}
    assert got[20] == ("new", 7) and got[0] == (None, None) and len(got) == 11
    with pytest.raises(LakeSpecError, match="schema_evolution"):
        table.write(df, schema_evolution="merge")


def test_bucketed_reads_stay_bucketed_after_a_rename_and_an_add(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "k BIGINT, v BIGINT, dt STRING", "partition_by": ["dt"],
                                          "bucket": {"columns": ["k"], "count": 4, "sort_columns": ["v"]}})
    table.write(spark.createDataFrame([(k, k * 10, "d1") for k in range(40)], "k BIGINT, v BIGINT, dt STRING"))
    table.alter_table([{"rename": "v", "to": "value"}, {"add": "w", "type": "string"}])
    assert table.spec.bucket.sort_columns == ("value",)  # type: ignore[union-attr]
    table.write(spark.createDataFrame([(k, k * 10, "w", "d1") for k in range(40, 60)],
                                      "k BIGINT, value BIGINT, w STRING, dt STRING"))
    file_rows_in_their_bucket(spark, table)
    with session_conf(spark, PLAN_CONF):
        df = table.read(spark)
        joined = df.alias("a").join(df.alias("b"), "k").groupBy("k").count()
        plan = joined._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan and "Bucketed: true" in plan, plan
        assert joined.count() == 60
        point = table.read(spark, filters=[["k", "=", 5]])
        assert "SelectedBucketsCount: 1 out of 4" in point._jdf.queryExecution().executedPlan().toString()
        assert rows(point) == [(5, 50, "d1", None)]
    assert sorted(r.value for r in table.read(spark).collect()) == [k * 10 for k in range(60)]


def test_a_clustered_table_executes_its_plan_after_an_add_and_refuses_renaming_its_sort_column(
        spark: Any, table_path: str) -> None:
    import pyarrow.parquet as pq

    table = LakeTable.create(table_path, {"schema": "id BIGINT, x INT, dt STRING", "partition_by": ["dt"]})
    for i in range(3):
        table.write(spark.createDataFrame([(i * 100 + j, (j * 37) % 50, "d1") for j in range(30)],
                                          "id BIGINT, x INT, dt STRING"))
    plan = run(None, "schedule_clustering", {"table": table_path, "sort_columns": ["x"], "min_commits": 1,
                                             "small_file_limit_bytes": 10**12, "max_bytes_per_group": 10**12})
    with pytest.raises(LakeSpecError, match=f"pending clustering plan {plan['plan_id']} sorts by it"):
        table.alter_table([{"rename": "x", "to": "y"}])
    with pytest.raises(LakeSpecError, match="pending clustering plan"):
        table.alter_table([{"drop": "x"}])
    table.alter_table([{"add": "note", "type": "string"}, {"widen": "x", "type": "bigint"}])
    before = rows(table.read(spark))
    out = run(spark, "execute_clustering", {"table": table_path, "plan_id": plan["plan_id"]})
    assert out["files_after"] == 1 and rows(table.read(spark)) == before
    xs = pq.read_table(table.storage.path(table.snapshot().files[0].path), columns=["x"]).column("x").to_pylist()
    assert xs == sorted(xs)
    table.alter_table([{"rename": "x", "to": "y"}])  # no plan pending any more
    assert rows(table.read(spark)) == before
    # the next plan sorts by the new name; files written before and after the rename are clustered together
    table.write(spark.createDataFrame([(999, 7, "d1", "n")], "id BIGINT, y BIGINT, dt STRING, note STRING"))
    plan = run(None, "schedule_clustering", {"table": table_path, "sort_columns": ["y"], "min_commits": 1,
                                             "small_file_limit_bytes": 10**12, "max_bytes_per_group": 10**12})
    run(spark, "execute_clustering", {"table": table_path, "plan_id": plan["plan_id"]})
    ys = pq.read_table(table.storage.path(table.snapshot().files[0].path), columns=["x"]).column("x").to_pylist()
    assert len(table.snapshot().files) == 1 and ys == sorted(ys) and len(ys) == 91  # in the files: still `x`
    assert rows(table.read(spark)) == sorted([*before, (999, 7, "d1", "n")])


def test_a_write_racing_an_alter_conflicts_and_its_retry_lands(spark: Any, table_path: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    table = LakeTable.create(table_path, {"schema": "id INT, v INT"})
    table.write(spark.createDataFrame([(1, 1)], "id INT, v INT"))
    real = faults.reach

    def alter_meanwhile(point: str) -> None:  # the writer has written its files; the alter commits first
        if point == "before_commit":
            monkeypatch.setattr(faults, "reach", real)
            LakeTable.open(table_path).alter_table([{"widen": "v", "type": "bigint"}])
        real(point)

    monkeypatch.setattr(faults, "reach", alter_meanwhile)
    source = spark.createDataFrame([(2, 2)], "id INT, v INT")
    with pytest.raises(LakeCommitConflict, match="changed the table spec meanwhile"):
        table.write(source)
    assert [e.action for e in (table.commit_log.read(s) for s in range(table.commit_log.head() + 1))] == \
        ["create", "commit", "alter", "rollback"]
    assert rows(table.read(spark)) == [(1, 1)]
    live = {f.path for f in table.snapshot().files}
    assert set(data_files(table)) == live  # the aborted write left no file behind
    table.write(source)  # the retry: written against the new spec
    assert rows(table.read(spark)) == [(1, 1), (2, 2)] and dict(table.read(spark).dtypes)["v"] == "bigint"
    # two alters from one base: the second one conflicts too, and its retry applies to the first one's spec
    base = table.state()
    table.alter_table([{"add": "a", "type": "int"}])
    from airflow_lake.lake.alter import alter_table as alter_module

    monkeypatch.setattr(alter_module, "protected_columns", lambda *_: {})
    monkeypatch.setattr(table, "state", lambda seq=None: base if seq is None else LakeTable.state(table, seq))
    with pytest.raises(LakeCommitConflict, match="changed the table spec meanwhile"):
        alter_module.alter_table(table, [{"add": "b", "type": "int"}])
    monkeypatch.undo()
    LakeTable.open(table_path).alter_table([{"add": "b", "type": "int"}])
    assert LakeTable.open(table_path).spec.column_names == ["id", "v", "a", "b"]


def test_refused_changes_commit_nothing(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "k BIGINT, v INT, ver BIGINT, dt STRING", "partition_by": ["dt"],
                                          "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2},
                                          "version_column": "ver"})
    for changes, message in [([], "empty"), ([{"drop": "dt"}], "partition column"),
                             ([{"rename": "k", "to": "key"}], "bucket column"),
                             ([{"widen": "k", "type": "double"}], "does not widen"),
                             ([{"drop": "ver"}], "version column"),
                             ([{"add": "ok", "type": "int"}, {"drop": "k"}], "changes\\[1\\].drop")]:
        with pytest.raises(LakeSpecError, match=message):
            table.alter_table(changes)
    assert table.commit_log.head() == 0 and table.timeline()[-1].action == "create"  # nothing, not even pending
    entry = table.alter_table([{"add": "ok", "type": "int"}], request_id="r1")
    assert table.alter_table([{"add": "ok", "type": "int"}], request_id="r1").seq == entry.seq  # a retry
