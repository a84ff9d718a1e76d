"""Curve keys: file cuts from the sample, snapped to cell borders; slots in the first word; the Arrow UDF in
Spark puts every file's rows in one partition, as one stretch of the curve."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from airflow_lake.lake.clustering import curves, keys
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.spec.table_spec import TableSpec


def test_cuts_fall_on_the_roundest_value_near_each_quantile() -> None:
    rng = np.random.default_rng(1)
    sample = rng.integers(0, 1 << 20, 200_000)  # uniform keys of a 2 x 10 bit curve
    cuts = keys.cut_points([sample], [20], np.ones(len(sample)), 64)
    assert cuts.ravel().tolist() == [i << 14 for i in range(1, 64)]  # the borders of 64 equal cells, exactly
    skewed = np.concatenate([np.full(9000, 5), np.arange(1000) + 100])
    cuts = keys.cut_points([skewed], [20], np.ones(len(skewed)), 4).ravel()
    assert cuts.tolist() == sorted(set(cuts.tolist())) and len(cuts) == 3  # 4 files: 9000 rows, then ~333 each
    slots = np.bincount(keys.cuts_at_or_below(cuts[:, None], [skewed]))
    assert slots[0] == 9000 and all(250 <= n <= 420 for n in slots[1:]), slots
    heavy = keys.cut_points([np.array([1, 2, 3, 4])], [20], np.array([1.0, 1.0, 1.0, 97.0]), 2)
    assert heavy.tolist() == [[4]]  # the weights count, not the number of candidates
    assert keys.cut_points([np.array([7, 7, 7])], [20], np.ones(3), 4).shape == (0, 1)  # one key: one file
    assert keys.cut_points([np.array([7, 9, 7])], [20], np.ones(3), 4).tolist() == [[8]]  # two keys: two files


def test_cuts_take_the_border_of_a_large_cell_when_whole_files_fit_either_side() -> None:
    # 40 % of the rows in the lower half of the curve, 60 % in the upper: the 4th of 8 equal cuts would fall
    # inside the upper half (a file across the curve's largest jump); whole files within 25 % of a share fit
    rng = np.random.default_rng(6)
    half = 1 << 19
    sample = np.concatenate([rng.integers(0, half, 4000), rng.integers(half, 2 * half, 6000)])
    cuts = keys.cut_points([sample], [20], np.ones(len(sample)), 8).ravel().tolist()
    assert len(cuts) == 7 and cuts[2] == half and cuts == sorted(cuts)  # 3 + 5 files: 40 / 3 % and 60 / 5 %
    slots = np.bincount(keys.cuts_at_or_below(np.array(cuts)[:, None], [sample]))
    assert all(0.75 * 1250 <= n <= 1.25 * 1250 for n in slots), slots
    # a heavy key counts one file when the halves are shared out: the other files stay near equal
    heavy = np.concatenate([np.full(5000, 3), rng.integers(half, 2 * half, 3000)])
    cuts = keys.cut_points([heavy], [20], np.ones(len(heavy)), 4).ravel().tolist()
    slots = np.bincount(keys.cuts_at_or_below(np.array(cuts)[:, None], [heavy]))
    assert cuts[0] == half and slots[0] == 5000 and all(750 <= n <= 1250 for n in slots[1:]), (cuts, slots)


def test_cuts_are_taken_on_the_whole_multi_word_key() -> None:
    # every key has the same first word: a cut on it alone puts all rows in one file
    rng = np.random.default_rng(4)
    first, second = np.full(5000, 3, dtype=np.int64), rng.integers(0, 1 << 62, 5000)
    cuts = keys.cut_points([first, second], [2, 63], np.ones(5000), 8)
    assert cuts.shape == (7, 2) and (cuts[:, 0] == 3).all()
    slots = np.bincount(keys.cuts_at_or_below(cuts, [first, second]), minlength=8)
    assert len(slots) == 8 and all(5000 / 8 * 0.75 <= n <= 5000 / 8 * 1.25 for n in slots), slots
    order = np.lexsort([second, first])  # in key order, the slots never go down: one stretch per file
    assert (np.diff(keys.cuts_at_or_below(cuts, [first[order], second[order]])) >= 0).all()


def test_the_slot_search_counts_the_cuts_at_or_below_each_key() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        width = int(rng.integers(1, 4))
        cuts = np.unique(rng.integers(0, 4, (int(rng.integers(1, 40)), width)), axis=0)  # sorted rows
        rows = [rng.integers(0, 4, 200) for _ in range(width)]
        expected = [sum(tuple(c) <= tuple(int(w[i]) for w in rows) for c in cuts.tolist()) for i in range(200)]
        assert keys.cuts_at_or_below(cuts, rows).tolist() == expected


def test_slots_sit_above_the_curve_bits_of_the_first_word() -> None:
    bounds = np.arange(0, 15, dtype=np.int64)  # 16 ranges (value v has rank v): 4 bits per coordinate
    model = keys.CurveKeys("ZORDER", 4, (keys.Coordinate(bounds, 16), keys.Coordinate(bounds, 16)))
    x = pa.array(np.arange(16, dtype=np.int64).repeat(16))
    y = pa.array(np.tile(np.arange(16, dtype=np.int64), 16))
    cut = model.with_cuts([x, y], np.ones(256), 4)
    assert (cut.files, cut.slot_bits, cut.widths) == (4, 2, [8])
    assert cut.cuts is not None and cut.cuts.tolist() == [[64], [128], [192]]  # quarter cells of the 16 x 16 grid
    plain = model.curve_words([x, y])[0]
    slotted = cut.words([x, y])[0]
    assert (slotted & 0xFF).tolist() == plain.tolist()  # the curve bits are unchanged
    assert (slotted >> 61).tolist() == (plain // 64).tolist()  # the slot: which quarter of the curve
    assert cut.evaluate(x, y).type == pa.int64()


@pytest.mark.parametrize("jvm", [True, False])
def test_one_file_per_slot_and_one_udf_call_in_spark(spark: Any, jvm: bool) -> None:
    from pyspark.sql import functions as F

    spec = TableSpec.from_dict({"schema": "a BIGINT, b BIGINT, c BIGINT, p STRING"})
    rng = np.random.default_rng(2)
    rows = [(int(a), int(b), int(c), f"r{i}") for i, (a, b, c) in enumerate(rng.integers(-2**62, 2**62, (3000, 3)))]
    df = spark.createDataFrame(rows, "a BIGINT, b BIGINT, c BIGINT, p STRING").repartition(3)
    for layout in (Layout("HILBERT", ("a", "b"), "SAMPLE"), Layout("ZORDER", ("a", "b", "c"), "DIRECT")):
        keyed, names, slot = keys.add_keys(df, layout, spec, files=8, seed=3, jvm=jvm)
        assert slot is not None
        parted = keyed.repartition(8, slot).withColumn("pid", F.spark_partition_id())
        plan = parted._jdf.queryExecution().executedPlan().toString()
        # the words of a struct come from one UDF call: in the JVM (its class is on the test session's class
        # path), or in the Python workers
        assert plan.count("ArrowEvalPython") == (0 if jvm else 1)
        assert plan.count("__lake_curve_words_") == (1 if jvm else 0)
        got = parted.select("pid", *names).collect()
        assert len(got) == 3000
        top = curves.WORD_BITS - 3  # 8 files: 3 slot bits
        by_pid: dict[int, list[tuple[int, ...]]] = {}
        for r in got:
            assert r[names[0]] >> top == r["pid"]  # the slot is the partition
            curve = (r[names[0]] & ((1 << top) - 1), *(r[n] for n in names[1:]))  # the slot taken off
            by_pid.setdefault(r["pid"], []).append(curve)
        assert len(by_pid) == 8 and all(280 <= len(v) <= 470 for v in by_pid.values())  # ~375 each
        stretches = [(min(v), max(v)) for _, v in sorted(by_pid.items())]
        assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(stretches))  # disjoint, in curve order
