"""The guard of a query source: a read-only query over the lake tables it names, judged on the plan Spark analyzed
for it, not on its text.

What a query does depends on how Spark resolves it (quoting, comments, `IDENTIFIER(...)`, unicode escapes, views,
CTEs, subqueries, lambdas), so the guard asks Spark: it analyzes the query and reads the plan (`EXPLAIN EXTENDED`,
a SQL command, so the same on classic and Spark Connect sessions). Refused, before any action runs the query:

- anything but a query (it is parsed as a subquery: no INSERT, DDL, SET, CACHE or second statement);
- code on the cluster: reflection (`reflect`, `java_method`, `try_reflect` call static Java methods), a script
  transformation (`TRANSFORM ... USING 'command'` starts a process), protobuf functions (they load Java classes
  and descriptor files named by the query);
- `${...}` while Spark substitutes variables (it would put Spark settings, environment variables and Java system
  properties into the query);
- files and tables other than the lake tables given in `tables`: direct file queries (``parquet.`/path` ``) do not
  resolve (`spark.sql.runSQLOnFiles` is false while the query is analyzed), and a plan that reads another view,
  a catalog table or files outside the registered views is refused.

Planning must not run what it plans: Spark's optimizer evaluates projections and filters over inline rows
(`ConvertToLocalRelation`: `SELECT reflect(...) FROM VALUES (1)` would call Java during `EXPLAIN`), so that rule
is off while the guard plans; the session's settings are put back afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.sources.strict_files import refuse_lake_table_path
from airflow_lake.lake.spark.session_conf import session_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RUN_SQL_ON_FILES = "spark.sql.runSQLOnFiles"
SUBSTITUTE = "spark.sql.variable.substitute"
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
EVALUATING_RULE = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"
# A plan string must be whole: Spark shortens argument lists after 25 entries ("... 5 more fields"), which
# would hide a call placed as the 26th argument of concat(...).
GUARD_CONF = {
    RUN_SQL_ON_FILES: "false",
    "spark.sql.debug.maxToStringFields": "2147483647",
    "spark.sql.maxPlanStringLength": "2147483632",
}

# How each code-running node prints in a plan (function names as Spark's registry spells them).
_CODE = re.compile(r"(try_reflect|reflect|java_method|from_protobuf|to_protobuf)\s*\(|(ScriptTransformation)",
                   re.IGNORECASE)
_CODE_WORDS = re.compile(r"reflect|java_method|from_protobuf|to_protobuf|ScriptTransformation", re.IGNORECASE)
# IDENTIFIER(<expression>) that Spark resolves during analysis: a string can then become a function name.
_COMPUTED_NAME = "unresolvedidentifier"
# Spark's variable reference (ConfigReader): ${name}, ${env:NAME}, ${system:name}, ${spark:name}, ...
_VARIABLE = re.compile(r"\$\{(?:\w+?:)?\S+?\}")
_VIEW = re.compile(r"View \(")
_RELATION = re.compile(r"(?<![A-Za-z])Relation(?:V2)? ?([^\s\[]*)\[|HiveTableRelation|StreamingRelation")
# The catalog tables `buckets/catalog.py` creates for bucketed reads of lake tables.
_READ_TABLE = re.compile(r"spark_catalog\.default\.lake_[0-9a-f]{32}")
_MISSING = re.compile(r"TABLE_OR_VIEW_NOT_FOUND\] The table or view ((?:`(?:[^`]|``)*`\.?)+)")


def read_only_query(spark: SparkSession, query: str, field: str = "source.query", *,
                    views: Collection[str] = ()) -> DataFrame:
    """The query as a DataFrame, once its plan shows it reads only the lake tables registered as `views` and
    runs no code; otherwise a LakeSpecError on `field`, and nothing of the query has run."""
    _refuse_variables(spark, query, field)
    subquery = _wrapped(query)
    with _guarded(spark):
        df = _analyzed(spark, subquery, field)
        plan = _checked_plan(spark, subquery)
        _refuse_code(spark, query, plan, field)
        _refuse_other_reads(spark, df, plan, views, field)
    return df


def _wrapped(query: str) -> str:
    # `spark.sql` runs commands eagerly, so the query is parsed as a subquery, which can hold only a query
    # (SELECT, WITH ... SELECT, VALUES, FROM ... SELECT); the newline ends a trailing `--` comment.
    return f"SELECT * FROM (\n{query}\n) AS lake_source"  # noqa: S608  (the user's own query)


@contextmanager
def _guarded(spark: SparkSession) -> Iterator[None]:
    excluded = spark.conf.get(EXCLUDED_RULES, None)
    rules = f"{excluded},{EVALUATING_RULE}" if excluded else EVALUATING_RULE
    with session_conf(spark, {**GUARD_CONF, EXCLUDED_RULES: rules}):
        yield


def _refuse_variables(spark: SparkSession, query: str, field: str) -> None:
    variable = _VARIABLE.search(query)
    if variable and str(spark.conf.get(SUBSTITUTE, "true")).strip().lower() == "true":
        raise LakeSpecError(field, f"the query holds {variable.group()!r}, which Spark replaces with a Spark "
                            "setting, an environment variable or a Java system property before it reads the query "
                            f"({SUBSTITUTE} is true in this session); nothing was run.",
                            "Write the value itself, or build the text as '$' || '{...}'.")


def _analyzed(spark: SparkSession, subquery: str, field: str) -> DataFrame:
    from pyspark.errors import AnalysisException, ParseException

    try:
        return spark.sql(subquery)
    except ParseException as err:
        raise LakeSpecError(field, f"this is not a read-only query, or it does not parse ({_first_line(err)}); "
                            "nothing was run.",
                            "Give a SELECT (or WITH ... SELECT, VALUES) with no `;`, no INSERT, DDL, SET or "
                            "CACHE.") from err
    except AnalysisException as err:
        _refuse_file_query(err, field)
        raise LakeSpecError(field, f"the query cannot be resolved: {_first_line(err)}",
                            "Name only the views given in `tables` and their columns.") from err


def _refuse_file_query(err: Exception, field: str) -> None:
    """A relation that did not resolve because it names files (``parquet.`/path` ``): say so."""
    missing = _MISSING.search(str(err))
    if missing is None:
        return
    parts = [p.replace("``", "`") for p in re.findall(r"`((?:[^`]|``)*)`", missing.group(1))]
    if len(parts) != 2 or not any(c in parts[1] for c in "/\\:"):
        return
    refuse_lake_table_path(parts[1], field)  # the clearer message when the files are a lake table's
    raise LakeSpecError(field, f"the query reads files directly ({missing.group(1)}); a query source reads only "
                        "the lake tables given in `tables`. Nothing was run.",
                        "Write the files with a `path` source, or name a lake table in `tables`.") from err


class _NotAnalyzed(Exception):
    """`EXPLAIN` printed an analysis error where the plan goes (it does not raise one)."""


def _plan(spark: SparkSession, subquery: str) -> str:
    """The plans `EXPLAIN EXTENDED` prints (parsed, analyzed, optimized, physical; planning only: nothing runs),
    all of them: a string literal is printed as its bare text, so no section heading can be trusted to end a
    section (`'== Optimized Logical Plan =='` in a SELECT list)."""
    text = str(spark.sql(f"EXPLAIN EXTENDED {subquery}").collect()[0][0])
    if "== Analyzed Logical Plan ==" not in text or "== Optimized Logical Plan ==" not in text:
        raise _NotAnalyzed(text.strip()[:300])
    return text


def _checked_plan(spark: SparkSession, subquery: str) -> str:
    """`_plan` of a query Spark has already analyzed: no plan is a failure of the check, not of the query."""
    try:
        return _plan(spark, subquery)
    except _NotAnalyzed as err:
        raise LakeError(f"cannot check the query: Spark printed no analyzed plan for it ({err}).") from err


def _refuse_code(spark: SparkSession, query: str, plan: str, field: str) -> None:
    """Refuse a plan with a code-running node. A string literal is printed as its bare text in plans, so a
    literal holding `reflect(` looks like a call: when Spark cannot compute function names from strings (no
    `IDENTIFIER(expression)`), the query is planned again with such words blanked inside its string literals;
    a real call is still in that plan (or the plan fails), a literal no longer is."""
    from pyspark.errors import AnalysisException, ParseException

    found = _CODE.search(plan)
    if found is None:
        return
    if _COMPUTED_NAME not in plan.lower():
        variant = _blank_code_words_in_strings(query)
        if variant != query:
            try:
                spark.sql(_wrapped(variant))  # raises what EXPLAIN would only print
                variant_plan: str | None = _plan(spark, _wrapped(variant))
            except (AnalysisException, ParseException, _NotAnalyzed):  # a blanked word was code, or mattered
                variant_plan = None
            if variant_plan is not None and _CODE.search(variant_plan) is None:
                return
    if found.group(2):
        raise LakeSpecError(field, "the query runs an external command (TRANSFORM ... USING); nothing was run.",
                            "Express the transformation in SQL.")
    name = found.group(1).lower()
    if "protobuf" in name:
        raise LakeSpecError(field, f"the query calls {name}(), which loads Java classes or descriptor files named "
                            "by the query on the cluster; nothing was run.",
                            "Decode protobuf data before it is written to the source files.")
    raise LakeSpecError(field, f"the query calls {name}() (found in the plan Spark analyzed for it), which runs "
                        "Java code on the cluster; nothing was run.",
                        "Write it without reflect(), try_reflect() or java_method().")


def _refuse_other_reads(spark: SparkSession, df: DataFrame, plan: str, views: Collection[str],
                        field: str) -> None:
    """Refuse a plan that reads anything but the registered views: another view (global, persistent), a catalog
    table other than the bucketed-read tables of these views, or files outside them."""
    allowed_views = [f"{_quoted(v).lower()}, [" for v in views]
    lower = plan.lower()
    for match in _VIEW.finditer(plan):
        if not any(lower.startswith(v, match.end()) for v in allowed_views):
            raise _other_read(field, plan[match.end():match.end() + 200].split(", [", 1)[0])
    tables = _read_tables(spark, views)
    for match in _RELATION.finditer(plan):
        name = match.group(1)
        if match.group(0).startswith("Relation ") and (name == "" or name in tables):
            continue  # the files of a registered view, or a bucketed-read table of one
        raise _other_read(field, name or match.group(0).strip("[ "))
    allowed_files: set[str] = set()
    for view in views:
        allowed_files.update(spark.table(_quoted(view)).inputFiles())
    outside = sorted(set(df.inputFiles()) - allowed_files)
    if outside:
        raise _other_read(field, f"the file {outside[0]}")


def _read_tables(spark: SparkSession, views: Collection[str]) -> set[str]:
    """The bucketed-read catalog tables the registered views are made of, from their own plans."""
    if not views:
        return set()
    union = " UNION ALL ".join(f"SELECT 1 AS one FROM {_quoted(v)}" for v in views)  # noqa: S608  (quoted names)
    plan = _checked_plan(spark, _wrapped(union))
    return {m.group(1) for m in _RELATION.finditer(plan) if m.group(1) and _READ_TABLE.fullmatch(m.group(1))}


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _other_read(field: str, what: str) -> LakeSpecError:
    return LakeSpecError(field, f"the query reads {what}, which is not one of the lake tables given in `tables`; "
                         "nothing was run.",
                         "Name every lake table the query reads in `tables` and query it by that name.")


def _blank_code_words_in_strings(query: str) -> str:
    """The query with the words the code check looks for blanked inside its string literals (Spark's lexer:
    '...' and "..." with backslash escapes, r'...' raw; backquoted names and comments are left alone)."""
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        char = query[i]
        raw = char in "rR" and i + 1 < n and query[i + 1] in "'\"" and (i == 0 or not _is_word(query[i - 1]))
        if char in "'\"" or raw:
            start = i + 2 if raw else i + 1
            quote, end = query[start - 1], start
            while end < n and query[end] != quote:
                end += 2 if query[end] == "\\" and not raw else 1
            end = min(end, n)
            out.append(query[i:start] + _CODE_WORDS.sub(lambda m: "\x01" * len(m.group()), query[start:end]))
            i = end
            if i < n:
                out.append(query[i])
                i += 1
        elif char == "`":
            end = query.find("`", i + 1)
            end = n if end < 0 else end + 1
            out.append(query[i:end])
            i = end
        elif query.startswith("--", i):
            end = query.find("\n", i)
            end = n if end < 0 else end
            out.append(query[i:end])
            i = end
        elif query.startswith("/*", i):
            end = _comment_end(query, i)
            out.append(query[i:end])
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _comment_end(query: str, start: int) -> int:
    depth, i = 0, start
    while i < len(query):
        if query.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif query.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(query)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__

