"""Upkeep operators: roll back pending instants, clean replaced files, remove orphan files (restore is in
`operators/restore.py`).

Names from the field (docs/api.md, "Names"): `clean` is Hudi's cleaner (Delta's VACUUM), `remove_orphan_files`
Iceberg's action of that name; `rollback_pending` only rolls back instants that never completed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_selection


class LakeRollbackPendingOperator(LakeOperator):
    """Roll back pending instants whose writer died (or the named `instants`); completed commits are refused
    (undoing one is a restore: `LakeRestoreOperator`).

    :param instants: instant ids to roll back (templated); left out (None), every pending instant whose writer
        is dead. An empty list rolls back nothing (`noop`) — also when an upstream task or a template gives
        none ([], "[]", None, "").
    """

    operation: ClassVar[str] = "rollback_pending"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "instants")

    def __init__(self, *, instants: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.instants = instants
        self.instants_given = instants is not None  # then an empty rendering rolls back nothing

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The rollback_pending spec."""
        instants = rendered_selection(self.instants, "instants", given=self.instants_given)
        if instants is None:
            return {}
        return {"instants": [instants] if isinstance(instants, str) else list(instants)}


class LakeCleanOperator(LakeOperator):
    """Delete data files that no snapshot within `retain_hours` needs (default: the table's property): Hudi's
    cleaner, what Delta calls VACUUM.

    :param retain_hours: keep files removed more recently (templated; default: the table's `clean.retain.hours`).
        A shorter retention than that property is refused unless `force`.
    :param force: allow a `retain_hours` shorter than the table's `clean.retain.hours` (logged, and recorded as
        `forced` in the clean's log entry): time travel and restore to the snapshots in between then fail.
    """

    operation: ClassVar[str] = "clean"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "retain_hours")

    def __init__(self, *, retain_hours: float | str | None = None, force: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not _is_template(retain_hours) and retain_hours is not None:
            _hours(retain_hours, "retain_hours")
        self.retain_hours = retain_hours
        self.force = _flag(force, "force")

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The clean spec (from the rendered field)."""
        spec: dict[str, Any] = {"force": True} if self.force else {}
        if self.retain_hours not in (None, ""):
            spec["retain_hours"] = _hours(self.retain_hours, "retain_hours")
        return spec


class LakeRemoveOrphanFilesOperator(LakeOperator):
    """Delete files under the table root that no log entry holds (orphans), untouched for `older_than_hours`
    (Iceberg's `remove_orphan_files`).

    Orphans are debris of crashed or rolled-back writers and files dropped into the table by hand; live files,
    removed files not yet cleaned and files of pending instants are never touched.

    :param older_than_hours: keep files modified more recently (templated; default: the table's
        `clean.retain.hours`). 0 deletes every orphan at once: only when no writer of an older version runs.
    :param list_only: a dry run: only list what would be deleted (templated; "true" / "false" after rendering
        are accepted). Not called `dry_run`: that name is `BaseOperator.dry_run()`.
    :param force: allow an `older_than_hours` shorter than the table's `clean.retain.hours` (logged, and recorded
        as `forced` in the log entry); without it such a run is refused (a dry run is not).
    """

    operation: ClassVar[str] = "remove_orphan_files"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "older_than_hours", "list_only")

    def __init__(self, *, older_than_hours: float | str | None = None, list_only: bool | str = False,
                 force: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not _is_template(older_than_hours) and older_than_hours is not None:
            _hours(older_than_hours)
        if not _is_template(list_only):
            _flag(list_only)
        self.older_than_hours = older_than_hours
        self.list_only = list_only
        self.force = _flag(force, "force")

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The remove_orphan_files spec (from the rendered fields)."""
        spec: dict[str, Any] = {"dry_run": _flag(self.list_only), **({"force": True} if self.force else {})}
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


def _flag(value: Any, name: str = "list_only") -> bool:
    """A boolean, or its rendered text ("true" / "false", any case)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"{name} must be true or false, got {value!r}")
