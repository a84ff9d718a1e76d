"""Curve values (numpy) and order-keeping coordinates (Spark expressions), checked against independent
Python computations."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import random
import struct
from typing import Any

import numpy as np
import pytest

from airflow_lake.lake.clustering import coordinates, curves, keys
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.spec.table_spec import TableSpec


def interleave_reference(values: list[int], bits: int) -> int:
    """Bit interleaving done bit by bit: level by level from the top, first value first."""
    out = 0
    for level in range(bits - 1, -1, -1):
        for value in values:
            out = (out << 1) | ((value >> level) & 1)
    return out


def words_value(words: list[int], widths: list[int]) -> int:
    """Words joined into one integer."""
    out = 0
    for word, width in zip(words, widths, strict=True):
        assert 0 <= word < 1 << width
        out = (out << width) | word
    return out


def test_z_values_are_the_bit_interleaving_of_the_coordinates() -> None:
    rng = random.Random(3)
    for dims, bits, first in ((2, 10, 63), (3, 64, 63), (5, 11, 57), (2, 40, 10)):
        rows = [[rng.getrandbits(bits) for _ in range(dims)] for _ in range(300)]
        rows.append([(1 << bits) - 1] * dims)
        coords = [np.array([r[d] for r in rows], dtype=np.uint64) for d in range(dims)]
        words = curves.interleave(coords, bits, first)
        widths = curves.word_widths(dims * bits, first)
        assert len(words) == len(widths) and widths[0] == min(first, dims * bits)
        for i, row in enumerate(rows):
            assert words_value([int(w[i]) for w in words], widths) == interleave_reference(row, bits)


def test_direct_z_values_through_spark_are_the_interleaving_of_the_mapped_values(spark: Any) -> None:
    rng = random.Random(4)
    rows = [(rng.randint(-2**63, 2**63 - 1), rng.randint(-5, 5), rng.getrandbits(20)) for _ in range(300)]
    rows += [(-2**63, 2**63 - 1, 0), (0, -1, 1)]
    df = spark.createDataFrame(rows, "a BIGINT, b BIGINT, c BIGINT")
    spec = TableSpec.from_dict({"schema": "a BIGINT, b BIGINT, c BIGINT"})
    keyed, names, slot = keys.add_keys(df, Layout("ZORDER", ("a", "b", "c"), "DIRECT"), spec)
    assert slot is None and len(names) == 4  # 3 x 64 bits: 4 words of 63, 63, 63 and 3 bits
    for row in keyed.collect():
        mapped = [row[c] + 2**63 for c in "abc"]  # the sign bit flipped: unsigned order = signed order
        words = [row[n] for n in names]
        assert words_value(words, curves.word_widths(192)) == interleave_reference(mapped, 64)


def hilbert_order(points: list[tuple[int, ...]], bits: int) -> list[tuple[int, ...]]:
    dims = len(points[0])
    coords = [np.array([p[d] for p in points], dtype=np.uint64) for d in range(dims)]
    words = curves.interleave(curves.hilbert_transpose(coords, bits), bits)
    widths = curves.word_widths(dims * bits)
    keyed = sorted((words_value([int(w[i]) for w in words], widths), p) for i, p in enumerate(points))
    assert [k for k, _ in keyed] == list(range(len(points)))  # a bijection onto 0..n-1
    return [p for _, p in keyed]


def test_hilbert_indexes_of_a_full_grid_form_a_path_of_unit_steps() -> None:
    grid = [(x, y) for x in range(16) for y in range(16)]
    path = hilbert_order(grid, 4)
    assert all(sum(abs(a - b) for a, b in zip(p, q, strict=True)) == 1 for p, q in itertools.pairwise(path))
    assert path[0] == (0, 0)
    cube = [(x, y, z) for x in range(4) for y in range(4) for z in range(4)]
    path3 = hilbert_order(cube, 2)
    assert all(sum(abs(a - b) for a, b in zip(p, q, strict=True)) == 1 for p, q in itertools.pairwise(path3))


def test_float_coordinates_are_the_ieee_bit_trick(spark: Any) -> None:
    from pyspark.sql import functions as F

    rng = random.Random(5)
    values = [0.0, -0.0, 1.0, -1.0, 1e-310, -1e-310, 5e-324, 2.0 ** -1022, 1.5, float("inf"), float("-inf"),
              1e308, -2.5, 0.1, 2.0 ** 52 + 1, 7.0, 8.0, 1023.9999999]
    values += [rng.uniform(-1e6, 1e6) for _ in range(100)] + [rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)
                                                              for _ in range(100)]
    df = spark.createDataFrame([(v,) for v in values], "d DOUBLE")
    got = [r[0] for r in df.select(coordinates.double_bits(F.col("d"))).collect()]

    def reference(v: float) -> int:
        bits = struct.unpack(">Q", struct.pack(">d", 0.0 if v == 0 else v))[0]
        return bits ^ (2**64 - 1) if bits >> 63 else bits | 1 << 63

    assert [g & (2**64 - 1) for g in got] == [reference(v) for v in values]
    ordered = sorted(zip(values, got, strict=True), key=lambda p: p[1] & (2**64 - 1))
    assert [v for v, _ in ordered] == sorted(values)


def test_doubles_mapped_in_numpy_are_the_jvms_sortable_longs_and_rank_the_same(spark: Any) -> None:
    from pyspark.sql import functions as F

    from airflow_lake.lake.clustering import sample

    rng = random.Random(6)
    values = [0.0, -0.0, 1.0, -1.0, 1e-310, -1e-310, 5e-324, -5e-324, float("inf"), float("-inf"), float("nan"),
              1e308, -2.5, 0.1, 2.0 ** 52 + 1, 1023.9999999, *(rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)
                                                                  for _ in range(100))]
    df = spark.createDataFrame([(v, v) for v in [*values, None]], "d DOUBLE, f FLOAT")
    rows = df.select(coordinates.sortable_long(F.col("d"), "double").alias("d"),
                     coordinates.sortable_long(F.col("f"), "float").alias("f"),
                     *sample.sample_keys(["d", "f"], ["double", "float"])).toArrow()
    for jvm, passed in ((0, 2), (1, 3)):  # what the SAMPLE path passes (doubles), mapped in numpy
        assert coordinates.sortable_array(rows.column(passed).combine_chunks()).to_pylist() == \
            rows.column(jvm).to_pylist()
    bounds = np.array(sorted(set(rows.column(0).to_pylist()[::7]) - {None}), dtype=np.int64)
    assert sample.rank(rows.column(2).combine_chunks(), bounds).tolist() == \
        sample.rank(rows.column(0).combine_chunks(), bounds).tolist()


@pytest.mark.parametrize(("type_name", "values"), [
    ("int", [5, -3, 0, 2**31 - 1, -2**31]),
    ("float", [1.5, -2.25, 0.0, 3.4e38, -1e-30]),
    ("decimal(10,2)", [decimal.Decimal("1.05"), decimal.Decimal("-99.99"), decimal.Decimal("0.00")]),
    ("decimal(30,5)", [decimal.Decimal("1e20"), decimal.Decimal("-3.5"), decimal.Decimal("2.25")]),
    ("date", [dt.date(2024, 1, 2), dt.date(1969, 12, 31), dt.date(2000, 2, 29)]),
    ("timestamp", [dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(1960, 1, 1), dt.datetime(2024, 1, 2, 3, 4, 5, 7)]),
    ("string", ["http://www.b", "http://www.a", "", "é", "a", "http://w"]),
    ("boolean", [True, False]),
])
def test_direct_coordinates_keep_the_order_of_every_type(spark: Any, type_name: str, values: list[Any]) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(v,) for v in [*values, None]], f"v {type_name}")
    rows = df.select("v", coordinates.direct_coordinate(F.col("v"), type_name).alias("c")).collect()
    unsigned = {(r["v"] if r["v"] is not None else "NULL"): r["c"] & (2**64 - 1) for r in rows}
    assert unsigned.pop("NULL") == 2**64 - 1  # NULL is the largest coordinate
    by_coordinate = [v for v, _ in sorted(unsigned.items(), key=lambda kv: kv[1])]
    expected = sorted(v for v in unsigned if not isinstance(v, str))  # the values as Spark holds them
    if type_name == "string":  # only the first 8 bytes count: "http://www.a" and "http://www.b" tie
        assert unsigned["http://www.a"] == unsigned["http://www.b"] == unsigned["http://w"] + 0
        assert unsigned[""] == 0 and unsigned["é"] > unsigned["http://w"] > unsigned["a"] > 0
        return
    assert by_coordinate == expected
