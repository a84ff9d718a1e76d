"""Built-in operations; importing this package registers them."""

from __future__ import annotations

from airflow_lake.jobs.ops import (
    bucket_rewrite,
    clean,
    compact_upserts,
    create_table,
    execute_clustering,
    remove_orphan_files,
    rollback_pending,
    schedule_clustering,
    versioned_upsert,
    write,
)

__all__ = ["bucket_rewrite", "clean", "compact_upserts", "create_table", "execute_clustering", "remove_orphan_files",
           "rollback_pending", "schedule_clustering", "versioned_upsert", "write"]
