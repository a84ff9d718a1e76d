"""Versioned deletes on primary-key tables (issue 22, part 2): the `delete` operation with keys and a version, and
delete markers in upsert sources, in shuffled orders with compactions at random points, against the independent
pandas oracle (`oracle.merge_with_deletes`, which applies the definition directly: no stamps, no watermarks)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake.errors import LakeCommitConflict, LakeSchemaError, LakeSpecError
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.upsert.oracle import as_strings, merge_with_deletes

COLUMNS = ["a", "tag", "n", "hi"]
TYPES = {"k": "BIGINT", "a": "STRING", "tag": "STRING", "n": "BIGINT", "hi": "BIGINT", "_delete": "BOOLEAN"}
FOLDED = {"n": "sum", "hi": "max", "tag": "last_non_null"}  # commutative columns: a compaction folds them
STAMPED = {"tag": "last_non_null"}  # last-wins only


def make_table(path: Path, operators: dict[str, str], **extra: Any) -> LakeTable:
    return LakeTable.create(str(path), {
        "schema": "k BIGINT NOT NULL, a STRING, tag STRING, n BIGINT, hi BIGINT", "primary_key": ["k"],
        "bucket": {"columns": ["k"], "count": 2}, "merge_operators": operators, "null_values": {"tag": ["null"]},
        **extra})


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(rows[0]))


def spark_df(spark: Any, pdf: pd.DataFrame) -> Any:
    schema = ", ".join(f"{c} {TYPES[c]}" for c in pdf.columns)
    def value(v: Any, column: str) -> Any:
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return None
        return int(v) if TYPES[column] == "BIGINT" else bool(v) if TYPES[column] == "BOOLEAN" else v

    records = [tuple(value(v, c) for v, c in zip(row, pdf.columns, strict=True))
               for row in pdf.astype(object).itertuples(index=False)]
    return spark.createDataFrame(records, schema)


def check(spark: Any, table: LakeTable, expected: pd.DataFrame) -> None:
    got = as_strings(table.read(spark).toPandas(), key="k", columns=COLUMNS)
    pd.testing.assert_frame_equal(got, expected.reset_index(drop=True))
    # the merged read without Spark (pyarrow: `upsert.arrow_merge`) agrees
    arrow = as_strings(table.to_arrow().to_pandas(), key="k", columns=COLUMNS)
    pd.testing.assert_frame_equal(arrow, expected.reset_index(drop=True))


def delete_keys(spark: Any, table: LakeTable, keys: list[int], version: int, **extra: Any) -> dict[str, Any]:
    return run(spark, "delete", {"table": table.url, "keys": [{"k": k} for k in keys], "version": version, **extra})


def events_for(seed: int) -> list[tuple[str, int, pd.DataFrame]]:
    """12 versions: upserts (partial ones too), delete operations and upserts with delete markers."""
    rnd = random.Random(seed)
    kinds = ["upsert"] * 7 + ["delete"] * 3 + ["marked"] * 2
    rnd.shuffle(kinds)
    out = []
    for version, kind in enumerate(kinds, start=1):
        keys = rnd.sample(range(12), 5)
        if kind == "delete":
            out.append((kind, version, frame([{"k": k, "_delete": True} for k in keys[:3]])))
            continue
        columns = ["a", "tag", "n", "hi"] if rnd.random() < 0.5 else rnd.sample(COLUMNS, 2)
        rows = []
        for k in keys:
            row: dict[str, Any] = {"k": k}
            values = {"a": f"a{version}_{k}", "tag": rnd.choice([f"t{version}", None, "null"]),
                      "n": rnd.randint(1, 100), "hi": rnd.randint(1, 1000)}
            row.update({c: values[c] for c in columns})
            if kind == "marked":
                row["_delete"] = rnd.random() < 0.4
            rows.append(row)
        out.append((kind, version, frame(rows)))
    order = list(range(len(out)))
    rnd.shuffle(order)
    return [out[i] for i in order]


class Folds:
    """What compactions folded, tracked from the test's side: per key and commutative (sum / max) column, the
    versions whose values are folded into its base row. A delete at d is exact unless some key's live fold of a
    column spans d (v0 <= d < v): exactly then it must be refused."""

    def __init__(self, commutative: list[str]) -> None:
        self.commutative = commutative
        self.watermark: dict[int, int] = {}
        self.fold: dict[tuple[int, str], tuple[int, int]] = {}
        self.pending: list[tuple[int, int, list[str]]] = []  # (key, version, columns it sets) since a compaction

    def upserted(self, version: int, pdf: pd.DataFrame) -> None:
        for row in pdf.to_dict("records"):
            if row.get("_delete") is True:
                self.watermark[row["k"]] = max(self.watermark.get(row["k"], version), version)
            else:
                sets = [c for c in self.commutative if c in row and row[c] is not None and not pd.isna(row[c])]
                self.pending.append((row["k"], version, sets))

    def deleted(self, version: int, keys: list[int]) -> None:
        for k in keys:
            self.watermark[k] = max(self.watermark.get(k, version), version)

    def compacted(self) -> None:
        parts: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for key, fold in self.fold.items():
            parts.setdefault(key, []).append(fold)
        for k, version, sets in self.pending:
            for column in sets:
                parts.setdefault((k, column), []).append((version, version))
        self.fold = {}
        for (k, column), folds in parts.items():
            alive = [p for p in folds if p[0] > self.watermark.get(k, p[0] - 1)]
            if alive:
                self.fold[(k, column)] = (min(p[0] for p in alive), max(p[1] for p in alive))
        self.pending = []

    def must_refuse(self, version: int, keys: list[int]) -> bool:
        return any(v0 <= version < v and v0 > self.watermark.get(k, v0 - 1)
                   for (k, _), (v0, v) in self.fold.items() if k in keys)


@pytest.mark.parametrize(("operators", "seed"), [(STAMPED, 1), (STAMPED, 2), (FOLDED, 3), (FOLDED, 4),
                                                 (FOLDED, 5)])
def test_shuffled_upserts_and_deletes_with_random_compactions_match_the_oracle(
        spark: Any, tmp_path: Path, operators: dict[str, str], seed: int) -> None:
    table = make_table(tmp_path / "t", operators)
    rnd = random.Random(seed * 101)
    folds = Folds([c for c in ("n", "hi") if c in operators])
    applied: list[tuple[int, pd.DataFrame]] = []
    refused = 0
    for kind, version, pdf in events_for(seed):
        deleting = [int(r["k"]) for r in pdf.to_dict("records") if r.get("_delete") is True]
        must_refuse = folds.must_refuse(version, deleting)
        try:
            if kind == "delete":
                out = delete_keys(spark, table, deleting, version)
                assert out["keys_deleted"] == len(pdf) and out["version"] == version
            else:
                versioned_upsert(table, spark_df(spark, pdf), version=version)
        except LakeSpecError as err:  # a delete inside a compacted fold of sum / max: it cannot be split
            assert must_refuse, err
            assert "cannot be applied exactly" in str(err) and "(compacted)" in str(err)
            refused += 1
            continue
        assert not must_refuse, f"version {version} deletes {deleting} across a compacted fold, yet was applied"
        applied.append((version, pdf))
        if kind == "delete":
            folds.deleted(version, deleting)
        else:
            folds.upserted(version, pdf)
        if rnd.random() < 0.4 and compact(table, spark).entry is not None:
            folds.compacted()
    expected = merge_with_deletes(applied, "k", COLUMNS, operators=operators, null_values={"tag": ["null"]})
    check(spark, table, expected)
    plan = table.read(spark)._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" not in plan and "Bucketed: true" in plan and "Window" in plan  # merged where it is read
    compact(table, spark)
    check(spark, table, expected)
    assert refused == 0 or operators is FOLDED


def raw_rows(table: LakeTable) -> pd.DataFrame:
    return pd.concat([pq.read_table(table.storage.path(f.path)).to_pandas() for f in table.snapshot().files])


def test_a_late_lower_version_stays_deleted_after_compaction_and_clean_removes_the_values(
        spark: Any, tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FOLDED)
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "a": "secret-a", "tag": "secret-t", "n": 1, "hi": 3},
                                                   {"k": 2, "a": "b5", "tag": "x", "n": 2, "hi": 2}])), version=5)
    out = delete_keys(spark, table, [1, 99], 7)  # 99 was never upserted: a backfill of it must stay deleted too
    assert out["keys_deleted"] == 2 and out["files_added"] >= 1
    compact(table, spark)
    raw = raw_rows(table).set_index("k")
    assert raw.loc[1, "__lake_d"] == 7 and raw.loc[1, ["a", "tag", "n", "hi"]].isna().all()  # a tombstone
    assert raw.loc[99, "__lake_d"] == 7 and pd.isna(raw.loc[2, "__lake_d"])
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "a": "late6", "n": 100}, {"k": 99, "a": "late"}])),
                     version=6)  # a backfill below the delete
    assert sorted(table.read(spark).toPandas()["k"]) == [2]
    compact(table, spark)
    assert sorted(table.read(spark).toPandas()["k"]) == [2]  # still, after another compaction
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "n": 5}])), version=8)  # a newer version: back
    got = table.read(spark).toPandas().set_index("k")
    assert got.loc[1, "n"] == 5 and pd.isna(got.loc[1, "a"]) and pd.isna(got.loc[1, "tag"])  # nothing older
    compact(table, spark)
    table.clean(0, force=True)
    leftovers = [p for p in Path(table.storage.path("")).rglob("*.parquet") if "_lake" not in p.parts]
    text = " ".join(pq.read_table(p).to_pandas().astype(str).to_csv() for p in leftovers)
    assert "secret" not in text and "late6" not in text  # no file holds the deleted values any more
    assert {p.relative_to(table.storage.path("")).as_posix() for p in leftovers} == {
        f.path for f in table.snapshot().files}


def test_a_delete_across_a_compacted_sum_is_refused_and_exact_otherwise(spark: Any, tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FOLDED)
    for version, n in ((3, 1), (7, 10)):
        versioned_upsert(table, spark_df(spark, frame([{"k": 1, "n": n}, {"k": 2, "n": n}])), version=version)
    delete_keys(spark, table, [2], 5)  # before compaction: exact, version 7's 10 stays
    assert table.read(spark).toPandas().set_index("k").loc[2, "n"] == 10
    compact(table, spark)
    assert table.read(spark).toPandas().set_index("k")["n"].to_dict() == {1: 11, 2: 10}
    head = table.commit_log.head()
    with pytest.raises(LakeSpecError, match=r"key \(k=1\): column n folds versions 3\.\.7") as err:
        delete_keys(spark, table, [1], 6)
    assert err.value.field == "version" and "Delete at a version above the highest" in err.value.fix
    assert all(e.action == "rollback" for e in table.commit_log.entries(head)) or table.commit_log.head() == head
    marked = frame([{"k": 1, "n": 0, "_delete": True}])
    with pytest.raises(LakeSpecError, match=r"folds versions 3\.\.7") as err:
        versioned_upsert(table, spark_df(spark, marked), version=4)
    assert err.value.field == "delete_column"
    delete_keys(spark, table, [1], 8)  # above the fold: removes all of it
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "n": 50}])), version=6)  # late and lower
    assert sorted(table.read(spark).toPandas()["k"]) == [2]
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "n": 100}])), version=9)
    assert table.read(spark).toPandas().set_index("k")["n"].to_dict() == {1: 100, 2: 10}


def test_a_delete_is_judged_by_each_columns_fold_not_the_rows(spark: Any, tmp_path: Path) -> None:
    """A base row folds versions 3..9, but its sum only 3..4 and its max only 8..9: a delete at 5 or 6 removes all of
    the sum and none of the max, exactly (it was refused while only the row's range was kept)."""
    table = make_table(tmp_path / "t", FOLDED)
    events = [(3, frame([{"k": 1, "a": "a3", "n": 1}, {"k": 2, "a": "a3", "n": 1}])),
              (4, frame([{"k": 1, "n": 10}, {"k": 2, "n": 10}])),
              (8, frame([{"k": 1, "hi": 80}, {"k": 2, "hi": 80}])),
              (9, frame([{"k": 1, "a": "a9", "hi": 90}, {"k": 2, "a": "a9", "hi": 9}]))]
    for version, pdf in events:
        versioned_upsert(table, spark_df(spark, pdf), version=version)
    compact(table, spark)
    raw = raw_rows(table).set_index("k")
    assert (raw.loc[1, "__lake_v0"], raw.loc[1, "__lake_v"]) == (3, 9)  # the row's range spans the deletes below
    assert (raw.loc[1, "__lake_v0__n"], raw.loc[1, "__lake_v__n"], raw.loc[1, "__lake_v0__hi"]) == (3, 4, 8)
    delete_keys(spark, table, [1], 5)
    marked = frame([{"k": 2, "_delete": True}])
    versioned_upsert(table, spark_df(spark, marked), version=6)
    applied = [*events, (5, frame([{"k": 1, "_delete": True}])), (6, marked)]
    check(spark, table, merge_with_deletes(applied, "k", COLUMNS, operators=FOLDED, null_values={"tag": ["null"]}))
    got = table.read(spark).toPandas().set_index("k")
    assert pd.isna(got.loc[1, "n"]) and got.loc[1, "hi"] == 90 and got.loc[2, "hi"] == 80  # max over 8..9 kept
    with pytest.raises(LakeSpecError, match=r"column hi folds versions 8\.\.9"):
        delete_keys(spark, table, [2], 8)
    compact(table, spark)
    check(spark, table, merge_with_deletes(applied, "k", COLUMNS, operators=FOLDED, null_values={"tag": ["null"]}))


def test_delete_markers_in_upsert_sources(spark: Any, tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", STAMPED)
    versioned_upsert(table, spark_df(spark, frame([{"k": k, "a": f"v1_{k}"} for k in range(4)])), version=1)
    source = spark.createDataFrame([(0, "v2_0", True), (1, "v2_1", False), (2, None, None)],
                                   "k BIGINT, a STRING, _delete BOOLEAN")
    done = versioned_upsert(table, source, version=2)
    assert done.entry.metrics["delete_rows"] == 1
    assert table.spec.column_names == ["k", "a", "tag", "n", "hi"]  # the marker is never stored
    got = table.read(spark).toPandas().set_index("k")["a"].to_dict()
    assert got == {1: "v2_1", 2: None, 3: "v1_3"}  # NULL marker: not a delete
    hudi = spark.createDataFrame([(3, "x", True)], "k BIGINT, a STRING, _hoodie_is_deleted BOOLEAN")
    versioned_upsert(table, hudi, version=3, delete_column="_hoodie_is_deleted")
    assert sorted(table.read(spark).toPandas()["k"]) == [1, 2]
    late = spark.createDataFrame([(0, "late", False), (3, "late", False)], "k BIGINT, a STRING, _delete BOOLEAN")
    versioned_upsert(table, late, version=0)  # lower than both deletes
    assert sorted(table.read(spark).toPandas()["k"]) == [1, 2]
    same = spark.createDataFrame([(5, "kept?", False), (5, None, True)], "k BIGINT, a STRING, _delete BOOLEAN")
    versioned_upsert(table, same, version=4)  # within one version the delete wins
    assert 5 not in set(table.read(spark).toPandas()["k"])
    head = table.commit_log.head()
    bad: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
        (spark.createDataFrame([(1, "x", 1)], "k BIGINT, a STRING, _delete INT"), {}, LakeSchemaError,
         "must be boolean"),
        (spark.createDataFrame([(1, "x")], "k BIGINT, a STRING"), {"delete_column": "gone"}, LakeSchemaError,
         "no delete-marker column 'gone'"),
        (spark.createDataFrame([(1, "x")], "k BIGINT, a STRING"), {"delete_column": "a"}, LakeSpecError,
         "is a column of the table"),
    ]
    for df, kwargs, error, words in bad:
        with pytest.raises(error, match=words):
            versioned_upsert(table, df, version=10, **kwargs)
    assert table.commit_log.head() == head


def test_the_delete_operation_on_a_primary_key_table(spark: Any, tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", STAMPED)
    versioned_upsert(table, spark_df(spark, frame([{"k": k, "a": f"v1_{k}"} for k in range(6)])), version=1)
    first = delete_keys(spark, table, [1, 2], 5, request_id="dag/forget/run/-1")
    assert first["keys_deleted"] == 2 and first["version"] == 5 and first["already_committed"] is False
    again = delete_keys(spark, table, [1, 2], 5, request_id="dag/forget/run/-1")  # an Airflow retry
    assert again["already_committed"] is True and again["seq"] == first["seq"]
    same = delete_keys(spark, table, [2, 1, 2], 5)  # no request id, the same keys in another order: a no-op
    assert same["already_committed"] is True and same["seq"] == first["seq"]
    with pytest.raises(LakeSpecError, match="version 5 was already applied by instant") as err:
        delete_keys(spark, table, [3], 5)
    assert err.value.field == "version"
    with pytest.raises(LakeSpecError, match="version 1 was already applied"):
        delete_keys(spark, table, [3], 1)  # an upsert's version
    with pytest.raises(LakeSpecError, match="version 5 was already upserted"):
        versioned_upsert(table, spark_df(spark, frame([{"k": 3, "a": "x"}])), version=5)
    keys = tmp_path / "keys.parquet"
    spark.createDataFrame([(3,), (4,)], "k BIGINT").write.parquet(str(keys))
    from_source = run(spark, "delete", {"table": table.url, "keys": {"path": str(keys)}, "version": 6})
    assert from_source["keys_deleted"] == 2
    assert sorted(table.read(spark).toPandas()["k"]) == [0, 5]
    head = table.commit_log.head()
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"keys": [{"k": 1}]}, "version", "needs a `version`"),
        ({"version": 3}, "keys", "need `keys`"),
        ({"keys": [{"k": 1}], "version": 3, "where": "k = 1"}, "keys", "not both"),
        ({"keys": [], "version": 3}, "keys", "not a non-empty list"),
        ({"keys": [{"k": 1, "a": "x"}], "version": 7}, "keys[0]", r"not key columns \['a'\]"),
        ({"keys": [{"k": "one"}], "version": 7}, "keys[0].k", "'one' is not a whole number written as digits"),
        ({"keys": [{"k": 1}], "version": "v7"}, "version", "not a whole number"),
        ({"filters": [["k", "=", 1]]}, "table", "versioned delete, with `keys` and `version`"),
    ]
    for spec, field, words in cases:
        with pytest.raises(LakeSpecError, match=words) as err:
            run(spark, "delete", {"table": table.url, **spec})
        assert err.value.field == field, spec
    parted = LakeTable.create(str(tmp_path / "p"), {
        "schema": "k BIGINT NOT NULL, a STRING, dt STRING", "primary_key": ["k"], "partition_by": ["dt"],
        "bucket": {"columns": ["k"], "count": 2}})
    versioned_upsert(parted, spark.createDataFrame([(1, "x", "d1"), (1, "y", "d2")], "k BIGINT, a STRING, dt STRING"),
                     version=1)
    with pytest.raises(LakeSpecError, match="a key is unique within a partition") as err:
        run(spark, "delete", {"table": parted.url, "keys": [{"k": 1}], "version": 2})
    run(spark, "delete", {"table": parted.url, "keys": [{"k": 1, "dt": "d1"}], "version": 2})
    assert [tuple(r) for r in parted.read(spark).collect()] == [(1, "y", "d2")]
    plain = LakeTable.create(str(tmp_path / "plain"), {"schema": "k BIGINT, a STRING"})
    with pytest.raises(LakeSpecError, match="has no primary key") as err:
        run(spark, "delete", {"table": plain.url, "keys": [{"k": 1}], "version": 2})
    assert err.value.field == "keys"
    assert table.commit_log.head() == head


