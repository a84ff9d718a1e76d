"""Tables published to an Iceberg catalog (a SQL catalog on SQLite, configured by pyiceberg's environment variables):
after each kind of commit, with stray Parquet files in the table's directories, pyiceberg and DuckDB's iceberg_scan
read exactly our rows; time travel to the snapshot whose `lake.seq` is n reads our snapshot n."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from pyiceberg.expressions import GreaterThanOrEqual
from pyiceberg.table.snapshots import Operation

from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.publish import iceberg_readers as readers

SCHEMA = "id BIGINT, name STRING, n INT, dt STRING"


def operations(published: Any) -> dict[int, Operation]:
    """lake.seq -> the operation of the snapshot that publishes it."""
    return {int(s.summary["lake.seq"]): s.summary.operation for s in published.metadata.snapshots}


def test_every_kind_of_commit_reads_the_same_in_pyiceberg_and_duckdb(spark: Any, table_path: str, tmp_path: Path,
                                                                     monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    table = LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"],
                                          "properties": readers.properties()})
    seqs: dict[str, int] = {}

    def step(name: str) -> Any:
        seqs[name] = table.commit_log.head()
        return readers.assert_same(table, catalog)

    table.write(spark.createDataFrame([(1, "a", 1, "d1"), (2, "b", 2, "d1"), (3, "c", 3, "d2")], SCHEMA))
    step("append")
    # stray Parquet files: a copy of a live file, dropped into a partition directory and the root
    live = table.storage.path(next(f.path for f in table.snapshot().files if f.partition == {"dt": "d1"}))
    shutil.copy(live, os.path.join(os.path.dirname(live), "stray-copy.parquet"))
    shutil.copy(live, os.path.join(table_path, "stray-root.parquet"))
    table.write(spark.createDataFrame([(4, "d", 4, "d1")], SCHEMA), mode="overwrite", partitions=[{"dt": "d1"}])
    step("overwrite_partition")
    table.write(spark.createDataFrame([(5, "e", 5, "d2"), (6, "f", 6, "d3")], SCHEMA))
    table.delete(spark, where="id = 5")
    step("delete")
    run(spark, "bucket_rewrite", {"table": table_path, "bucket": {"columns": ["id"], "count": 2},
                                  "partitions": "all"})
    published = step("bucket_rewrite")
    assert operations(published)[seqs["bucket_rewrite"]] == Operation.REPLACE
    table.alter_table([{"add": "c", "type": "string"}, {"rename": "name", "to": "label"},
                       {"widen": "n", "type": "bigint"}])
    step("alter")
    table.write(spark.createDataFrame([(7, "g", 2**40, "d2", "x")], "id BIGINT, label STRING, n BIGINT, dt STRING, "
                                      "c STRING"))
    published = step("after_alter")
    # files registered before the widening keep 4-byte int bounds for the now-bigint column: filters still prune
    # right (pyiceberg and DuckDB read them as a promoted int)
    current = readers.ours(table)
    for value in (2, 2**40):
        want = sum(n for row, n in current.items() if row[2] is not None and row[2] >= value)
        assert published.scan(row_filter=GreaterThanOrEqual("n", value)).to_arrow().num_rows == want
        assert readers.by_duckdb_where(published, "n >= ?", value).num_rows == want
    mapping = published.metadata.properties["schema.name-mapping.default"]
    assert '"names":["name"]' in mapping and "label" not in mapping  # the files hold the old name
    table.alter_table([{"drop": "label"}])
    step("drop")
    table.write(spark.createDataFrame([(8, 8, "d9", "y")], "id BIGINT, n BIGINT, dt STRING, c STRING"),
                mode="overwrite")
    step("overwrite_table")
    # time travel: the snapshot whose lake.seq is n reads our snapshot n (with the columns of the time)
    published = catalog.load_table(("db", "t"))
    for name in ("append", "overwrite_partition", "delete", "bucket_rewrite", "overwrite_table"):
        seq = seqs[name]
        snapshot_id = readers.snapshot_of_seq(published, seq)
        assert snapshot_id is not None, name
        expected = readers.ours(table, seq)
        columns = table.snapshot(seq).spec.column_names
        got = readers.by_duckdb(published, snapshot_id)
        assert readers.rows(got, columns) == expected, ("duckdb", name)
        got = readers.by_pyiceberg(published, snapshot_id)
        assert readers.rows(got, columns) == expected, ("pyiceberg", name)
    table.restore(to_seq=seqs["delete"])
    published = step("restore")
    assert published.schema().column_names == ["id", "name", "n", "dt"]

    # one snapshot per commit that changed files, in our order; alter_table changed none
    snapshot_seqs = [int(s.summary["lake.seq"]) for s in published.snapshots()]
    assert snapshot_seqs == sorted(snapshot_seqs) and len(set(snapshot_seqs)) == len(snapshot_seqs)
    assert seqs["alter"] not in snapshot_seqs and seqs["drop"] not in snapshot_seqs


def test_a_primary_key_table_is_published_as_of_its_last_compaction(spark: Any, table_path: str, tmp_path: Path,
                                                                    monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    schema = "k BIGINT, v STRING, dt STRING"
    table = LakeTable.create(table_path, {"schema": schema, "partition_by": ["dt"], "primary_key": ["k"],
                                          "bucket": {"columns": ["k"], "count": 1},
                                          "properties": readers.properties()})
    versioned_upsert(table, spark.createDataFrame([(1, "a", "d1"), (2, "b", "d1"), (3, "c", "d2")], schema),
                     version=1)
    versioned_upsert(table, spark.createDataFrame([(3, "c2", "d2"), (2, "b2", "d1")], schema), version=2)
    published = catalog.load_table(("db", "t"))
    assert readers.by_pyiceberg(published).num_rows == 0  # upserts are not compacted yet: nothing to see
    assert compact(table, spark).entry is not None
    readers.assert_same(table, catalog)  # the merged rows, no __lake_* column
    base = readers.ours(table)
    versioned_upsert(table, spark.createDataFrame([(1, "a2", "d1"), (4, "d", "d2")], schema), version=3)
    published = catalog.load_table(("db", "t"))
    for reader in (readers.by_pyiceberg, readers.by_duckdb):
        assert readers.rows(reader(published), ["k", "v", "dt"]) == base  # the old base until compaction
    assert compact(table, spark).entry is not None
    readers.assert_same(table, catalog)
    assert (1, "a2", "d1") in readers.ours(table)


def test_a_versioned_delete_is_published_by_the_next_compaction(spark: Any, table_path: str, tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    catalog = readers.configure(monkeypatch, tmp_path)
    schema = "k BIGINT, v STRING"
    table = LakeTable.create(table_path, {"schema": schema, "primary_key": ["k"],
                                          "bucket": {"columns": ["k"], "count": 1},
                                          "properties": readers.properties()})
    versioned_upsert(table, spark.createDataFrame([(1, "a"), (2, "b")], schema), version=1)
    table.delete_keys(spark, spark.createDataFrame([(2,)], "k BIGINT"), version=2)
    assert compact(table, spark).entry is not None
    assert readers.ours(table) == readers.rows(readers.by_pyiceberg(catalog.load_table(("db", "t"))), ["k", "v"])


TYPED = ("id INT, t TINYINT, s SMALLINT, price DECIMAL(10,2), ok BOOLEAN, at TIMESTAMP, f DOUBLE, b BINARY, "
         "day DATE")


def test_every_column_type_and_a_date_partition_read_the_same_filtered_or_not(spark: Any, table_path: str,
                                                                              tmp_path: Path, monkeypatch: Any) -> None:
    import datetime as dt
    import decimal

    from pyiceberg.expressions import EqualTo

    catalog = readers.configure(monkeypatch, tmp_path)
    table = LakeTable.create(table_path, {"schema": TYPED, "partition_by": ["day"],
                                          "properties": readers.properties()})
    at = dt.datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=dt.UTC)
    table.write(spark.createDataFrame([
        (1, 1, 100, decimal.Decimal("1.50"), True, at, 0.5, b"x", dt.date(2024, 1, 1)),
        (2, -3, 200, decimal.Decimal("-2.25"), False, at + dt.timedelta(days=1), float("nan"), None,
         dt.date(2024, 1, 1)),
        (3, None, None, None, None, None, None, b"z", dt.date(2024, 1, 2)),
        (4, 7, 300, decimal.Decimal("9.99"), True, at - dt.timedelta(days=400), -1.0, b"", None),
    ], TYPED))
    published = catalog.load_table(("db", "t"))
    columns = table.spec.column_names
    expected = readers.ours(table)
    for reader in (readers.by_pyiceberg, readers.by_duckdb):
        got = readers.rows(reader(published), columns)
        assert {k: v for k, v in got.items() if k[6] == k[6]} == \
            {k: v for k, v in expected.items() if k[6] == k[6]}, reader.__name__  # NaN != NaN: compare apart
        assert sum(got.values()) == sum(expected.values())
    bounded = [task.file for task in published.scan().plan_files()]
    assert all(f.lower_bounds and f.null_value_counts and f.record_count > 0 for f in bounded)
    # filters that prune by partition values and by the bounds the manifests hold: never a row lost
    for column, value in (("id", 3), ("t", -3), ("at", at), ("day", dt.date(2024, 1, 2)), ("s", 250)):
        index = columns.index(column)
        want = sum(n for row, n in expected.items() if row[index] is not None and row[index] >= value)
        got = published.scan(row_filter=GreaterThanOrEqual(column, value)).to_arrow().num_rows
        assert got == want, ("pyiceberg", column)
        duck = readers.by_duckdb_where(published, f'"{column}" >= ?', value)
        assert duck.num_rows == want, ("duckdb", column)
    assert published.scan(row_filter=EqualTo("id", 4)).to_arrow().column("day").to_pylist() == [None]
