"""Make the primary-key tables of `tests/lake/upsert/test_legacy_tables.py`: tables written by the release before
versioned deletes (commit 9b20133), whose files have no row versions (`__lake_v`, `__lake_v0`, `__lake_d`).

Run with that release's code, from a checkout of it (the fixtures are committed; this says how they were made):

    git worktree add --detach /tmp/old 9b20133 && ln -s "$PWD/.venv" /tmp/old/.venv
    cd /tmp/old && SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python OUR/tests/lake/upsert/legacy/make_fixtures.py OUT

Each table gets the same shuffled upserts (partial ones, one of only a key), a compaction in the middle (legacy base
rows) and upserts after it (legacy delta rows); `events.json` lists them for the test's oracle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.upsert import versioned_upsert

TYPES = {"k": "BIGINT", "a": "STRING", "tag": "STRING", "n": "BIGINT", "hi": "BIGINT"}
OPERATORS = {"last": {"tag": "last"}, "folded": {"tag": "last_non_null", "n": "sum", "hi": "max"}}


def row(k: int, version: int, columns: str) -> dict[str, Any]:
    values = {"a": f"a{version}_{k}", "tag": f"t{version}" if (k + version // 10) % 3 else "null",
              "n": k + version, "hi": (k * 7 + version) % 50}
    return {"k": k, **{c: values[c] for c in columns.split()}}


# (version, rows) in the order they are applied; None: a compaction
EVENTS: list[tuple[int, list[dict[str, Any]]] | None] = [  # versions 10 apart: deletes fall between them
    (30, [row(k, 30, "a tag n hi") for k in range(6)]),
    (10, [row(k, 10, "a n") for k in (0, 1, 2, 3, 6)]),
    None,
    (50, [row(k, 50, "tag hi") for k in range(2, 8)]),
    (20, [row(k, 20, "a") for k in range(4, 9)]),
    (60, [{"k": 9}]),
    (40, [row(k, 40, "n") for k in (0, 5, 8)]),
]


def main(out: Path) -> None:
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    for name, operators in OPERATORS.items():
        table = LakeTable.create(str(out / name), {
            "schema": "k BIGINT NOT NULL, a STRING, tag STRING, n BIGINT, hi BIGINT", "primary_key": ["k"],
            "bucket": {"columns": ["k"], "count": 2}, "merge_operators": operators,
            "null_values": {"tag": ["null"]} if operators["tag"] == "last_non_null" else {}})
        for event in EVENTS:
            if event is None:
                compact(table, spark)
                continue
            version, rows = event
            columns = list(rows[0])
            schema = ", ".join(f"{c} {TYPES[c]}" for c in columns)
            versioned_upsert(table, spark.createDataFrame([tuple(r[c] for c in columns) for r in rows], schema),
                             version=version)
    (out / "events.json").write_text(json.dumps({"events": EVENTS, "operators": OPERATORS}, indent=1) + "\n")
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