def test_a_delete_racing_an_upsert_and_a_compaction(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    from tests.lake.commit.test_isolation import interleave

    table = make_table(tmp_path / "t", FOLDED)
    for version, n in ((3, 1), (7, 10)):
        versioned_upsert(table, spark_df(spark, frame([{"k": 1, "n": n, "a": f"a{version}"}])), version=version)
    # an upsert of a higher version commits while the delete is about to commit: both land, in any order
    with interleave(monkeypatch, "before_commit", lambda: versioned_upsert(
            table, spark_df(spark, frame([{"k": 1, "n": 100, "a": "a9"}])), version=9)) as ran:
        delete_keys(spark, table, [1], 8)
    assert ran[0] is not None
    assert table.read(spark).toPandas().set_index("k")[["a", "n"]].to_dict("index") == {1: {"a": "a9", "n": 100}}
    # a compaction that would fold versions 3 and 7 while a delete at 5 commits: the delete conflicts
    table2 = make_table(tmp_path / "t2", FOLDED)
    for version, n in ((3, 1), (7, 10)):
        versioned_upsert(table2, spark_df(spark, frame([{"k": 1, "n": n}, {"k": 2, "n": n}])), version=version)
    with interleave(monkeypatch, "before_commit", lambda: compact(table2, spark)) as ran, \
            pytest.raises(LakeCommitConflict, match="replaced"):
        delete_keys(spark, table2, [1], 5)
    assert ran[0].entry is not None  # the compaction did fold (4 files into 2)
    with pytest.raises(LakeSpecError, match=r"folds versions 3\.\.7"):  # its retry sees the fold and refuses
        delete_keys(spark, table2, [1], 5)
    # and the other way round: a delete at 5 lands while a compaction folds 3 and 7: the compaction conflicts
    table3 = make_table(tmp_path / "t3", FOLDED)
    for version, n in ((3, 1), (7, 10)):
        versioned_upsert(table3, spark_df(spark, frame([{"k": 1, "n": n}, {"k": 2, "n": n}])), version=version)
    with interleave(monkeypatch, "before_commit", lambda: delete_keys(spark, table3, [1], 5)) as ran, \
            pytest.raises(LakeCommitConflict, match="deletes of the 1 partition"):
        compact(table3, spark)
    assert ran[0]["keys_deleted"] == 1
    compact(table3, spark)  # the retry folds with the delete: exact
    assert table3.read(spark).toPandas().set_index("k")["n"].to_dict() == {1: 10, 2: 11}


def test_the_door_deletes_keys_of_a_primary_key_table_and_points_filters_there(spark: Any, tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", STAMPED)
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "a": "x"}, {"k": 2, "a": "y"}])), version=5)
    with pytest.raises(LakeSpecError, match="primary key"):
        table.delete(spark, filters=[("k", "=", 1)])  # a plain delete would let a late upsert bring the key back
    entry = table.delete_keys(spark, spark.createDataFrame([(1,)], "k BIGINT"), version=6, request_id="forget-1")
    assert entry is not None and sorted(table.read(spark).toPandas()["k"]) == [2]
    again = table.delete_keys(spark, spark.createDataFrame([(1,)], "k BIGINT"), version=6, request_id="forget-1")
    assert again is not None and again.seq == entry.seq  # an Airflow retry: the same commit
    versioned_upsert(table, spark_df(spark, frame([{"k": 1, "a": "late"}])), version=4)
    assert sorted(table.read(spark).toPandas()["k"]) == [2]  # a backfill below the delete stays deleted
