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
