"""Merge operators of primary-key tables: how a column's values from many upserts become one.

Two kinds, and the only two that stay right when upserts arrive out of order and after compactions:

- *last-wins* operators (`stamped`): the value with the highest order stamp (whether it qualifies, its
  version, its row order within the upsert) wins. `last` takes every value, `last_non_null` ranks values
  that are neither NULL nor one of the column's `null_values` above those that are. A compacted base keeps
  each column's stamp, so a late upsert with a lower version still loses to what it should lose to.
- *commutative* aggregates (`sum`, `max`, `min`): any order gives the same result, so the base keeps the
  aggregate and a late upsert adds to it. (Each version is applied once: see `versions.py`.)

Adding an operator: subclass `MergeOperator` (set `name`; `stamped` with `qualifies`, or `aggregate` for a
commutative, associative aggregate), and expose the class under the entry point group
`airflow_lake.merge_operators` of your package, installed where the Spark driver runs. A table spec then
names it in `merge_operators`. An operator that depends on the order of upserts and is not last-wins (a
concatenation in version order) cannot be compacted safely and is not supported.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from airflow_lake.lake.spec import sql_text

if TYPE_CHECKING:
    from pyspark.sql import Column

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "airflow_lake.merge_operators"
DEFAULT = "last"


class MergeOperator:
    """One way to merge a column. Subclasses set `name` and either `stamped = True` (override
    `qualifies` if needed) or `aggregate`."""

    name: ClassVar[str] = ""
    stamped: ClassVar[bool] = False
    # last-wins: whether `qualifies` ranks values (the base then keeps whether the winner qualified)
    qualified: ClassVar[bool] = False
    # whether the spec may give `null_values` for a column merged by this operator
    takes_null_values: ClassVar[bool] = False

    def qualifies(self, value: Column, null_values: Sequence[str]) -> Column | None:
        """Last-wins: a condition under which a value outranks values that fail it (None: every value)."""
        return None

    def qualifies_sql(self, value: str, null_values: Sequence[str]) -> str | None:
        """`qualifies` as Spark SQL text over the SQL expression `value` (None: every value), so a projection of
        many columns is parsed in one call to Spark. Callers use `qualifies_as_sql`, which refuses it for an
        operator whose `qualifies` is overridden below its `qualifies_sql`."""
        return None

    def aggregate(self, value: Column) -> Column:
        """Commutative operators: the aggregate of the column's values (NULLs are absent values)."""
        raise NotImplementedError(f"merge operator {self.name!r} has no aggregate")


def qualifies_as_sql(op: MergeOperator, value: str, null_values: Sequence[str]) -> str | None:
    """`op.qualifies_sql`, or `NotImplementedError` when an operator overrides `qualifies` below where
    `qualifies_sql` is defined (an operator of a package that knows only `qualifies`): its condition is then built
    from `qualifies` as before."""
    def owner(attribute: str) -> type:
        return next(c for c in type(op).__mro__ if attribute in vars(c))

    if not issubclass(owner("qualifies_sql"), owner("qualifies")):
        raise NotImplementedError(f"merge operator {op.name!r} has no SQL form of `qualifies`")
    return op.qualifies_sql(value, null_values)


class Last(MergeOperator):
    """The value of the highest version (within a version, the last row)."""

    name = "last"
    stamped = True


class LastNonNull(MergeOperator):
    """The last value that is not NULL and not one of `null_values`; if there is none, the last value."""

    name = "last_non_null"
    stamped = True
    qualified = True
    takes_null_values = True

    def qualifies(self, value: Column, null_values: Sequence[str]) -> Column | None:
        from pyspark.sql import functions as F

        condition = value.isNotNull()
        if null_values:
            condition = condition & ~value.cast("string").isin([F.lit(v) for v in null_values])
        return F.coalesce(condition, F.lit(False))

    def qualifies_sql(self, value: str, null_values: Sequence[str]) -> str | None:
        condition = f"({value} IS NOT NULL)"
        if null_values:
            listed = ", ".join(sql_text.text(v) for v in null_values)
            condition = f"({condition} AND (NOT (CAST({value} AS STRING) IN ({listed}))))"
        return f"coalesce({condition}, false)"


class Sum(MergeOperator):
    name = "sum"

    def aggregate(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.sum(value)


class Max(MergeOperator):
    name = "max"

    def aggregate(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.max(value)


class Min(MergeOperator):
    name = "min"

    def aggregate(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.min(value)


BUILT_IN: dict[str, type[MergeOperator]] = {op.name: op for op in (Last, LastNonNull, Sum, Max, Min)}


@functools.cache
def registry() -> dict[str, type[MergeOperator]]:
    """Built-in operators and those of installed packages (entry point group `airflow_lake.merge_operators`;
    a plugin cannot replace a built-in). Read once per process."""
    from importlib.metadata import entry_points  # (here: most processes never need it; ~10 ms to import)

    out = dict(BUILT_IN)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception:  # a broken plugin must not break every table
            log.warning("merge operator entry point %r failed to load", point.name, exc_info=True)
            continue
        if isinstance(loaded, type) and issubclass(loaded, MergeOperator) and loaded.name and \
                loaded.name not in BUILT_IN:
            out[loaded.name] = loaded
        else:
            log.warning("entry point %r is not a MergeOperator subclass with a new name; ignored", point.name)
    return out


def operator(name: str) -> MergeOperator:
    """The operator called `name` (KeyError if unknown)."""
    return registry()[name]()
