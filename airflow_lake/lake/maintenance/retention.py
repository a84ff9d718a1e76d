"""The retention guard of `clean` and orphan removal (delta-rs' `enforce_retention_duration`, Delta's
`retentionDurationCheck`): a retention shorter than the table's `clean.retain.hours` is refused unless forced.

The table property is the table owner's promise to its readers: snapshots that were current within it keep their
files (time travel, `restore`, a long query or a writer still working from one), and a file younger than it is
never taken for an orphan (a running writer may be about to commit it). A job's shorter retention would break that
promise for every other user of the table, so it needs `force` — and a forced run is logged and recorded.
"""

from __future__ import annotations

import logging

from airflow_lake.lake.errors import LakeSpecError

log = logging.getLogger(__name__)
PROPERTY = "clean.retain.hours"


def check_hours(hours: float, field: str) -> None:
    """Refuse a retention that is not a number of hours >= 0 (NaN too: it would make every file look old)."""
    if not hours >= 0:
        raise LakeSpecError(field, f"{hours!r} is not a number of hours >= 0.", "Give a number of hours >= 0.")


def guard(table_url: str, field: str, hours: float, configured: float, *, force: bool, operation: str,
          risk: str) -> bool:
    """Refuse `hours` shorter than the table's `configured` retention unless `force`; True if the run is forced
    past it (then a warning is logged: the caller records `forced: true` in its entry)."""
    check_hours(hours, field)
    if hours >= configured:
        return False
    if force:
        log.warning("%s of %s with %s = %g h, shorter than the table's %s = %g h, forced: %s", operation, table_url,
                    field, hours, PROPERTY, configured, risk)
        return True
    suggested = f"{hours:g}" if hours > 0 else "0.01"
    raise LakeSpecError(
        field, f"{hours:g} h is shorter than the table's retention ({PROPERTY} = {configured:g} h): {risk}. "
        "Nothing was deleted.",
        f"Give {field} >= {configured:g}, or lower the retention for this table: set the table property {PROPERTY} "
        f"(a number of hours > 0, e.g. \"{suggested}\") at create in `properties`, or later with alter_table "
        "(`properties`); or, to go below it for this run only, pass force: true (operator force=True, CLI --force).")
