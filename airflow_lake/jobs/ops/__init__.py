"""Built-in operations; importing this package registers them."""

from __future__ import annotations

from airflow_lake.jobs.ops import clean, create_table, rollback, vacuum, write

__all__ = ["clean", "create_table", "rollback", "vacuum", "write"]
