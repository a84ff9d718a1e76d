"""Publishing: each commit of our log written again as the open formats' metadata (Delta Lake's `_delta_log/`, an
Iceberg catalog's snapshots), so engines without this package read exactly our snapshots. Our log stays the truth;
what is published follows it, in order, and is caught up by the next commit or `airflow-lake publish`.

Imports `lake.format`, `lake.spec` and the floor (the operations above call it through `LakeTable`).
"""
