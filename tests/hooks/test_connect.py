"""LakeHook over a real Spark Connect server (started by the run from the pip package, stopped by its PID):
every Spark operation gives the same tables and metrics as over spark-submit; errors, retries, kills and
settings behave as the spark-submit path's do."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import airflow_lake
from airflow_lake.datagen import bdci
from airflow_lake.exceptions import LakeJobError
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.format.instants import pending
from tests.lake.upsert.oracle import as_strings, bdci_expected
from tests.support import write_source

pytestmark = pytest.mark.slow

Submit = Callable[[str, dict[str, Any]], dict[str, Any]]
# metrics that name where or when, not what: they differ between any two runs
VOLATILE = ("instant", "request_id", "table", "plan_id", "seconds", "started", "completed", "path", "file_names")


def events_source(path: Path, start: int, rows: int) -> str:
    ids = list(range(start, start + rows))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array([(i * 7919) % 1000 for i in ids]),
                             "y": [float((i * 104729) % 997) for i in ids],
                             "dt": ["d1" if i % 3 else "d2" for i in ids]}), path)
    return str(path)


def chains(root: Path, data: Path) -> list[list[tuple[str, dict[str, Any]]]]:
    """Every Spark operation (and the metadata ones between them) on three tables, as two independent chains."""
    events, daily, users = str(root / "events"), str(root / "daily"), str(root / "users")
    batches = bdci_batches(data)
    tables = [
        ("create_table", {"table": events, "schema": "id BIGINT, x BIGINT, y DOUBLE, dt STRING",
                          "partition_by": ["dt"]}),
        ("write", {"table": events, "source": {"path": events_source(data / "a.parquet", 0, 600)}}),
        ("write", {"table": events, "source": {"path": events_source(data / "b.parquet", 600, 600)}}),
        ("write", {"table": events, "mode": "overwrite", "partitions": [{"dt": "d2"}], "source": {
            "query": "SELECT id, x, y + 1 AS y, dt FROM e WHERE dt = 'd2'", "tables": {"e": events}}}),
        ("schedule_clustering", {"table": events, "layout": "ZORDER", "sort_columns": ["x", "y"], "min_commits": 1,
                                 "small_file_limit_bytes": 10**12, "max_bytes_per_group": 10**12}),
        ("execute_clustering", {"table": events}),
        ("bucket_rewrite", {"table": events, "bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]}}),
        ("create_table", {"table": daily, "schema": "id BIGINT, total DOUBLE, n BIGINT",
                          "bucket": {"columns": ["id"], "count": 4, "sort_columns": ["id"]}}),
        # a bucketed read grouped by its bucket key into a table bucketed the same way: no shuffle at all
        ("write", {"table": daily, "max_exchanges": 0, "source": {
            "query": "SELECT id, sum(y) AS total, count(*) AS n FROM e GROUP BY id", "tables": {"e": events}}}),
        ("clean", {"table": events}),
    ]
    upserts = [
        ("create_table", {"table": users, **bdci.table_spec(4)}),
        *[("versioned_upsert", {"table": users, "source": {"path": str(batches[v])}, "version": v}) for v in (2, 0)],
        ("compact_upserts", {"table": users}),
        ("versioned_upsert", {"table": users, "source": {"path": str(batches[1])}, "version": 1}),  # late, lower
    ]
    return [tables, upserts]


def bdci_batches(data: Path) -> list[Path]:
    if not (data / "bdci").exists():
        return bdci.generate(data / "bdci", 400, keys=300)
    return sorted((data / "bdci").glob("*.parquet"), key=lambda p: int(p.stem.split("-")[-1]))


def run_chain(submit: Submit, chain: list[tuple[str, dict[str, Any]]], name: str) -> list[dict[str, Any]]:
    """Run the steps in order; the metrics of each, without what names where or when."""
    out = []
    for index, (operation, spec) in enumerate(chain):
        metrics = submit(operation, {**spec, "request_id": f"{name}/{index}"})
        out.append({"operation": operation, **{k: v for k, v in metrics.items()
                                               if not any(word in k for word in VOLATILE)}})
    return out


def table_state(spark: Any, path: str) -> dict[str, Any]:
    """Rows (sorted) and file layout (partition, bucket, rows) of a table's latest snapshot."""
    table = LakeTable.open(path)
    rows = sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in table.read(spark).collect())
    files = sorted((json.dumps(f.partition, sort_keys=True), f.bucket, f.rows) for f in table.snapshot().files)
    return {"rows": rows, "files": files, "head": table.commit_log.head()}


