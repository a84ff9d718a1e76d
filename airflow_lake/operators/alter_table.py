"""`LakeAlterTableOperator`: change a lake table's schema or properties (metadata only, no Spark job)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator


class LakeAlterTableOperator(LakeOperator):
    """Alter a lake table with the `alter_table` operation; returns its metrics (changes, columns, instant, ...).

    One commit applies every change, in order, or none (each is checked before anything is written). It writes
    no data file: files written before keep their columns and read under the new schema (NULL for an added
    column, widened values, a renamed column under its new name, a dropped column no more). Writers that started
    before it fail with a retryable conflict (Airflow's retry runs them against the new schema).

    :param changes: the changes (templated), e.g. ``[{"add": "c2", "type": "bigint", "after": "c1"},
        {"add": "c0", "type": "int", "first": True}, {"widen": "amount", "type": "double"}, {"drop": "old"},
        {"rename": "a", "to": "b"}, {"set_properties": {"clean.retain.hours": "24"}},
        {"unset_properties": ["user.owner"]}]``. Partition, bucket, primary-key and version columns are
        protected: a change that would move rows is refused, saying why.
    """

    operation: ClassVar[str] = "alter_table"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "changes")
    template_fields_renderers: ClassVar[dict[str, str]] = {**LakeOperator.template_fields_renderers,
                                                           "changes": "json"}

    def __init__(self, *, changes: Sequence[Mapping[str, Any]] | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(changes, Sequence) and not isinstance(changes, str) and not changes:
            raise ValueError("changes must list at least one change, got []")
        self.changes = changes

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The alter_table spec (a template that rendered JSON text, e.g. from a Param, is parsed)."""
        changes: Any = self.changes
        if isinstance(changes, str):
            try:
                changes = json.loads(changes)
            except ValueError as err:
                raise ValueError(f"changes rendered to {changes!r}, which is not a JSON list of changes") from err
        return {"changes": list(changes) if isinstance(changes, Sequence) and not isinstance(changes, str)
                else changes}
