"""Deletes (copy-on-write) of rows of plain, partitioned, bucketed and clustered tables, as one `replace` commit.
Imports `lake.commit`, `lake.spark`, `lake.format`, `lake.spec` and the floor."""
