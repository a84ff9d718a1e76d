"""`partitions: "changed"` on a query's table: read only the partitions its incremental upstreams' change windows
touched (metadata only: `ChangeWindow.partitions()`, the partitions of the files each window removed or added);
`partitions: ["<view>", ...]`: those the windows of the named incremental views touched.

An incremental step recomputes the days its changes touch from the whole upstream of those days; without this,
the read of the upstream lists every partition, whatever the query's own `WHERE dt IN (SELECT dt FROM changes)`
later keeps (Spark's dynamic partition pruning does not reach the snapshot's file list, and the `source_scans`
metrics count what the scan selected). The filter selects whole partitions, so what a step recomputes from them
is complete; it is a superset of the days the change rows name (a partition rewritten with the same rows is
read, and the query's own filter keeps nothing of it).

Per partition column of the read table: the values the windows touched, as an `in` filter. A touched partition
without a value for that column (an unpartitioned upstream, such as a dimension table: any of its changes may
concern any day; or a null partition value) leaves that column unfiltered. No touched partition at all: the
filter selects no file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeSpecError

if TYPE_CHECKING:
    from airflow_lake.lake.changes.window import ChangeWindow
    from airflow_lake.lake.spec.table_spec import TableSpec

CHANGED, ALL = "changed", "all"
CHOICES = (ALL, CHANGED)


def read_choice(value: Any, where: str, views: Sequence[str]) -> str | tuple[str, ...]:
    """The `partitions` key of a `tables` entry: "all" (the default), "changed" (in any of the source's
    incremental views: `views`), or a list of incremental view names."""
    if value is None:
        return ALL
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        unknown = [v for v in value if v.lower() not in {w.lower() for w in views}]
        if unknown:
            raise LakeSpecError(where, f"{unknown[0]!r} is not an incremental view of this source "
                                f"({', '.join(views) or 'it has none'}).",
                                "Name views of the source's `incremental` list.")
        return tuple(value)
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in CHOICES:
        raise LakeSpecError(where, f"{value!r} is not a choice of partitions.",
                            'Give "changed" (the partitions the query\'s incremental views changed), a list of '
                            'those views, or "all".')
    if text == CHANGED and not views:
        raise LakeSpecError(where, '"changed" partitions are those the query\'s incremental views changed, and '
                            "this source has no `incremental`.",
                            'Give the source an `incremental` list, or leave `partitions` out.')
    return str(text)


def windows_of(choice: str | tuple[str, ...], windows: Mapping[str, ChangeWindow]) -> list[ChangeWindow]:
    """The windows a choice of `read_choice` names ("changed": all of them), by view name."""
    if choice == CHANGED:
        return list(windows.values())
    named = {view.lower(): window for view, window in windows.items()}
    return [named[view.lower()] for view in choice]


def changed_filters(spec: TableSpec, windows: Sequence[ChangeWindow], where: str
                    ) -> tuple[tuple[Any, ...], ...] | None:
    """The filters that keep, of a table with `spec`, the partitions `windows` touched; None: every partition
    (a touched partition leaves no column filtered). Refused: a table without partition columns, a query without
    incremental views (`where` names the setting)."""
    columns = list(spec.partition_columns)
    if not columns:
        raise LakeSpecError(where, '"changed" partitions of a table without partition columns.',
                            'Leave `partitions` out (or "all") for an unpartitioned table.')
    if not windows:
        raise LakeSpecError(where, '"changed" partitions need the query\'s incremental views: there are none.',
                            'Give the source an `incremental` list, or leave `partitions` out.')
    touched = [p for window in windows for p in window.partitions()]
    if not touched:  # nothing changed upstream: no file (an `in` of no value matches none)
        return ((columns[0], "in", []),)
    out = []
    for column in columns:
        values = {p.get(column) for p in touched}
        if None in values:  # a partition without this column (or null in it): any value may be concerned
            continue
        out.append((column, "in", sorted(str(v) for v in values)))
    return tuple(out) or None
