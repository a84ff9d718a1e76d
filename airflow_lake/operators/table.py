"""Table lifecycle and upkeep operators: create a table, roll back dead instants, clean old files, vacuum orphans."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_bucket, rendered_selection


class LakeCreateTableOperator(LakeOperator):
    """Create a lake table (`create_table`); with if_exists="ignore" an identical table is left alone.

    :param schema: DDL such as "id BIGINT NOT NULL, dt STRING" (or give `columns`).
    :param partition_by: partition columns.
    :param bucket: {"columns": [...], "count": N, "sort_columns": [...]} (templated; a count such as
        ``"{{ params.buckets }}"`` is read as a number).
    :param primary_key: key columns of a primary-key table (upserted with `VersionedUpsertOperator`); it needs
        `bucket` on the key. `merge_operators` ({column: "sum"}, default "last"), `null_values` ({column:
        ["null"]} for `last_non_null`) and `version_column` complete it.
    """

    operation: ClassVar[str] = "create_table"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "schema", "partition_by", "bucket")

    def __init__(self, *, schema: str | None = None, columns: Sequence[Mapping[str, Any]] | None = None,
                 partition_by: Sequence[str] | None = None, bucket: Mapping[str, Any] | None = None,
                 primary_key: Sequence[str] | None = None, version_column: str | None = None,
                 merge_operators: Mapping[str, str] | None = None, properties: Mapping[str, str] | None = None,
                 null_values: Mapping[str, Sequence[str]] | None = None, if_exists: str = "ignore",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schema = schema
        self.columns = columns
        self.partition_by = partition_by
        self.bucket = bucket
        self.primary_key = primary_key
        self.version_column = version_column
        self.merge_operators = merge_operators
        self.properties = properties
        self.null_values = null_values
        self.if_exists = if_exists

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The create_table spec (fields left unset are omitted)."""
        fields = {
            "schema": self.schema, "columns": self.columns, "partition_by": self.partition_by,
            "bucket": self.bucket, "primary_key": self.primary_key, "version_column": self.version_column,
            "merge_operators": self.merge_operators, "properties": self.properties,
            "null_values": self.null_values, "if_exists": self.if_exists,
        }
        # a templated count ("{{ params.buckets }}") renders as text, "8.0" for a Param given as 8.0
        fields["bucket"] = rendered_bucket(self.bucket)
        return {k: v for k, v in fields.items() if v not in (None, [], {})}


class LakeRollbackOperator(LakeOperator):
    """Roll back pending instants whose writer died (or the named `instants`).

    :param instants: instant ids to roll back (templated); left out (None), every pending instant whose writer
        is dead. An empty list rolls back nothing (`noop`) — also when an upstream task or a template gives
        none ([], "[]", None, "").
    """

    operation: ClassVar[str] = "rollback"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "instants")

    def __init__(self, *, instants: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.instants = instants
        self.instants_given = instants is not None  # then an empty rendering rolls back nothing

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The rollback spec."""
        instants = rendered_selection(self.instants, "instants", given=self.instants_given)
        if instants is None:
            return {}
        return {"instants": [instants] if isinstance(instants, str) else list(instants)}


class LakeCleanOperator(LakeOperator):
    """Delete data files that no snapshot within `retain_hours` needs (default: the table's property)."""

    operation: ClassVar[str] = "clean"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "retain_hours")

    def __init__(self, *, retain_hours: float | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not _is_template(retain_hours) and retain_hours is not None:
            _hours(retain_hours, "retain_hours")
        self.retain_hours = retain_hours

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The clean spec (from the rendered field)."""
        return {} if self.retain_hours in (None, "") else {"retain_hours": _hours(self.retain_hours, "retain_hours")}


class LakeVacuumOperator(LakeOperator):
    """Delete files under the table root that no log entry holds (orphans), untouched for `older_than_hours`.

    Orphans are debris of crashed or rolled-back writers and files dropped into the table by hand; live files,
    removed files not yet cleaned and files of pending instants are never touched.

    :param older_than_hours: keep files modified more recently (templated; default: the table's
        `clean.retain.hours`). 0 deletes every orphan at once: only when no writer of an older version runs.
    :param list_only: a dry run: only list what would be deleted (templated; "true" / "false" after rendering
        are accepted). Not called `dry_run`: that name is `BaseOperator.dry_run()`.
    """

    operation: ClassVar[str] = "vacuum"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "older_than_hours", "list_only")

    def __init__(self, *, older_than_hours: float | str | None = None, list_only: bool | str = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not _is_template(older_than_hours) and older_than_hours is not None:
            _hours(older_than_hours)
        if not _is_template(list_only):
            _flag(list_only)
        self.older_than_hours = older_than_hours
        self.list_only = list_only

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The vacuum spec (from the rendered fields)."""
        spec: dict[str, Any] = {"dry_run": _flag(self.list_only)}
        if self.older_than_hours not in (None, ""):
            spec["older_than_hours"] = _hours(self.older_than_hours)
        return spec


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _hours(value: Any, name: str = "older_than_hours") -> float:
    """A finite number of hours >= 0 (a numeric string, as a rendered template gives, is fine)."""
    try:
        hours = -1.0 if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int of hundreds of digits
        hours = -1.0
    if not math.isfinite(hours) or hours < 0:
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:12]}... ({len(repr(value))} characters)"
        raise ValueError(f"{name} must be a finite number of hours >= 0, got {shown}")
    return hours


def _flag(value: Any) -> bool:
    """A boolean, or its rendered text ("true" / "false", any case)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"list_only must be true or false, got {value!r}")