def test_every_operation_gives_the_same_tables_and_metrics_as_over_spark_submit(
        spark: Any, connect_conn_id: str, tmp_path: Path) -> None:
    bdci_batches(tmp_path / "data")
    # spark-submit: the two chains at once (each step is its own process); Spark Connect: one after the other
    # (pyspark marks the whole client process as a Connect client while a session is open)
    with ThreadPoolExecutor(2) as pool:
        submitted = list(pool.map(lambda i, c: run_chain(LakeHook().submit, c, f"c{i}"), range(2),
                                  chains(tmp_path / "submit", tmp_path / "data")))
    connected = [run_chain(LakeHook(connect_conn_id).submit, c, f"c{i}")
                 for i, c in enumerate(chains(tmp_path / "connect", tmp_path / "data"))]
    assert connected == submitted
    by_op = {m["operation"]: m for chain in connected for m in chain}
    assert by_op["execute_clustering"].get("files_after", 99) < by_op["execute_clustering"].get("files_before", 0), \
        by_op["execute_clustering"]
    assert by_op["bucket_rewrite"]["files_added"] == 8  # 2 days x 4 buckets
    for name in ("events", "daily", "users"):
        assert table_state(spark, str(tmp_path / "connect" / name)) == \
            table_state(spark, str(tmp_path / "submit" / name)), name
    # and right, not only alike: the upserts merged in version order despite the late version 1
    expected = bdci_expected(bdci_batches(tmp_path / "data"), [0, 1, 2])
    got = as_strings(LakeTable.open(str(tmp_path / "connect" / "users")).read(spark).toPandas(),
                     columns=list(expected.columns[1:]))
    assert got.equals(expected)
    daily = LakeTable.open(str(tmp_path / "connect" / "daily")).read(spark)
    assert daily.count() == 1200 and daily.agg({"n": "sum"}).collect()[0][0] == 1200


def test_retries_bad_input_and_settings_over_spark_connect(connect_conn_id: str, tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    hook = LakeHook(connect_conn_id)
    hook.submit("create_table", {"table": table, "schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"]})
    source = write_source(tmp_path / "a.parquet", range(20), ["a", "b"] * 10)
    first = hook.submit("write", {"table": table, "source": {"path": source}, "request_id": "r-1"})
    retry = hook.submit("write", {"table": table, "source": {"path": source}, "request_id": "r-1"})
    assert (first["already_committed"], retry["already_committed"]) == (False, True)
    assert retry["instant"] == first["instant"] and LakeTable.open(table).snapshot().rows == 20
    # a bad spec fails before any session opens; bad data fails with the job's own words, like spark-submit's
    with pytest.raises(LakeSpecError, match="mode"):
        hook.submit("write", {"table": table, "source": {"path": source}, "mode": "upsert"})
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"idx": [1], "dt": ["a"]}), wrong)
    errors = []
    for each in (hook, LakeHook()):
        with pytest.raises(LakeJobError) as info:
            each.submit("write", {"table": table, "source": {"path": str(wrong)}})
        errors.append(str(info.value).split("\n")[0])
    assert "airflow-lake: LakeSchemaError: schema mismatch" in errors[0]
    assert errors[0] == errors[1].split(" Cannot execute")[0]
    with pytest.raises(LakeJobError, match=r"spark\.executor\.memory .*CANNOT_MODIFY_CONFIG.*only runtime SQL"):
        LakeHook(connect_conn_id, spark_conf={"spark.executor.memory": "2g"}).submit(
            "write", {"table": table, "source": {"path": source}})
    with pytest.raises(LakeJobError, match="driver_memory"):
        LakeHook(connect_conn_id, driver_memory="2g").submit("write", {"table": table, "source": {"path": source}})
    assert LakeTable.open(table).snapshot().rows == 20 and pending(LakeTable.open(table).storage) == []


def test_the_workers_must_run_our_airflow_lake(connect_conn_id: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    source = write_source(tmp_path / "a.parquet", range(5), "a")
    # not shipped: the server's own installation (this venv) is used and checked
    LakeHook(connect_conn_id, ship_package=False).submit("write", {"table": table, "source": {"path": source}})
    monkeypatch.setattr(airflow_lake, "__version__", "99.0")  # a task newer than the server
    with pytest.raises(LakeJobError, match=r"import airflow_lake 0\.1\.0 .* this task runs 99\.0"):
        LakeHook(connect_conn_id, ship_package=False).submit("write", {"table": table, "source": {"path": source}})
    assert LakeTable.open(table).snapshot().rows == 5
