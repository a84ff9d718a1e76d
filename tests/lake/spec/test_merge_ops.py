"""Merge operators: the built-ins' rules, and an operator added by an installed package's entry point."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec import merge_ops
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.upsert import versioned_upsert

PLUGIN = '''
from pyspark.sql import functions as F
from airflow_lake.lake.spec.merge_ops import MergeOperator


class BitOr(MergeOperator):
    """Flags set by any upsert stay set (commutative and associative)."""

    name = "bit_or"

    def aggregate(self, value):
        return F.bit_or(value)


class Shadow(MergeOperator):
    name = "sum"  # a built-in's name: ignored
'''


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[None]:
    """A real installed distribution (a dist-info directory on sys.path) with two entry points."""
    site = tmp_path / "site"
    (site / "lake_bits").mkdir(parents=True)
    (site / "lake_bits" / "__init__.py").write_text(PLUGIN)
    info = site / "lake_bits-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lake-bits\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{merge_ops.ENTRY_POINT_GROUP}]\nbit_or = lake_bits:BitOr\n"
                                           "shadow = lake_bits:Shadow\nbroken = lake_bits:Missing\n")
    sys.path.insert(0, str(site))
    merge_ops.registry.cache_clear()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("lake_bits", None)
        merge_ops.registry.cache_clear()


def test_an_entry_point_adds_a_merge_operator(spark: Any, plugin: None, tmp_path: Path) -> None:
    known = merge_ops.registry()
    assert known["bit_or"].__name__ == "BitOr" and known["sum"] is merge_ops.Sum  # built-ins cannot be replaced
    assert "broken" not in known  # a plugin that fails to load is skipped (with a warning)
    table = LakeTable.create(str(tmp_path / "t"), {
        "schema": "k BIGINT NOT NULL, flags INT", "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2},
        "merge_operators": {"flags": "bit_or"}})
    for version, flags in ((2, 4), (1, 1), (3, None)):
        versioned_upsert(table, spark.createDataFrame([(1, flags), (2, 2)], "k BIGINT, flags INT"), version=version)
    assert sorted(table.read(spark).collect()) == [(1, 5), (2, 2)]


def test_without_the_package_the_operator_is_unknown(tmp_path: Path) -> None:
    merge_ops.registry.cache_clear()
    with pytest.raises(LakeSpecError, match=r"unknown merge operator 'bit_or'.*airflow_lake\.merge_operators"):
        LakeTable.create(str(tmp_path / "t"), {
            "schema": "k BIGINT, flags INT", "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2},
            "merge_operators": {"flags": "bit_or"}})


def test_spec_round_trip_keeps_null_values(tmp_path: Path) -> None:
    spec = {"schema": "k BIGINT NOT NULL, name STRING", "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2},
            "merge_operators": {"NAME": "last_non_null"}, "null_values": {"Name": ["null", ""]}}
    table = LakeTable.create(str(tmp_path / "t"), spec)
    reopened = LakeTable.open(table.url).spec
    assert reopened.null_values == {"name": ("null", "")} and reopened.merge_operators == {"name": "last_non_null"}
    with pytest.raises(LakeSpecError, match=r"null_values\.name"):
        LakeTable.create(str(tmp_path / "u"), {**spec, "null_values": {"name": "null"}})


def test_qualifies_as_sql_only_where_it_says_what_qualifies_does() -> None:
    """An operator of a package that overrides only `qualifies` has no SQL form (its Column is built then)."""
    class Positive(merge_ops.LastNonNull):
        def qualifies(self, value: Any, null_values: Any) -> Any:
            return value > 0

    class Stamped(merge_ops.MergeOperator):
        stamped = qualified = True

        def qualifies(self, value: Any, null_values: Any) -> Any:
            return value.isNotNull()

    assert merge_ops.qualifies_as_sql(merge_ops.Last(), "`c`", ()) is None
    assert merge_ops.qualifies_as_sql(merge_ops.LastNonNull(), "`c`", ()) == "coalesce((`c` IS NOT NULL), false)"
    assert merge_ops.qualifies_as_sql(merge_ops.LastNonNull(), "`c`", ["x'"]) == (
        "coalesce(((`c` IS NOT NULL) AND (NOT (CAST(`c` AS STRING) IN (CAST(unhex('7827') AS STRING))))), false)")
    for op in (Positive(), Stamped()):
        with pytest.raises(NotImplementedError):
            merge_ops.qualifies_as_sql(op, "`c`", ())
