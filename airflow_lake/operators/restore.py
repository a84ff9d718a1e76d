"""`LakeRestoreOperator`: make a table's latest snapshot equal an earlier one (Delta's RESTORE, Iceberg's
`rollback_to_snapshot`), e.g. to undo a bad load before the dashboards read it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator

TARGETS = ("to_seq", "to_instant", "to_timestamp")


class LakeRestoreOperator(LakeOperator):
    """Restore a table to an earlier snapshot with the `restore` operation: one commit removes the files added
    since and re-adds the files removed since, and restores the spec, the upsert versions and the request ids of
    that snapshot (an upsert or a task whose commit was undone applies again). History stays: time travel to the
    snapshots in between still works. Refused, nothing committed, if `clean` already deleted files the snapshot
    needs. Restoring the current snapshot commits nothing (`noop`). Give exactly one of:

    :param to_seq: the log sequence number of the snapshot (templated; `airflow-lake timeline` shows them).
    :param to_instant: the id of a completed instant (templated).
    :param to_timestamp: a time, ISO-8601 (UTC without a zone) or UNIX seconds (templated): the last snapshot
        completed at or before it, e.g. `{{ data_interval_start }}` to undo what a run loaded after it.
    """

    operation: ClassVar[str] = "restore"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, *TARGETS)

    def __init__(self, *, to_seq: int | str | None = None, to_instant: str | None = None,
                 to_timestamp: float | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        given = [name for name, value in zip(TARGETS, (to_seq, to_instant, to_timestamp), strict=True)
                 if value is not None and value != ""]
        if len(given) != 1:
            raise ValueError(f"give exactly one of to_seq, to_instant, to_timestamp; got {given or 'none'}")
        self.to_seq = to_seq
        self.to_instant = to_instant
        self.to_timestamp = to_timestamp

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The restore spec (from the rendered fields; the operation checks the values)."""
        values = {"to_seq": self.to_seq, "to_instant": self.to_instant, "to_timestamp": self.to_timestamp}
        return {name: value.strip() if isinstance(value, str) else value for name, value in values.items()
                if value is not None and value != ""}
