"""What a delete removes: `filters` (the syntax reads use) or `where`, a SQL boolean predicate over the table.

A `where` is data (a UI Param, a template), so it is judged by the plan Spark analyzes for it, never by its text:
it is parsed as ONE expression (`F.expr`: no statement, no second command, nothing around it to escape from) and
resolved against a relation that holds the table's columns and nothing else, so an unknown column, `_metadata` or
a helper column of the delete does not resolve. Then refused, before anything is read or committed:

- a type other than boolean (Spark's own check of a filter condition);
- a subquery (its plan is an inner child of the Filter: the `:` lines of the tree), so no other table, view or
  file is read;
- an expression that is not deterministic (Spark's own rule: it refuses one in a join condition), which covers
  `reflect`/`java_method`/`try_reflect` (Java code on the cluster) and `rand()`/`uuid()`; and the current time
  (`current_date()`, `now()`...), which would differ between the count of matches and the rewrite;
- a call of anything but Spark's built-in functions (Python UDFs, SQL functions, functions of a catalog).

The guard only analyzes: nothing is optimized or run, so no expression is evaluated while it is judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.filters import Filter, may_match, parse_filters
from airflow_lake.lake.spark.scan import filter_column
from airflow_lake.lake.spark.schema import to_struct
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SUBSTITUTE = "spark.sql.variable.substitute"
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
EVALUATING_RULE = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"
_VARIABLE = re.compile(r"\$\{(?:\w+?:)?\S+?\}")
_CODE = re.compile(r"\b(try_reflect|reflect|java_method)\s*\(", re.IGNORECASE)
_CLOCK = re.compile(r"\b(current_date|current_timestamp|now|localtimestamp|curdate)\s*\(", re.IGNORECASE)
_RELATION_LINE = re.compile(r"^.*(?:LogicalRDD|LocalRelation|Relation)\b.*$", re.MULTILINE)
_CALL = re.compile(r"(?<![\w.#`])([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\(")
_BUILTIN_CLASS = "org.apache.spark.sql.catalyst.expressions."
FIX_WHERE = ("Write `where` as one SQL boolean expression over the table's columns with Spark's built-in "
             "functions, e.g. \"user_id = 42 AND dt >= '2024-01-01'\"; to delete every row say \"true\".")


@dataclass(frozen=True)
class DeletePredicate:
    """The rows a delete removes: those for which every filter, or the `where` expression, is TRUE (a NULL
    result keeps the row, as SQL's DELETE does)."""

    filters: tuple[Filter, ...] = ()
    where: str | None = None
    raw_filters: tuple[Any, ...] = ()
    columns: frozenset[str] | None = None  # the columns a vetted `where` reads (`vet_where`)

    def describe(self) -> dict[str, Any]:
        """JSON form for the commit's metadata."""
        if self.where is not None:
            return {"where": self.where}
        return {"filters": [list(f) for f in self.raw_filters]}

    def column(self) -> Column:
        """The predicate as a Spark column (NULL where SQL gives NULL)."""
        from pyspark.sql import functions as F

        if self.where is not None:
            return F.expr(self.where)
        return reduce(lambda a, b: a & b, (filter_column(f) for f in self.filters))

    def partition_only(self, spec: TableSpec) -> bool:
        """True if `filters` name partition columns only (then a partition either matches whole or not)."""
        parts = {c.lower() for c in spec.partition_columns}
        return bool(self.filters) and all(f.column.lower() in parts for f in self.filters)

    def may_match(self, data_file: DataFile, spec: TableSpec) -> bool:
        """False only if the file's stats prove that no row matches (`filters` only; a `where` reads all)."""
        return may_match(data_file, self.filters, spec)


def parse_predicate(filters: Iterable[Sequence[Any]] | None, where: str | None, spec: TableSpec) -> DeletePredicate:
    """Exactly one of `filters` (a non-empty list, checked against the table) or `where` (checked for shape here,
    vetted by Spark with `vet_where`)."""
    if (filters is None) == (where is None):
        raise LakeSpecError("filters" if filters is not None else "where",
                            "give exactly one of `filters` and `where`." if filters is not None else
                            "a delete needs `filters` or `where` (which rows to delete).",
                            "Give `filters` such as [['user_id', '=', 42]] or `where` such as \"user_id = 42\"; "
                            "to delete every row say `where: \"true\"`.")
    if where is not None:
        if not isinstance(where, str) or not where.strip():
            raise LakeSpecError("where", f"{where!r} is not a SQL predicate.", FIX_WHERE)
        return DeletePredicate(where=where)
    assert filters is not None
    if isinstance(filters, str | Mapping) or not isinstance(filters, Iterable):
        raise LakeSpecError("filters", f"{filters!r} is not a list of filters.",
                            "Give a list such as [['user_id', '=', 42]].")
    raw = tuple(filters)
    if not raw:
        raise LakeSpecError("filters", "the filter list is empty; an empty list never means every row.",
                            "Give at least one filter such as ['user_id', '=', 42]; to delete every row say "
                            "`where: \"true\"`.")
    return DeletePredicate(filters=tuple(parse_filters(raw, spec)), raw_filters=raw)


def vet_where(spark: SparkSession, where: str, spec: TableSpec, field: str = "where") -> frozenset[str]:
    """Refuse a `where` that is not a deterministic boolean over the table's own columns (module docstring);
    return the columns it reads (as the analyzed plan names them: a superset when a literal looks like one)."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql import functions as F

    variable = _VARIABLE.search(where)
    if variable and str(spark.conf.get(SUBSTITUTE, "true")).strip().lower() == "true":
        raise LakeSpecError(field, f"the predicate holds {variable.group()!r}, which Spark replaces with a setting, an "
                            f"environment variable or a Java property before it reads it ({SUBSTITUTE} is true); "
                            "nothing was deleted.", "Write the value itself.")
    columns = spark.createDataFrame([], to_struct(spec))  # the table's columns, nothing else
    try:
        filtered = columns.where(F.expr(where))
        filtered.schema  # noqa: B018  (analyzes it: Spark Connect is lazy)
    except ParseException as err:
        raise LakeSpecError(field, f"{where!r} is not one SQL expression ({_first_line(err)}); nothing was "
                            "deleted.", FIX_WHERE) from err
    except AnalysisException as err:
        raise _analysis_error(field, where, spec, err) from err
    one = spark.range(1).select(F.lit(1).alias("__lake_one"))
    try:
        columns.join(one, F.expr(where)).schema  # noqa: B018  (Spark refuses nondeterminism in a join condition)
    except AnalysisException as err:
        if "NON_DETERMINISTIC" not in str(err).upper():
            raise _analysis_error(field, where, spec, err) from err
        code = _CODE.search(analyzed_plan(filtered))
        if code:
            raise LakeSpecError(field, f"{where!r} calls {code.group(1).lower()}() (found in the plan Spark "
                                "analyzed for it), which runs Java code on the cluster; nothing was deleted.",
                                FIX_WHERE) from err
        raise LakeSpecError(field, f"{where!r} is not deterministic (e.g. rand(), uuid()): the rows it matches "
                            "could change between the count and the rewrite. Nothing was deleted.", FIX_WHERE) from err
    plan = analyzed_plan(filtered)
    if re.search(r"^\s*:", plan, re.MULTILINE):
        raise LakeSpecError(field, f"{where!r} holds a subquery (found in the plan Spark analyzed for it); a delete "
                            "predicate reads no other table, view or file. Nothing was deleted.",
                            "Compare columns with literal values; to delete the rows of keys listed elsewhere, "
                            "give them as `filters` [['key', 'in', [...]]] (a template or an upstream task can "
                            "render the list).")
    _refuse_other_functions(spark, where, plan, field)
    clock = _CLOCK.search(plan)
    if clock:
        raise LakeSpecError(field, f"{where!r} reads the clock ({clock.group(1).lower()}()): the rows it matches "
                            "could change between the count and the rewrite, and a retry would delete other rows. "
                            "Nothing was deleted.",
                            "Write the date or time as a literal (a template renders it: \"dt < '{{ macros.ds_add("
                            "ds, -30) }}'\").")
    return referenced_columns(plan, spec)


def referenced_columns(plan: str, spec: TableSpec) -> frozenset[str]:
    """The table's columns an analyzed plan of `relation.where(...)` reads in its condition: every `name#id`
    above the relation's own line (which lists all columns). Text of a literal can only add names."""
    relations = list(_RELATION_LINE.finditer(plan))
    condition = plan[:relations[-1].start()] if relations else plan
    return frozenset(c.name for c in spec.columns
                     if re.search(rf"(?<![\w`]){re.escape(c.name)}#\d+", condition, re.IGNORECASE))


def _refuse_other_functions(spark: SparkSession, where: str, plan: str, field: str) -> None:
    """Refuse calls of functions that are not Spark's built-ins: the names called in the analyzed plan that the
    session resolves to anything else (a Python UDF, a SQL function, a catalog function). A word followed by `(`
    inside a string literal resolves to no function and is passed over."""
    for name in sorted({m.group(1) for m in _CALL.finditer(plan)}):
        try:
            function = spark.catalog.getFunction(name)
        except Exception:  # not a function: plan syntax such as `cast(`, or text of a literal
            continue
        class_name = str(function.className or "")
        if function.namespace or not class_name.startswith(_BUILTIN_CLASS):
            raise LakeSpecError(field, f"{where!r} calls {name}(), which is not a built-in Spark function (a "
                                "user-defined or catalog function runs code the delete cannot vet); nothing was "
                                "deleted.", FIX_WHERE)


def _analysis_error(field: str, where: str, spec: TableSpec, err: Exception) -> LakeSpecError:
    text = str(err)
    if "UNRESOLVED_COLUMN" in text or ("cannot be resolved" in text and "column" in text.lower()):
        return LakeSpecError(field, f"{where!r} names a column the table does not have ({_first_line(err)}); "
                             "nothing was deleted.", f"Use the table's columns: {', '.join(spec.column_names)}.")
    if "FILTER_NOT_BOOLEAN" in text:
        return LakeSpecError(field, f"{where!r} is not a boolean predicate ({_first_line(err)}); nothing was "
                             "deleted.", FIX_WHERE)
    if "UNRESOLVED_ROUTINE" in text:
        return LakeSpecError(field, f"{where!r} calls a function Spark does not know ({_first_line(err)}); nothing "
                             "was deleted.", FIX_WHERE)
    return LakeSpecError(field, f"{where!r} cannot be resolved against the table ({_first_line(err)}); nothing was "
                         "deleted.", FIX_WHERE)


def analyzed_plan(df: DataFrame) -> str:
    """The logical plan Spark analyzed for `df` (analysis only on a classic session; over Spark Connect, the
    analyzed section of `EXPLAIN EXTENDED`)."""
    explain = getattr(df, "_explain_string", None)
    if explain is not None and not hasattr(df, "_jdf"):  # Spark Connect: EXPLAIN also optimizes, and Spark's
        # optimizer evaluates expressions over inline rows (ConvertToLocalRelation): that rule is off meanwhile
        spark = df.sparkSession
        excluded = spark.conf.get(EXCLUDED_RULES, None)
        with session_conf(spark, {EXCLUDED_RULES: f"{excluded},{EVALUATING_RULE}" if excluded else EVALUATING_RULE}):
            text = str(explain(mode="extended"))
        start, end = text.find("== Analyzed Logical Plan =="), text.find("== Optimized Logical Plan ==")
        if start < 0 or end < 0:
            raise LakeError(f"cannot check the predicate: Spark printed no analyzed plan ({text.strip()[:200]}).")
        return text[start:end]
    return str(df._jdf.queryExecution().analyzed().toString())


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


__all__ = ["DeletePredicate", "analyzed_plan", "parse_predicate", "referenced_columns", "vet_where"]
