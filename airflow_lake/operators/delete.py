"""`LakeDeleteOperator`: delete rows of a lake table that match filters or a SQL predicate (copy-on-write), or keys
of a primary-key table at a version (a versioned delete)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_selection


class LakeDeleteOperator(LakeOperator):
    """Delete the rows matching `filters` or `where` (exactly one) with the `delete` operation, as one `replace`
    commit; returns its metrics (files_scanned, files_rewritten, files_dropped, rows_deleted, rows_kept, ...). A
    delete that matches nothing commits nothing (`noop`).

    A primary-key table takes `keys` and `version` instead (a versioned delete): the keys are removed as of
    `version` — what upserts of versions <= it said — also when those upserts arrive later (a backfill); upserts
    of higher versions bring a key back. Returns keys_deleted, version, files_added, already_committed.

    :param filters: filters as reads take them ([["user_id", "=", 42]], [["user_id", "in", [1, 2]]]; templated,
        also as JSON or Python text). An empty list is refused: it never means every row.
    :param where: a SQL boolean predicate over the table's columns ("user_id = 42 AND dt < '2024-01-01'";
        templated, so it may come from a UI Param). It is judged by the plan Spark analyzes for it before
        anything is read: only the table's columns and Spark's built-in deterministic functions, no subquery.
        To delete every row, say "true".
    :param keys: primary-key tables: the keys, as a list of {column: value} objects over the key columns (with
        the partition values on a partitioned table), or a source like an upsert's ({"path": ..., "format": ...}
        or {"query": ..., "tables": {...}}) whose columns are the key columns (templated). A value rendered as text
        (``{"user_id": "{{ params.user_id }}"}``) is converted to its column's type where that is exact ("42" is 42;
        "4.0" or "abc" is refused naming the key).
    :param version: with `keys`: the version of the delete (templated: e.g. ``"{{ ds_nodash }}"``); a new version,
        not one an upsert used; higher than the keys' upserts to remove all of them.
    """

    operation: ClassVar[str] = "delete"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "filters", "where", "keys", "version")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeOperator.template_fields_renderers, "filters": "json", "where": "sql", "keys": "json",
    }
    ui_color = "#f4cccc"

    def __init__(self, *, filters: Sequence[Sequence[Any]] | str | None = None, where: str | None = None,
                 keys: Sequence[Mapping[str, Any]] | Mapping[str, Any] | str | None = None,
                 version: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        given = [n for n, v in (("filters", filters), ("where", where), ("keys", keys)) if v is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of filters, where and keys (primary-key tables), got {given or 'none'}")
        if (keys is None) != (version is None):
            raise ValueError("keys and version go together (a versioned delete of a primary-key table)")
        self.filters = filters
        self.where = where
        self.keys = keys
        self.version = version

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The delete spec."""
        if self.keys is not None:
            # rendered text is read back; a template or an upstream task that gave nothing deletes nothing (refused)
            return {"keys": rendered_selection(self.keys, "keys", given=True), "version": self.version}
        if self.where is not None:
            return {"where": self.where}
        # a template or an upstream task that gave nothing selects nothing: refused by the operation, never "all"
        return {"filters": rendered_selection(self.filters, "filters", given=True)}
