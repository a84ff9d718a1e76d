"""The Lake page inside the Airflow UI: a FastAPI app the api-server serves under /lake (plugin in `plugin.py`).

It reads table metadata (timelines, snapshots from checkpoints) and, for a commit's change counts, the data files
that commit touched (with pyarrow, bounded: `data.commit_changes`), never Spark, and only tables under the
configured roots (`[lake] roots`, env `AIRFLOW__LAKE__ROOTS`, a comma-separated list of directories).
"""
