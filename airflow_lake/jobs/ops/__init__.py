"""Built-in operations; importing this package registers them."""

from __future__ import annotations

from airflow_lake.jobs.ops import (
    alter_table,
    bucket_rewrite,
    clean,
    compact_upserts,
    create_table,
    delete,
    execute_clustering,
    publish,
    remove_orphan_files,
    restore,
    rollback_pending,
    schedule_clustering,
    versioned_upsert,
    write,
)

__all__ = ["alter_table", "bucket_rewrite", "clean", "compact_upserts", "create_table", "delete", "execute_clustering",
           "publish", "remove_orphan_files", "restore", "rollback_pending", "schedule_clustering", "versioned_upsert",
           "write"]
