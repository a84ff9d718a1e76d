"""Built-in operations; importing this package registers them."""

from __future__ import annotations

from airflow_lake.jobs.ops import (
    bucket_rewrite,
    clean,
    compact,
    create_table,
    execute_clustering,
    rollback,
    schedule_clustering,
    vacuum,
    versioned_upsert,
    write,
)

__all__ = ["bucket_rewrite", "clean", "compact", "create_table", "execute_clustering", "rollback",
           "schedule_clustering", "vacuum", "versioned_upsert", "write"]
