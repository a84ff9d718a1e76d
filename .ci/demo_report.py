"""Print what the demo's DAG runs did: per step its time, rows, files and shuffles; per layer its tables'
rows, files and buckets; the DM table's files before and after clustering and the files a sample dashboard
query reads. Reads the lake tables' timelines, the DAG test logs and Airflow's database (no Spark).

    python .ci/demo_report.py steps LOG...      # per step, from `airflow dags test` logs
    python .ci/demo_report.py query LAKE_ROOT DAY  # files a sample DM query reads
    python .ci/demo_report.py layers LAKE_ROOT     # rows / files / buckets per table
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from airflow_lake.lake import LakeTable

SAMPLE_FILTERS = [["category", "=", "music"], ["plays_7d", ">=", 20]]


def results(log: str) -> list[dict[str, Any]]:
    """The metrics each lake task logged (`AIRFLOW_LAKE_METRICS`: spark-submit and Spark Connect alike)."""
    out = []
    for line in Path(log).read_text(encoding="utf-8").splitlines():
        if "AIRFLOW_LAKE_METRICS " in line:
            out.append(json.loads(line.split("AIRFLOW_LAKE_METRICS ", 1)[1].rsplit("}", 1)[0] + "}"))
    return out


def task_times(dag_id: str) -> dict[str, float]:
    """Wall time of each task of the latest run of `dag_id` (mapped tasks summed), from Airflow's database."""
    db = Path(os.environ["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(db) as con:
        run = con.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
        rows = con.execute("SELECT task_id, duration FROM task_instance WHERE dag_id = ? AND run_id = ?",
                           (dag_id, run[0])).fetchall() if run else []
    times: dict[str, float] = {}
    for task_id, duration in rows:
        times[task_id] = times.get(task_id, 0.0) + float(duration or 0.0)
    return times


def steps(logs: list[str]) -> None:
    for log in logs:
        name = Path(log).stem
        dag_id = "lake_maintenance" if "maintenance" in name else "lake_ods_to_dm"
        print(f"  {name}")
        times = task_times(dag_id) if log == logs[-1] or dag_id == "lake_maintenance" else {}
        for m in results(log):
            table = m["table"].rsplit("/", 1)[-1]
            op = m["operation"]
            shuffles = f"  exchanges: query {m['query_exchanges']}, write {m['write_exchanges']}" \
                if "query_exchanges" in m else ""
            if op == "execute_clustering":
                what = f"{m.get('files_before')} files -> {m.get('files_after')} files ({m.get('layout')})"
            elif op == "versioned_upsert":
                what = f"version {m.get('versions')}: {m.get('rows')} rows, +{m.get('files_added')} files" + \
                    (" (already there)" if m.get("already_committed") else "")
            else:
                what = f"+{m.get('rows_added', 0)} rows, +{m.get('files_added', 0)} -{m.get('files_removed', 0)} files"
            print(f"    {op:<19} {table:<15} {what:<45} {m.get('duration_seconds', 0):>6.1f} s{shuffles}")
        if times:
            total = sum(times.values())
            slowest = ", ".join(f"{t} {s:.0f} s" for t, s in sorted(times.items(), key=lambda x: -x[1])[:4])
            print(f"    task time {total:.0f} s in {len(times)} tasks (slowest: {slowest})")


def layers(root: str) -> None:
    for path in sorted(Path(root).iterdir()):
        table = LakeTable.open(str(path))
        spec = table.spec
        files = table.snapshot().files
        rows = sum(f.rows for f in files)
        bucket = f"{spec.bucket.count} buckets on {', '.join(spec.bucket.columns)}" if spec.bucket else "plain"
        key = f", key {', '.join(spec.primary_key)}" if spec.primary_key else ""
        parts = len({f.partition_key() for f in files})
        print(f"  {path.name:<15} {rows:>8} rows  {len(files):>4} files  {parts:>2} partition(s)  {bucket}{key}")


def query(root: str, day: str) -> None:
    table = LakeTable.open(f"{root}/dm_work_7d")
    day_files = [f for f in table.snapshot().files if f.partition.get("dt") == day]
    picked = table.scan([["dt", "=", day], *SAMPLE_FILTERS]).files
    filters = [["dt", "=", day], *SAMPLE_FILTERS]
    print(f"  dm_work_7d filtered by {filters} reads {len(picked)} of {len(day_files)} files of the day "
          f"({len(day_files) - len(picked)} skipped by their min/max stats)")


def engines(root: str) -> None:
    """Each table as DuckDB reads it through the published Delta log, against our own read and a plain Parquet glob."""
    import os

    import duckdb  # the dev install's (duckdb + duckdb-ext-delta from PyPI)
    import duckdb_ext  # type: ignore[import-not-found]

    connection = duckdb.connect()
    extensions = os.path.join(os.path.dirname(next(iter(duckdb_ext.__path__))), "duckdb_ext", "extensions")
    connection.execute("SET extension_directory = ?", [extensions])
    connection.execute("LOAD delta")
    for path in sorted(Path(root).iterdir()):
        table = LakeTable.open(str(path))
        published = table.publish().delta_seq  # (nothing to do: every commit published itself)
        ours = table.to_arrow()
        theirs = connection.execute("SELECT * FROM delta_scan(?)", [str(path)]).fetch_arrow_table()
        theirs = theirs.select(ours.column_names).cast(ours.schema)  # (DuckDB names UTC Etc/UTC)
        same = sorted(map(str, ours.to_pylist())) == sorted(map(str, theirs.to_pylist()))
        glob = connection.execute("SELECT count(*) FROM read_parquet(?)", [f"{path}/**/*.parquet"]).fetchone()
        print(f"  {path.name:<15} Delta version {published} = seq {table.commit_log.head()}: DuckDB reads "
              f"{theirs.num_rows:>6} rows, {'the same rows as' if same else 'NOT the rows of'} airflow-lake "
              f"({ours.num_rows}); a plain Parquet glob reads {glob[0] if glob else 0}")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"steps": lambda: steps(args), "layers": lambda: layers(args[0]), "query": lambda: query(*args),
     "engines": lambda: engines(args[0])}[command]()
