"""Simple filters (`=`, `IN`, `<`, `<=`, `>`, `>=`, `BETWEEN`) and skipping files by their stats."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.data_files import ColumnStats, DataFile
from airflow_lake.lake.spec.strict import check_depth
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import STATS_TYPES, coerce_literal, is_decimal

OPERATORS = ("=", "in", "<", "<=", ">", ">=", "between")


@dataclass(frozen=True)
class Filter:
    """One predicate `column op value`; `values` holds the coerced literal(s) for stats."""

    column: str
    op: str
    value: Any  # as the user gave it, for Spark
    values: tuple[Any, ...]  # coerced for comparison with stats

    def describe(self) -> str:
        """Readable form."""
        return f"{self.column} {self.op.upper()} {self.value!r}"


def parse_filters(raw: Iterable[Sequence[Any]] | None, spec: TableSpec) -> list[Filter]:
    """Validate `[(column, op, value), ...]` against the table; raise naming the bad filter."""
    out = []
    for i, item in enumerate(raw or ()):
        field = f"filters[{i}]"
        check_depth(item, field, limit=2)  # [column, op, [v1, v2]]: deeper is no filter (and overflows repr)
        if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 3:
            raise LakeSpecError(field, f"{item!r} is not (column, op, value).",
                                "Write filters like ['amount', '>=', 10].")
        column, op, value = item
        op = str(op).strip().lower()
        op = "=" if op == "==" else op
        if op not in OPERATORS:
            raise LakeSpecError(field, f"unknown operator {op!r}.", f"Use one of {', '.join(OPERATORS)}.")
        if not isinstance(column, str) or not spec.has_column(column):
            raise LakeSpecError(field, f"unknown column {column!r}.",
                                f"Use one of {', '.join(spec.column_names)}.")
        col = spec.column(column)
        if op == "in":
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise LakeSpecError(field, "IN needs a list of values.", "Write ['k', 'in', [1, 2]].")
            value = list(value)
            literals = tuple(coerce_literal(col.type, v, field) for v in value)
        elif op == "between":
            if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
                raise LakeSpecError(field, "BETWEEN needs [low, high].", "Write ['x', 'between', [1, 9]].")
            value = list(value)
            literals = tuple(coerce_literal(col.type, v, field) for v in value)
        else:
            literals = (coerce_literal(col.type, value, field),)
        if any(isinstance(v, float) and math.isnan(v) for v in literals):
            # Spark orders NaN above every number and makes NaN = NaN true: min/max stats cannot bound it
            raise LakeSpecError(field, "NaN cannot be a filter literal: Spark compares NaN unlike any number "
                                "(NaN = NaN is true, NaN is greater than every number).",
                                "Filter NaN rows in Spark with isnan(column).")
        if any(v is None for v in literals):
            raise LakeSpecError(field, "comparison with NULL matches no row.",
                                "Filter on a value, or select nulls in Spark with isNull().")
        out.append(Filter(col.name, op, value, literals))
    return out


def _bounds(data_file: DataFile, column: str, spec: TableSpec) -> ColumnStats | None:
    if column in data_file.partition:
        text = data_file.partition[column]
        if text is None:
            return ColumnStats(None, None, data_file.rows)
        value = coerce_literal(spec.column(column).type, text, "partition")
        return ColumnStats(value, value, 0)
    col = spec.column(column)
    type_name = col.type
    if type_name not in STATS_TYPES or is_decimal(type_name):
        return None
    # Stats are kept by physical name. A file written before the column was added has none: never skipped.
    stats: ColumnStats | None = data_file.stats.get(col.physical)
    if stats is None or type_name not in _WIDENED_STATS:
        return stats
    return _widened(stats, type_name)


# Types a column may have been widened to from a type whose stats compare differently (`types.widening_problem`):
# a date's stats are ISO text, a timestamp_ntz filter value is microseconds.
_WIDENED_STATS = frozenset({"timestamp_ntz"})


def _widened(stats: ColumnStats, type_name: str) -> ColumnStats | None:
    """Stats written under an older, narrower type, in the form filter values of `type_name` take (None: they
    cannot be compared, so the file is read)."""
    if type_name == "timestamp_ntz" and (isinstance(stats.min, str) or isinstance(stats.max, str)):
        try:  # a date widened to timestamp_ntz reads as its midnight
            low = None if stats.min is None else coerce_literal(type_name, f"{stats.min}T00:00:00", "stats")
            high = None if stats.max is None else coerce_literal(type_name, f"{stats.max}T00:00:00", "stats")
        except LakeSpecError:
            return None
        return ColumnStats(low, high, stats.null_count)
    return stats


def may_match(data_file: DataFile, filters: Iterable[Filter], spec: TableSpec) -> bool:
    """False only if the file's stats prove that no row passes every filter."""
    for flt in filters:
        stats = _bounds(data_file, flt.column, spec)
        if stats is None:
            continue
        if stats.null_count >= data_file.rows and data_file.rows > 0:
            return False  # all null: no comparison is true
        lo, hi = stats.min, stats.max
        try:
            if not _range_may_match(flt, lo, hi):
                return False
        except TypeError:  # stats of an unexpected type: never skip on them
            continue
    return True


def _range_may_match(flt: Filter, lo: Any, hi: Any) -> bool:
    vals = flt.values
    if flt.op == "=":
        return not ((lo is not None and vals[0] < lo) or (hi is not None and vals[0] > hi))
    if flt.op == "in":
        return any(not ((lo is not None and v < lo) or (hi is not None and v > hi)) for v in vals)
    if flt.op == "<":
        return lo is None or lo < vals[0]
    if flt.op == "<=":
        return lo is None or lo <= vals[0]
    if flt.op == ">":
        return hi is None or hi > vals[0]
    if flt.op == ">=":
        return hi is None or hi >= vals[0]
    low, high = vals
    return not ((hi is not None and hi < low) or (lo is not None and lo > high))
