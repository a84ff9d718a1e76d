"""Chains of every Spark operation (and the metadata ones between them) on three tables, for the tests that run the
same operations by two paths (spark-submit and Spark Connect, local disk and an object store) and compare what they
give: the tables (rows and file layout) and the metrics, apart from those that name where or when."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.datagen import bdci
from airflow_lake.lake import LakeTable

Step = tuple[str, dict[str, Any]]
Submit = Callable[[str, dict[str, Any]], dict[str, Any]]
# metrics that name where or when, not what: they differ between any two runs
VOLATILE = ("instant", "request_id", "table", "plan_id", "seconds", "started", "completed", "path", "file_names")
TABLES = ("events", "daily", "users")


def events_source(path: Path, start: int, rows: int) -> str:
    """A Parquet file of `rows` events (id, x, y, dt) from id `start`."""
    ids = list(range(start, start + rows))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array([(i * 7919) % 1000 for i in ids]),
                             "y": [float((i * 104729) % 997) for i in ids],
                             "dt": ["d1" if i % 3 else "d2" for i in ids]}), path)
    return str(path)


def chains(root: str | Path, data: Path, source: Callable[[str], str] = str) -> list[list[Step]]:
    """Every Spark operation (and the metadata ones between them) on three tables under `root` (a directory or a
    store URL), as two independent chains; `source` maps a local source file to the path the chain reads it by
    (e.g. a copy on the store)."""
    events, daily, users = (f"{root}/{name}" for name in TABLES)
    batches = bdci_batches(data)
    tables = [
        ("create_table", {"table": events, "schema": "id BIGINT, x BIGINT, y DOUBLE, dt STRING",
                          "partition_by": ["dt"]}),
        ("write", {"table": events, "source": {"path": source(events_source(data / "a.parquet", 0, 600))}}),
        ("write", {"table": events, "source": {"path": source(events_source(data / "b.parquet", 600, 600))}}),
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
        *[("versioned_upsert", {"table": users, "source": {"path": source(str(batches[v]))}, "version": v})
          for v in (2, 0)],
        ("compact_upserts", {"table": users}),
        ("versioned_upsert", {"table": users, "source": {"path": source(str(batches[1]))}, "version": 1}),  # late
    ]
    return [tables, upserts]


def bdci_batches(data: Path) -> list[Path]:
    """Three versioned batches of BDCI users (made once under `data`), in version order."""
    if not (data / "bdci").exists():
        return bdci.generate(data / "bdci", 400, keys=300)
    return sorted((data / "bdci").glob("*.parquet"), key=lambda p: int(p.stem.split("-")[-1]))


def stable(operation: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """An operation's metrics without those that name where or when."""
    return {"operation": operation, **{k: v for k, v in metrics.items() if not any(word in k for word in VOLATILE)}}


def run_chain(submit: Submit, chain: list[Step], name: str) -> list[dict[str, Any]]:
    """Run the steps in order; the metrics of each, without what names where or when."""
    return [stable(operation, submit(operation, {**spec, "request_id": f"{name}/{index}"}))
            for index, (operation, spec) in enumerate(chain)]


def table_state(spark: Any, path: str) -> dict[str, Any]:
    """Rows (sorted) and file layout (partition, bucket, rows) of a table's latest snapshot."""
    table = LakeTable.open(path)
    rows = sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in table.read(spark).collect())
    files = sorted((json.dumps(f.partition, sort_keys=True), f.bucket, f.rows) for f in table.snapshot().files)
    return {"rows": rows, "files": files, "head": table.commit_log.head()}
