"""Primary-key tables: versioned upserts (merge-on-read), the merged read, and compaction."""
