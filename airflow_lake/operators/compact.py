"""Deprecated module: `CompactOperator` is `CompactUpsertsOperator` in `airflow_lake.operators.compact_upserts`
now (issue 21, docs/api.md "Names"); the old name still imports from here."""

from __future__ import annotations

from typing import Any

from airflow_lake.operators.compact_upserts import CompactUpsertsOperator
from airflow_lake.operators.renamed import warn_renamed


class CompactOperator(CompactUpsertsOperator):
    """Deprecated: use `CompactUpsertsOperator` (`airflow_lake.operators.compact_upserts`)."""

    def __init__(self, **kwargs: Any) -> None:
        warn_renamed(CompactOperator, CompactUpsertsOperator)
        super().__init__(**kwargs)


__all__ = ["CompactOperator"]
