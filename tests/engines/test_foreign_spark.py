"""Spark without airflow-lake reads Delta and Iceberg tables (tests/engines/foreign_spark.py), and Delta's Spark
refuses to write to a table whose protocol names our own writer feature, before it deletes anything.

Two JVMs for the whole file: one Delta (our pyspark 4.2 + Delta 4.4.0) for every Delta table and statement, one
Iceberg (pyspark 4.1.4 + Iceberg 1.12.0's 4.1 runtime, a JDBC catalog on pyiceberg's SQLite file).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.engines import foreign_spark
from tests.engines.foreign_spark import (
    DeltaRead,
    DeltaSql,
    IcebergRead,
    SqlResult,
    jdbc_url,
    read_icebergs,
    require_foreign_spark,
    run_delta,
)

OWN_FEATURE = "airflowLakeOwned"
REFUSED = "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"


def _bag(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset (engines return them in any order)."""
    return Counter(json.dumps(row, sort_keys=True) for row in rows)


def _parquet_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


def _write_owned_log(table: Path, column_mapping: bool, owned: bool = True) -> None:
    """A table whose Delta log is written by hand, as our publisher would: reader 1 / writer 7 with our writer
    feature; or column mapping `name` mode (reader 3 / writer 7, physical names col-N, logical `value` a rename);
    or (not `owned`) the plain reader 1 / writer 2 protocol. Two data files in partition dt=a (so OPTIMIZE has
    work) and a stray Parquet file the log does not name (as a commit's files before it is published)."""
    physical = ["col-1", "col-2"] if column_mapping else ["id", "value"]
    part = table / "data" / "w1" / "dt=a"
    part.mkdir(parents=True)
    (table / "_delta_log").mkdir()
    now = int(time.time() * 1000)
    adds = []
    for name, ids in (("f1.parquet", [1, 2, 3]), ("f2.parquet", [4, 5])):
        values = [f"v{i}" for i in ids]
        pq.write_table(pa.table({physical[0]: pa.array(ids, pa.int64()), physical[1]: values}), part / name)
        stats = {"numRecords": len(ids), "minValues": {physical[0]: min(ids), physical[1]: min(values)},
                 "maxValues": {physical[0]: max(ids), physical[1]: max(values)},
                 "nullCount": {physical[0]: 0, physical[1]: 0}}
        adds.append({"add": {"path": f"data/w1/dt=a/{name}", "size": (part / name).stat().st_size,
                             "partitionValues": {"col-3" if column_mapping else "dt": "a"}, "modificationTime": now,
                             "dataChange": True, "stats": json.dumps(stats)}})
    shutil.copy(part / "f1.parquet", part / "stray.parquet")

    def field(name: str, kind: str, column_id: int) -> dict[str, Any]:
        metadata = ({"delta.columnMapping.id": column_id, "delta.columnMapping.physicalName": f"col-{column_id}"}
                    if column_mapping else {})
        return {"name": name, "type": kind, "nullable": True, "metadata": metadata}

    schema = {"type": "struct", "fields": [field("id", "long", 1), field("value", "string", 2),
                                           field("dt", "string", 3)]}
    if column_mapping:
        protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping"],
                    "writerFeatures": ["columnMapping", OWN_FEATURE]}
        configuration = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"}
    elif owned:
        protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": [OWN_FEATURE]}
        configuration = {}
    else:
        protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
        configuration = {}
    actions = [{"commitInfo": {"timestamp": now, "operation": "WRITE"}}, {"protocol": protocol},
               {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(schema), "partitionColumns": ["dt"],
                             "configuration": configuration, "createdTime": now}}, *adds]
    (table / "_delta_log" / "00000000000000000000.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


OWNED_ROWS = [{"id": i, "value": f"v{i}", "dt": "a"} for i in (1, 2, 3, 4, 5)]


def _foreign_writes(table: Path) -> list[str]:
    """What another team's Spark might run on the table: every one must be refused."""
    at = f"delta.`{table}`"
    return [f"DELETE FROM {at} WHERE id = 1", f"VACUUM {at} RETAIN 0 HOURS DRY RUN", f"VACUUM {at} RETAIN 0 HOURS",
            f"INSERT INTO {at} VALUES (9, 'v9', 'a')", f"UPDATE {at} SET value = 'x' WHERE id = 2",
            f"OPTIMIZE {at}"]


@pytest.fixture(scope="module")
def delta_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Delta tables, and everything the Delta JVM read and ran on them (one JVM for the file)."""
    require_foreign_spark()
    import deltalake

    base = tmp_path_factory.mktemp("foreign-delta")
    plain = base / "plain"
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"], "dt": ["d1", "d1", "d2"]})
    deltalake.write_deltalake(str(plain), first, partition_by=["dt"])  # version 0
    deltalake.write_deltalake(str(plain), pa.table({"id": pa.array([4, 5], pa.int64()), "name": ["d", "e"],
                                                     "dt": ["d2", "d3"]}), mode="append")  # 1
    deltalake.DeltaTable(str(plain)).delete("id = 2")  # 2: rewrites d1's file; the removed file stays on disk
    expected = {v: deltalake.DeltaTable(str(plain), version=v).to_pyarrow_table().to_pylist() for v in (0, 1, 2)}
    owned, mapped = base / "owned", base / "owned_cm"
    _write_owned_log(owned, column_mapping=False)
    _write_owned_log(mapped, column_mapping=True)
    unowned = base / "unowned"  # the control: without our feature, the same VACUUM deletes the stray file
    _write_owned_log(unowned, column_mapping=False, owned=False)
    before = {t: _parquet_files(t) for t in (plain, owned, mapped, unowned)}
    requests: list[DeltaRead | DeltaSql] = [DeltaRead(str(plain)), DeltaRead(str(plain), 0), DeltaRead(str(plain), 1),
                                            DeltaRead(str(owned)), DeltaRead(str(mapped))]
    # the column-mapped table: the two writes that matter most (a delete of files, an append); the same check
    writes = {owned: _foreign_writes(owned), mapped: [f"VACUUM delta.`{mapped}` RETAIN 0 HOURS",
                                                      f"INSERT INTO delta.`{mapped}` VALUES (9, 'v9', 'a')"]}
    requests += [DeltaSql(sql) for t in (owned, mapped) for sql in writes[t]]
    requests += [DeltaRead(str(owned)), DeltaRead(str(mapped)), DeltaSql(f"VACUUM delta.`{unowned}` RETAIN 0 HOURS")]
    answers = run_delta(requests)
    return {"plain": plain, "owned": owned, "mapped": mapped, "unowned": unowned, "expected": expected,
            "before": before,
            "answers": answers, "writes": writes}


@pytest.mark.slow
def test_delta_latest_and_time_travel_equal_delta_rs(delta_run: dict[str, Any]) -> None:
    plain: Path = delta_run["plain"]
    latest, v0, v1 = delta_run["answers"][:3]
    expected = delta_run["expected"]
    assert _bag(latest) == _bag(expected[2]) and {r["id"] for r in latest} == {1, 3, 4, 5}
    assert _bag(v0) == _bag(expected[0]) and len(v0) == 3
    assert _bag(v1) == _bag(expected[1]) and len(v1) == 5
    live = {f.split("/", 1)[-1] for f in __import__("deltalake").DeltaTable(str(plain)).file_uris()}
    assert len(_parquet_files(plain)) > len(live)  # the delete's removed file is still on disk, and not read


@pytest.mark.slow
def test_delta_reads_a_table_with_our_writer_feature(delta_run: dict[str, Any]) -> None:
    owned, mapped = delta_run["answers"][3:5]
    assert _bag(owned) == _bag(OWNED_ROWS)  # the stray file is not read; an unknown writer feature does not stop it
    assert _bag(mapped) == _bag(OWNED_ROWS)  # column mapping: logical names over the col-N physical columns


@pytest.mark.slow
def test_delta_spark_refuses_every_write_and_deletes_nothing(delta_run: dict[str, Any]) -> None:
    answers = delta_run["answers"]
    statements = [sql for key in ("owned", "mapped") for sql in delta_run["writes"][delta_run[key]]]
    results = answers[5:5 + len(statements)]
    for sql, result in zip(statements, results, strict=True):
        assert isinstance(result, SqlResult)
        assert result.error is not None, f"Delta's Spark accepted {sql}: {result.rows}"
        assert REFUSED in result.error and OWN_FEATURE in result.error, (sql, result.error)
    for key in ("owned", "mapped"):
        table: Path = delta_run[key]
        # every file that was there is still there (VACUUM deleted nothing, the stray file included) and no
        # version was added. (A refused INSERT or UPDATE leaves the Parquet file it wrote before its commit was
        # refused: new files, never a deleted one; our orphan removal takes them.)
        assert delta_run["before"][table] <= _parquet_files(table)
        assert sorted(os.listdir(table / "_delta_log")) == ["00000000000000000000.json"]
    assert _bag(answers[-3]) == _bag(OWNED_ROWS) and _bag(answers[-2]) == _bag(OWNED_ROWS)


@pytest.mark.slow
def test_without_our_feature_delta_spark_vacuum_deletes_unpublished_files(delta_run: dict[str, Any]) -> None:
    # why the feature is needed: the same table with the plain protocol loses the file the log does not name
    unowned: Path = delta_run["unowned"]
    vacuum = delta_run["answers"][-1]
    assert isinstance(vacuum, SqlResult) and vacuum.error is None
    assert delta_run["before"][unowned] - _parquet_files(unowned) == {"data/w1/dt=a/stray.parquet"}
    assert "00000000000000000001.json" in os.listdir(unowned / "_delta_log")  # VACUUM START / END commits


@pytest.mark.slow
def test_iceberg_through_the_jdbc_catalog_on_pyiceberg_sqlite(tmp_path: Path) -> None:
    require_foreign_spark()
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    catalog = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    catalog.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "x", DoubleType(), required=False),
                    NestedField(3, "dt", StringType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="dt"))
    table = catalog.create_table("ns.t", schema=schema, partition_spec=spec)
    arrow = schema.as_arrow()
    table.append(pa.table({"id": [1, 2], "x": [0.5, 1.5], "dt": ["d1", "d2"]}, schema=arrow))
    first = table.current_snapshot()
    table.append(pa.table({"id": [3], "x": [2.5], "dt": ["d1"]}, schema=arrow))
    assert first is not None
    latest, at_first = read_icebergs([IcebergRead(uri, warehouse, "ns.t", "lake"),
                                      IcebergRead(uri, warehouse, "ns.t", "lake", snapshot_id=first.snapshot_id)])
    assert _bag(latest) == _bag(table.scan().to_arrow().to_pylist()) and len(latest) == 3
    assert _bag(at_first) == _bag(table.scan(snapshot_id=first.snapshot_id).to_arrow().to_pylist())
    assert len(at_first) == 2
    # Iceberg's JdbcCatalog left pyiceberg's catalog file usable
    again = SqlCatalog("lake", uri=uri, warehouse=warehouse).load_table("ns.t")
    again.append(pa.table({"id": [4], "x": [3.5], "dt": ["d3"]}, schema=arrow))
    assert len(again.scan().to_arrow()) == 4


def test_jdbc_url_of_pyiceberg_sqlite_uris() -> None:
    assert jdbc_url("sqlite:////tmp/c.db") == "jdbc:sqlite:/tmp/c.db"
    assert jdbc_url("sqlite+pysqlite:////tmp/c.db?x=1") == "jdbc:sqlite:/tmp/c.db"
    assert jdbc_url("sqlite:///rel.db") == "jdbc:sqlite:rel.db"
    for bad in ("sqlite://", "sqlite:///:memory:", "postgresql://u@h/db"):
        with pytest.raises(ValueError, match="SQLite file"):
            jdbc_url(bad)


def test_without_the_jars_ci_fails_and_elsewhere_skips(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the real fetch, failing: its cache directory cannot be made (a file is in the way)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    root, why = foreign_spark._fetched.__wrapped__()
    assert root is None and ".ci/fetch_jars failed (1)" in why and "not-a-directory" in why
    monkeypatch.setattr(foreign_spark, "_fetched", lambda: (root, why))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"Spark without airflow-lake cannot run: \.ci/fetch_jars failed"):
        require_foreign_spark()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Spark without airflow-lake cannot run"):
        require_foreign_spark()
