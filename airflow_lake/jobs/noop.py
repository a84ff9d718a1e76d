"""`NothingToDo`: what an operation's `parse` returns when its spec selects nothing (an empty list).

Kept apart from `jobs/ops/` so the runner and the operators can test for it without importing every operation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeSpecError

if TYPE_CHECKING:
    from airflow_lake.lake.table import LakeTable


@dataclasses.dataclass(frozen=True)
class NothingToDo:
    """What `parse` returns for a spec whose selection (partitions, instants...) is an empty list.

    An empty list selects nothing, never "everything": an upstream task that found no partitions to
    overwrite must not wipe a table. The operation then commits nothing, starts no Spark, and reports
    `noop` with the reason (the runner and the operators both stop here, before any job is submitted).
    """

    table: str
    operation: str
    field: str
    request_id: str | None
    partitioned: bool = False  # the field lists partitions: an unpartitioned table is still an error
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    check: Callable[[LakeTable], None] | None = None  # what the operation would refuse about the table
    detail: str = ""  # the reason, when it is not an empty list

    @property
    def reason(self) -> str:
        """Why nothing was done, for the metrics and the task log."""
        return self.detail or f"`{self.field}` is an empty list: nothing selected, nothing to do"

    def run(self) -> dict[str, Any]:
        """Check the table as the operation would (it exists; partitioned if partitions were listed) and
        return the no-op metrics."""
        from airflow_lake.lake.table import LakeTable

        table = LakeTable.open(self.table)
        if self.partitioned and not table.spec.partition_columns:
            raise LakeSpecError(self.field, "the table is not partitioned.", f"Drop `{self.field}`.")
        if self.check is not None:
            self.check(table)
        return {"table": table.url, "operation": self.operation, "request_id": self.request_id, "noop": True,
                "reason": self.reason, "already_committed": False, **self.extra}
