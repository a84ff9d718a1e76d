"""`delta_rows`: an upsert's rows with their stamps, built as one SQL projection — and, for an operator of a package
that only has a Column form of `qualifies`, with that Column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake.spec import merge_ops
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.upsert import physical


class _Positive(merge_ops.LastNonNull):
    name = "positive"

    def qualifies(self, value: Any, null_values: Any) -> Any:
        return value > 0


def test_delta_rows_stamps_with_sql_and_with_an_operators_column(spark: Any, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec = TableSpec.from_dict({"schema": "k STRING NOT NULL, n BIGINT, s STRING, q BIGINT", "primary_key": ["k"],
                                "bucket": {"columns": ["k"], "count": 2},
                                "merge_operators": {"n": "sum", "s": "last_non_null"}, "null_values": {"s": ["-"]}})
    spark.createDataFrame([("a", 1, "-", -3, False), ("b", None, "x", 4, True)],
                          "k string, n bigint, s string, q bigint, d boolean").write.parquet(str(tmp_path / "src"))
    src = spark.read.parquet(str(tmp_path / "src"))
    plain = physical.operator_of
    monkeypatch.setattr(physical, "operator_of", lambda s, c: _Positive() if c == "q" else plain(s, c))
    rows = physical.delta_rows(src, spec, ["n", "s", "q"], "CAST(7 AS BIGINT)", "`d`").drop(physical.SEQ)
    got = sorted(tuple(r) for r in rows.collect())
    assert rows.columns == ["k", "n", "s", "q", "__lake_v__n", "__lake_v0__n", "__lake_v__s", "__lake_q__s",
                            "__lake_v__q", "__lake_q__q", "__lake_v", "__lake_v0", "__lake_d"]
    assert got == [("a", 1, "-", -3, 7, 7, 7, False, 7, False, 7, 7, None),
                   ("b", None, None, None, None, None, None, None, None, None, None, None, 7)]
