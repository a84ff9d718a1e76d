"""Primary-key tables: versioned upserts (merge-on-read), the merged read, and compaction.
Imports `lake.commit`, `lake.spark`, `lake.format`, `lake.spec` and the floor."""
