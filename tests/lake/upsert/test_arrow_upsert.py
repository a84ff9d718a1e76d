"""Upserts without Spark (`arrow_upsert`): the same files, fingerprints and merged reads as Spark's upserts of the same
batches, checked file by file against real Spark, and the same refusals."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.datagen import bdci
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.spec.table_spec import stored_spec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.arrow_upsert import NeedsSpark, arrow_source, arrow_upsert, unsupported
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.upsert.oracle import as_strings, bdci_expected

ROWS, KEYS, BUCKETS = 400, 500, 4
LIMIT = 1 << 30


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return bdci.generate(tmp_path_factory.mktemp("bdci"), ROWS, keys=KEYS)


def by_arrow(table: LakeTable, path: Path, **kwargs: Any) -> Any:
    return arrow_upsert(table, arrow_source(str(path), max_bytes=LIMIT), **kwargs)


def by_spark(spark: Any, table: LakeTable, path: Path, **kwargs: Any) -> Any:
    return versioned_upsert(table, spark.read.parquet(str(path)), **kwargs)


def file_rows(table: LakeTable, rel: str) -> list[dict[str, Any]]:
    """A data file's rows in a canonical order (within a key, Spark's sort need not keep the source order)."""
    rows = pq.read_table(table.storage.path(rel)).to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def same_upserts(spark_table: LakeTable, arrow_table: LakeTable) -> None:
    """Entry by entry: the same versions, columns, fingerprint; per bucket the same rows and stats."""
    ours = [e for e in arrow_table.commit_log.entries(-1) if e.metadata.get("versions") is not None]
    theirs = [e for e in spark_table.commit_log.entries(-1) if e.metadata.get("versions") is not None]
    assert len(ours) == len(theirs) > 0
    for mine, spark_entry in zip(ours, theirs, strict=True):
        for key in ("versions", "fingerprint", "columns"):
            assert mine.metadata[key] == spark_entry.metadata[key], key
        assert mine.metrics["spark"] is False and "spark" not in spark_entry.metrics
        spark_files = {(tuple(sorted(f.partition.items())), f.bucket): f for f in spark_entry.added}
        arrow_files = {(tuple(sorted(f.partition.items())), f.bucket): f for f in mine.added}
        assert sorted(spark_files, key=str) == sorted(arrow_files, key=str)
        for key, theirs_file in spark_files.items():
            mine_file = arrow_files[key]
            assert mine_file.rows == theirs_file.rows and mine_file.bucketing == theirs_file.bucketing
            assert mine_file.path.rsplit("_", 1)[1] == theirs_file.path.rsplit("_", 1)[1]  # Spark's bucket id
            assert {k: v.to_list() for k, v in mine_file.stats.items()} == \
                {k: v.to_list() for k, v in theirs_file.stats.items()}
            assert file_rows(arrow_table, mine_file.path) == file_rows(spark_table, theirs_file.path)


def test_bdci_upserts_write_what_spark_writes_and_merge_to_the_oracle(spark: Any, batches: list[Path],
                                                                       tmp_path: Path) -> None:
    order = list(range(bdci.FILES))
    random.Random(5).shuffle(order)
    spark_table = LakeTable.create(str(tmp_path / "s"), bdci.table_spec(BUCKETS))
    arrow_table = LakeTable.create(str(tmp_path / "a"), bdci.table_spec(BUCKETS))
    for version in order:
        by_spark(spark, spark_table, batches[version], version=version)
        done = by_arrow(arrow_table, batches[version], version=version)
        assert not done.already_committed and done.entry.metrics["rows"] == pq.read_metadata(batches[version]).num_rows
    same_upserts(spark_table, arrow_table)
    expected = bdci_expected(batches)
    got = as_strings(arrow_table.read(spark).toPandas(), columns=list(expected.columns[1:]))
    pd.testing.assert_frame_equal(got, expected)
    # the bucketed read of the pyarrow files is Spark's bucketed scan: a join by the key needs no shuffle
    plan = arrow_table.read(spark)._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" not in plan


def test_a_batch_upserted_by_either_path_is_the_same_upsert(spark: Any, batches: list[Path], tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), bdci.table_spec(BUCKETS))
    first = by_arrow(table, batches[3], version=3)
    again = by_spark(spark, table, batches[3], version=3)  # a re-run of the batch on Spark: recognised
    assert again.already_committed and again.entry.seq == first.entry.seq
    second = by_spark(spark, table, batches[4], version=4)
    assert by_arrow(table, batches[4], version=4).entry.seq == second.entry.seq  # and the other way round
    with pytest.raises(LakeSpecError, match="version 4 was already upserted"):
        by_arrow(table, batches[5], version=4)  # other data under a used version: refused, as on Spark
    replaced = by_arrow(table, batches[5], version=4, replace_version=True)
    assert sorted(replaced.entry.removed) == sorted(f.path for f in second.entry.added)
    retried = by_arrow(table, batches[6], version=6, request_id="r-6")
    assert by_arrow(table, batches[6], version=6, request_id="r-6").already_committed
    assert [e.seq for e in table.commit_log.entries(-1)][-1] == retried.entry.seq


def test_a_version_column_partial_columns_and_a_partitioned_table(spark: Any, tmp_path: Path) -> None:
    spec = {"schema": "id BIGINT NOT NULL, dt STRING, n INT, total BIGINT, label STRING, v BIGINT",
            "primary_key": ["id"], "partition_by": ["dt"], "version_column": "v",
            "bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]},
            "merge_operators": {"total": "sum", "label": "last_non_null"}, "null_values": {"label": ["-"]}}
    batches = [
        pa.table({"id": pa.array([1, 2, 3, 2, 9], pa.int32()), "dt": ["a b:c", "d1", None, "d1", "d1"],
                  "total": pa.array([5, 6, None, 7, 1], pa.int64()), "label": ["x", "-", "z", None, "w"],
                  "v": pa.array([2, 2, 2, 3, 2], pa.int64())}),  # two versions, an int source for a bigint key
        pa.table({"id": pa.array([2, 3, 4], pa.int64()), "dt": ["d1", None, "d2"],
                  "n": pa.array([1, None, 3], pa.int32()), "v": pa.array([1, 1, 1], pa.int64())}),  # partial
    ]
    paths = []
    for i, batch in enumerate(batches):
        (tmp_path / f"b{i}").mkdir()
        paths.append(tmp_path / f"b{i}" / "part-0.parquet")
        pq.write_table(batch, paths[-1])
    spark_table = LakeTable.create(str(tmp_path / "s"), spec)
    arrow_table = LakeTable.create(str(tmp_path / "a"), spec)
    for path in paths:
        by_spark(spark, spark_table, path.parent)
        by_arrow(arrow_table, path.parent)
    same_upserts(spark_table, arrow_table)
    assert any("dt=a b%3Ac" in f.path for f in arrow_table.state().files.values())
    rows = sorted(arrow_table.read(spark).collect(), key=lambda r: (r["id"], str(r["dt"])))
    assert sorted(spark_table.read(spark).collect(), key=lambda r: (r["id"], str(r["dt"]))) == rows
    assert [(r["id"], r["dt"], r["n"], r["total"], r["label"]) for r in rows] == [
        (1, "a b:c", None, 5, "x"), (2, "d1", 1, 13, None), (3, None, None, None, "z"), (4, "d2", 3, None, None),
        (9, "d1", None, 1, "w")]


def test_what_needs_spark_is_left_to_spark_and_bad_rows_are_refused_alike(spark: Any, tmp_path: Path) -> None:
    table = LakeTable.create(str(tmp_path / "t"), bdci.table_spec(BUCKETS))
    spec = stored_spec(table.state().spec)

    def source(name: str, data: pa.Table) -> Path:
        path = tmp_path / f"{name}.parquet"
        pq.write_table(data, path)
        return path

    good = source("good", pa.table({"uuid": ["a", "b"], "requests": pa.array([1, 2], pa.int64())}))
    assert unsupported(spec, arrow_source(str(good), max_bytes=LIMIT), version=1, version_column=None) is None
    with pytest.raises(NeedsSpark, match="more than 10"):
        arrow_source(str(good), max_bytes=10)
    with pytest.raises(NeedsSpark, match="not plain Parquet"):
        arrow_source(str(good), "csv", max_bytes=LIMIT)
    with pytest.raises(NeedsSpark, match="wildcards"):
        arrow_source(str(tmp_path / "*.parquet"), max_bytes=LIMIT)
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "notes.txt").write_text("not parquet")
    with pytest.raises(NeedsSpark, match="not readable Parquet"):
        arrow_source(str(tmp_path / "text"), max_bytes=LIMIT)
    (tmp_path / "nested" / "k=1").mkdir(parents=True)
    with pytest.raises(NeedsSpark, match="subdirectory"):
        arrow_source(str(tmp_path / "nested"), max_bytes=LIMIT)
    for data, why in [
        (pa.table({"uuid": ["a"], "_delete": [True]}), "delete markers"),
        (pa.table({"uuid": ["a"], "extra": [1]}), "'extra', which the table lacks"),
        (pa.table({"requests": pa.array([1], pa.int64())}), "lacks a key column"),
        (pa.table({"uuid": ["a"], "requests": pa.array([1.5])}), "'requests' is double"),
    ]:
        assert why in str(unsupported(spec, arrow_source(str(source("x", data)), max_bytes=LIMIT), version=1,
                                      version_column=None))
        with pytest.raises(NeedsSpark):
            by_arrow(table, tmp_path / "x.parquet", version=1)
    null_key = source("null_key", pa.table({"uuid": ["a", None], "requests": pa.array([1, 2], pa.int64())}))
    with pytest.raises(LakeSchemaError, match="column 'uuid' is NOT NULL in the table"):
        by_arrow(table, null_key, version=1)
    with pytest.raises(LakeSchemaError, match="column 'uuid' is NOT NULL in the table"):
        by_spark(spark, table, null_key, version=1)  # the same message as Spark's path
    versioned = source("no_version", pa.table({"uuid": ["a", "b"], "v": pa.array([1, None], pa.int64())}))
    with pytest.raises(LakeSchemaError, match=r"1 row\(s\) have no version \(NULL in 'v'\)"):
        by_arrow(table, versioned, version_column="v")
    assert table.state().files == {} and table.state().seq == spec_seq(table)


def spec_seq(table: LakeTable) -> int:
    """The seq of the table's last entry (its create: nothing was committed after it)."""
    return max(e.seq for e in table.commit_log.entries(-1))


