"""Changes between two snapshots (Delta's change data feed, Hudi's incremental query, Iceberg's changelog view):
`window.py` finds the data-changing commits between two snapshots and the files each removed and added (no Spark);
`spark_read.py` reads them as rows with `_change_type`, `_commit_seq` and `_commit_time` — plain tables commit by
commit as the multiset difference of removed and added rows, primary-key tables as net changes per key over the
merged state. `LakeTable.changes` is the door. Imports `lake.upsert` (the merged read), `lake.spark`,
`lake.format`, `lake.spec` and the floor."""
