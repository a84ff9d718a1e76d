"""Trino (476, a server of its own: `tests/engines/trino.py`) reads what we publish: after appends, a partition
overwrite, a copy-on-write delete, a rename and a restore, with stray Parquet files beside the live ones, its Delta
Lake connector returns our rows at every version (`FOR VERSION AS OF n`, n = our sequence number), and its Iceberg
connector, reading the same SQLite catalog pyiceberg publishes to as Iceberg's JDBC catalog, our rows at every
snapshot. And Trino's Delta connector refuses to vacuum or optimize our table (our writer feature), so it deletes
no file."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from airflow_lake.lake.table import LakeTable
from tests.engines.trino import TrinoError, TrinoServer, require_trino
from tests.lake.publish import iceberg_readers
from tests.lake.publish.walked_table import DAY1, SCHEMA, bag, walk

pytestmark = pytest.mark.slow  # starts a Trino server



@pytest.fixture(scope="module")
def trino(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrinoServer]:
    """One Trino server for the module's tests (each adds catalogs of its own)."""
    server_dir = require_trino()
    with TrinoServer.start(tmp_path_factory.mktemp("trino"), server_dir) as server:
        yield server


def test_trino_reads_the_delta_log_and_the_iceberg_catalog_at_every_version(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trino: TrinoServer) -> None:
    walked = walk(spark, tmp_path, monkeypatch)
    table, catalog, versions, head = walked.table, walked.catalog, walked.versions, walked.head
    path = table.url

    trino.add_delta_catalog("delta_reads", tmp_path / "trino-metastore")
    trino.register_delta_table("delta_reads", "lake", "t", Path(path).as_uri())
    for version in versions:
        got = trino.records(f"SELECT * FROM delta_reads.lake.t FOR VERSION AS OF {version}")
        want = table.to_arrow(as_of=version)
        assert bag(got) == bag(want.to_pylist()), f"Delta version {version}"
        assert got == [] or sorted(got[0]) == sorted(want.column_names), f"Delta version {version}: columns"
    renamed = trino.records(f"SELECT label FROM delta_reads.lake.t FOR VERSION AS OF {head - 1}")
    assert {r["label"] for r in renamed} >= {"renamed", "n0"}  # `name` in the older files, read as `label`
    latest = trino.records("SELECT * FROM delta_reads.lake.t")
    assert bag(latest) == bag(table.to_arrow().to_pylist())
    assert sorted(latest[0]) == ["amount", "dt", "id", "name"]  # the restored schema
    history = trino.records('SELECT version FROM delta_reads.lake."t$history"')
    assert sorted(r["version"] for r in history) == list(range(head + 1))  # one Delta version per log entry

    published = catalog.load_table("db.t")
    snapshots = {v: iceberg_readers.snapshot_of_seq(published, v) for v in versions}
    at = [v for v in versions if snapshots[v] is not None]
    assert head in at and len(at) >= 5  # one snapshot per commit that changed files
    trino.add_iceberg_jdbc_catalog("iceberg_reads", tmp_path / "catalog.db", iceberg_readers.CATALOG,
                                   f"file://{tmp_path}/warehouse")
    seqs = {r["snapshot_id"]: r["seq"] for r in trino.records(
        """SELECT snapshot_id, summary['lake.seq'] AS seq FROM iceberg_reads.db."t$snapshots\"""")}
    assert seqs == {snapshots[v]: str(v) for v in at}
    for version in at:
        got = trino.records(f"SELECT * FROM iceberg_reads.db.t FOR VERSION AS OF {snapshots[version]}")
        assert bag(got) == bag(table.to_arrow(as_of=version).to_pylist()), f"Iceberg snapshot of seq {version}"
    assert bag(trino.records("SELECT * FROM iceberg_reads.db.t")) == bag(table.to_arrow().to_pylist())


def test_trino_refuses_to_vacuum_or_optimize_our_delta_table(spark: SparkSession, tmp_path: Path,
                                                              trino: TrinoServer) -> None:
    path = tmp_path / "t"
    table = LakeTable.create(str(path), {"schema": SCHEMA, "partition_by": ["dt"]})
    table.write(spark.createDataFrame([(1, "a", 1, DAY1)], SCHEMA))
    table.write(spark.createDataFrame([(2, "b", 2, DAY1)], SCHEMA))  # a second file in the partition: optimizable
    live = Path(path) / table.snapshot().files[0].path
    stray = live.with_name("stray-" + live.name)  # a file no log names: what a foreign VACUUM would delete
    shutil.copy(live, stray)
    before = sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file())
    # as a careless user would set it: no retention floor, writes to local files allowed
    trino.add_catalog("delta_writes", "delta_lake", {
        "hive.metastore": "file", "hive.metastore.catalog.dir": (tmp_path / "trino-metastore").as_uri(),
        "fs.native-local.enabled": "true", "local.location": "/", "delta.register-table-procedure.enabled": "true",
        "delta.vacuum.min-retention": "0s", "delta.enable-non-concurrent-writes": "true"})
    trino.register_delta_table("delta_writes", "lake", "t", path.as_uri())
    with pytest.raises(TrinoError, match=r"NOT_SUPPORTED: Cannot execute vacuum procedure with \[airflowLakeOwned\]"):
        trino.execute("CALL delta_writes.system.vacuum('lake', 't', '0s')")
    with pytest.raises(TrinoError, match=r"NOT_SUPPORTED: Unsupported writer features: \[airflowLakeOwned\]"):
        trino.execute("ALTER TABLE delta_writes.lake.t EXECUTE optimize")
    assert sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file()) == before  # nothing written or deleted
    assert stray.exists()
    assert bag(trino.records("SELECT * FROM delta_writes.lake.t")) == bag(table.to_arrow().to_pylist())