def test_an_empty_batch_a_not_null_column_and_a_table_on_s3(spark: Any, tmp_path: Path, s3_root: str) -> None:
    spec = {"schema": "id BIGINT NOT NULL, must STRING NOT NULL, x DOUBLE", "primary_key": ["id"],
            "bucket": {"columns": ["id"], "count": 2}}
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.int64()), "must": pa.array([], pa.string())}), empty)
    partial = tmp_path / "partial.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "x": [1.5]}), partial)  # lacks the NOT NULL `must`
    spark_table = LakeTable.create(str(tmp_path / "s"), spec)
    arrow_table = LakeTable.create(str(tmp_path / "a"), spec)
    for table, upsert in ((spark_table, lambda t, p, **k: by_spark(spark, t, p, **k)), (arrow_table, by_arrow)):
        # an empty batch: the version is applied, with no files, on either path (Spark's observed nothing)
        done = upsert(table, empty, version=1)
        assert done.entry.added == () and done.entry.metadata["versions"] == [1]
        assert done.entry.metadata["fingerprint"] == "0:0:0:0" and upsert(table, empty, version=1).already_committed
        with pytest.raises(LakeSchemaError, match="column 'must' is NOT NULL in the table"):
            upsert(table, partial, version=2)
    # a table on an object store (moto's S3 on loopback), the source on local disk: files put in place, no rename
    batch = tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": pa.array([3, 1, 2], pa.int64()), "must": ["c", "a", "b"]}), batch)
    on_s3 = LakeTable.create(s3_root, spec)
    done = by_arrow(on_s3, batch, version=5)
    assert sorted(f.bucket for f in done.entry.added) == [0, 1] and done.entry.metrics["spark"] is False
    assert sorted(on_s3.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "must": "a", "x": None}, {"id": 2, "must": "b", "x": None}, {"id": 3, "must": "c", "x": None}]
