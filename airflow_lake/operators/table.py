"""Deprecated module: the operators that lived here moved (issue 21, docs/api.md "Names").

`LakeCreateTableOperator` is in `airflow_lake.operators.create_table`; `LakeCleanOperator`,
`LakeRollbackPendingOperator` (was `LakeRollbackOperator`) and `LakeRemoveOrphanFilesOperator` (was
`LakeVacuumOperator`) are in `airflow_lake.operators.maintenance`. The old names still import from here.
"""

from __future__ import annotations

from typing import Any

from airflow_lake.operators.create_table import LakeCreateTableOperator
from airflow_lake.operators.maintenance import (
    LakeCleanOperator,
    LakeRemoveOrphanFilesOperator,
    LakeRollbackPendingOperator,
)
from airflow_lake.operators.renamed import warn_renamed


class LakeRollbackOperator(LakeRollbackPendingOperator):
    """Deprecated: use `LakeRollbackPendingOperator` (`airflow_lake.operators.maintenance`)."""

    def __init__(self, **kwargs: Any) -> None:
        warn_renamed(LakeRollbackOperator, LakeRollbackPendingOperator)
        super().__init__(**kwargs)


class LakeVacuumOperator(LakeRemoveOrphanFilesOperator):
    """Deprecated: use `LakeRemoveOrphanFilesOperator` (`airflow_lake.operators.maintenance`). Not `clean`:
    that is what Delta calls VACUUM, and it stays `LakeCleanOperator`."""

    def __init__(self, **kwargs: Any) -> None:
        warn_renamed(LakeVacuumOperator, LakeRemoveOrphanFilesOperator)
        super().__init__(**kwargs)


__all__ = ["LakeCleanOperator", "LakeCreateTableOperator", "LakeRollbackOperator", "LakeVacuumOperator"]
