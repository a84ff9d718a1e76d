"""Spark query plans as text, and what they say: shuffles (Exchanges) and bucket pruning."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# `Exchange hashpartitioning(...)` is a shuffle; `BroadcastExchange` and `ReusedExchange` are not new shuffles.
_SHUFFLE = re.compile(r"(?<![A-Za-z])Exchange\b")


def plan_text(df: DataFrame) -> str:
    """The physical plan Spark would run for `df` (as `df.explain()` prints it), classic or Spark Connect."""
    explain = getattr(df, "_explain_string", None)  # Spark Connect
    if explain is not None:
        return str(explain(mode="simple"))
    session = df.sparkSession
    jvm = session.sparkContext._jvm
    assert jvm is not None
    return str(jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "simple"))


def shuffles(plan: str) -> int:
    """How many shuffle Exchanges a plan text holds."""
    return len(_SHUFFLE.findall(plan))


# Logical operators that never make Spark plan a shuffle: scans and row-by-row steps over them.
_NARROW = frozenset({"Project", "Filter", "Relation", "SubqueryAlias", "View", "LocalRelation", "Range",
                     "CollectMetrics"})
# What `scan_chain` takes: row-by-row steps, observed metrics (`DataFrame.observe`) and one scan of files.
_CHAIN = frozenset({"Project", "SubqueryAlias", "CollectMetrics", "Relation"})
_NODE = re.compile(r"^([ :|+-]*)([A-Za-z]\w*)")


def query_shuffles(df: DataFrame) -> int:
    """`shuffles(plan_text(df))`, without planning the query again when its analyzed plan shows it cannot shuffle.

    An explain plans the whole query (optimizer and physical planning: ~0.05 s quiet, ~0.2 s on a busy driver, per
    write). A plan of scans, projections and filters only, with no subquery (a `:` branch: a join, a union, an
    expression's subquery), has no Exchange; the analyzed plan is already there (a classic DataFrame is analyzed
    when it is made), so reading its text costs one call. Anything else, and Spark Connect, is planned as before."""
    analyzed = _analyzed(df)
    return 0 if analyzed is not None and _narrow(analyzed) else shuffles(plan_text(df))


def scan_chain(df: DataFrame) -> bool:
    """Whether `df`'s analyzed plan is one chain of projections (and observed metrics) over a scan of files by path
    (`spark.read.parquet(path)`, not a catalog table): such a query has no shuffle, its rows are in no hash
    partitioning (only a catalog table's bucketed scan is), and nothing in it lets the optimizer drop or add a
    shuffle put over it (a filter or a local relation may turn out empty, and an empty plan has no Exchange). A
    write of it then knows its shuffles without planning the query (an explain, ~0.01-0.02 s per write on a quiet
    driver, more on a busy one). Read from the analyzed plan, which a classic DataFrame already has; False over
    Spark Connect."""
    analyzed = _analyzed(df)
    nodes = None if analyzed is None else _chain(analyzed, _CHAIN)
    if nodes is None:
        return False
    relations = [node for node in nodes if node.group(2) == "Relation"]
    # `Relation db.table[...]` is a catalog table, `Relation [...]` a scan of files by path
    return len(relations) == 1 and relations[0].string[relations[0].end():].startswith(" [")


def _analyzed(df: DataFrame) -> str | None:
    """The analyzed plan's text of a classic DataFrame (one call: it is made when the DataFrame is), else None."""
    if getattr(df, "_explain_string", None) is not None or not hasattr(df, "_jdf"):
        return None
    return str(df._jdf.queryExecution().analyzed().toString())


def _narrow(tree: str) -> bool:
    """Whether a logical plan's text shows only `_NARROW` operators in one chain (and no word `Exchange`)."""
    return _chain(tree, _NARROW) is not None


def _chain(tree: str, operators: frozenset[str]) -> list[re.Match[str]] | None:
    """The nodes of a logical plan's text, if they are one chain (no `:` branch) of `operators` and the word
    `Exchange` is nowhere in it; else None."""
    if _SHUFFLE.search(tree):
        return None
    nodes = []
    for line in tree.splitlines():
        if not line.strip():
            continue
        node = _NODE.match(line)
        if node is None or ":" in node.group(1) or node.group(2) not in operators:
            return None
        nodes.append(node)
    return nodes


def hash_partitioning(df: DataFrame) -> tuple[list[str], int] | None:
    """The columns and count `df`'s rows are hash-partitioned by, as Spark plans it (e.g. a bucketed scan,
    or a group-by on its bucket key), if they are output columns; None if not, or unknown (Spark Connect)."""
    if getattr(df, "_explain_string", None) is not None or not hasattr(df, "_jdf"):
        return None
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        # before it runs, AQE reports no partitioning; the plan it starts from does (after the preparation
        # rules: bucket coalescing in joins changes the partition count)
        try:
            plan = plan.initialPlan()
        except Exception:  # older Spark: the plan before those rules
            plan = plan.inputPlan()
    partitioning = plan.outputPartitioning()
    if partitioning.getClass().getSimpleName() != "HashPartitioning":
        return None
    output = plan.output()
    names = {output.apply(i).exprId().id(): output.apply(i).name() for i in range(output.size())}
    expressions = partitioning.expressions()
    columns = []
    for i in range(expressions.size()):
        expression = expressions.apply(i)
        if expression.getClass().getSimpleName() != "AttributeReference" or expression.exprId().id() not in names:
            return None  # a computed or projected-away key: not what the table's columns hash to
        columns.append(str(names[expression.exprId().id()]))
    return columns, int(partitioning.numPartitions())


def hashed_into(df: DataFrame, columns: list[str], count: int) -> bool:
    """Whether `df`'s rows are already hash-partitioned by exactly `columns` into `count` partitions.

    Classic sessions read the plan's output partitioning. Over Spark Connect, where the plan objects are out
    of reach, Spark answers by its own rule: a `repartition(count, columns)` on rows partitioned that way
    is dropped from the physical plan (EnsureRequirements), so it adds no Exchange.
    """
    if getattr(df, "_explain_string", None) is None and hasattr(df, "_jdf"):
        found = hash_partitioning(df)
        return found is not None and found[1] == count and \
            [c.lower() for c in found[0]] == [c.lower() for c in columns]
    from pyspark.sql import functions as F

    repartitioned = df.repartition(count, *[F.col(f"`{c}`") for c in columns])
    return shuffles(plan_text(repartitioned)) == shuffles(plan_text(df))
