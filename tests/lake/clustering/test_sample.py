"""SAMPLE coordinates: the seed's sampling sizes, weights, bounds, expansion, and ranks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from airflow_lake.lake.clustering import keys, sample


def test_sample_sizes_follow_the_seed() -> None:
    counts = {pid: 100 for pid in range(9)} | {9: 100_000}
    plan = sample.sample_plan(counts, ranges=10)
    assert plan.sample_size == 200  # min(20 * ranges, 1e6)
    assert plan.per_partition == math.ceil(3 * 200 / 10)  # 3x the share of each of the 10 partitions
    assert plan.fraction == 200 / 100_900
    assert plan.imbalanced() == {9}  # fraction * rows > per-partition size only for the big one
    huge = sample.sample_plan({0: 10**9}, ranges=10**6)
    assert huge.sample_size == 1_000_000 and huge.per_partition == 3_000_000


def test_bounds_walk_the_cumulative_weight_and_give_a_heavy_value_its_own_range() -> None:
    candidates = [(1, 1.0), (2, 1.0), (2, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)]
    # step = 6 / 3 = 2: the 2s hold 3 >= a step: a range of their own, (1, 2], so 1 ends the range below;
    # the next target is 6 (the first multiple above 4), which only the last value reaches: no bound there
    assert sample.determine_bounds(candidates, 3) == [1, 2]
    assert sample.weighted_ranges(candidates, 3) == ([1, 2], [0, 1, 2])
    weighted = [(4, 1.0), (1, 5.0), (3, 1.0), (2, 1.0)]  # unsorted; the heavy 1 alone passes half the weight
    assert sample.determine_bounds(weighted, 2) == [1]
    assert sample.determine_bounds(weighted, 1) == []
    assert sample.determine_bounds([(None, 3.0), ("b", 1.0), ("a", 1.0)], 2) == ["a"]  # NULLs are not bounds
    many = [(i, 1.0) for i in range(1000)]
    assert sample.determine_bounds(many, 4) == [249, 499, 749]


def test_heavy_values_get_a_range_and_cells_of_their_own_and_spend_no_ranks_after_them() -> None:
    # 1000 rows: value 0 holds 500, then 500 distinct values; 10 ranges, a step of 100 rows
    candidates = [(0, 1.0)] * 500 + [(v, 1.0) for v in range(1, 501)]
    bounds, positions = sample.weighted_ranges(candidates, 10)
    # the seed's walk (target += step) gives [0, 1, 2, 3, 4, 100, 200, 300, 400]: four ranks on single values
    assert bounds == [0, 100, 200, 300, 400]  # here: the next bound a step above 500 rows, and so on
    assert positions == [0, 5, 6, 7, 8, 9]  # 0 spans the first half of the coordinates; the rest a step each
    heavy_inside = [(v, 1.0) for v in range(100)] + [(100, 1.0)] * 300 + [(v, 1.0) for v in range(101, 201)]
    bounds, positions = sample.weighted_ranges(heavy_inside, 5)  # a step of 100 rows
    # 100 alone in (99, 100], on the roundest position of the steps 1..3 its weight spans; the rest at 4
    assert bounds == [99, 100] and positions == [0, 2, 4]
    ranks = sample.rank(pa.array([0, 99, 100, 101, 200], type=pa.int64()), sample.bound_array(bounds))
    assert ranks.tolist() == [0, 0, 1, 2, 2]
    coordinate = keys.Coordinate(sample.bound_array(bounds), 5, np.array(positions, dtype=np.uint64))
    assert coordinate.of(pa.array([0, 100, 101, None], type=pa.int64()), 3).tolist() == [0, 3, 6, 7]  # p * 8 // 5
    rows = [(v, 1.0) for v in range(1000)]
    assert sample.weighted_ranges(rows, 8)[1] == list(range(8))  # no heavy values: the position is the rank


def walked_ranges(candidates: list[tuple[Any, float]], ranges: int) -> tuple[list[Any], list[int]]:
    """The walk of `weighted_ranges` one value at a time (its first form), the oracle of the search per bound."""
    values: list[Any] = []
    weights: list[float] = []
    for key, weight in sorted((c for c in candidates if c[0] is not None), key=lambda c: c[0]):
        if values and key == values[-1]:
            weights[-1] += weight
        else:
            values.append(key)
            weights.append(weight)
    if not values or ranges <= 1:
        return [], [0]
    step = float(np.cumsum(weights)[-1]) / ranges
    bounds: list[Any] = []
    ends: list[float] = []
    cumulative, target = 0.0, step
    for j, (value, weight) in enumerate(zip(values, weights, strict=True)):
        heavy = weight >= step
        if heavy and j > 0 and (not bounds or bounds[-1] != values[j - 1]):
            bounds.append(values[j - 1])
            ends.append(cumulative)
        cumulative += weight
        if (heavy or cumulative >= target) and j < len(values) - 1:
            bounds.append(value)
            ends.append(cumulative)
            target = (math.floor(cumulative / step) + 1) * step
    edges = [0.0, *ends, cumulative]
    heavy_range = [edges[i + 1] - edges[i] >= step for i in range(len(edges) - 1)]
    positions: list[int] = []
    for i in range(len(edges) - 1):
        position = math.floor(edges[i] / step + 0.5)
        if positions:
            position = max(position, positions[-1] + (1 if heavy_range[i] or heavy_range[i - 1] else 0))
        if heavy_range[i]:
            last = max(position, math.floor(edges[i + 1] / step + 0.5) - 1)
            position = sample._roundest(position - 1, min(ranges - 1, last))
        positions.append(min(ranges - 1, position))
    return bounds, positions


@pytest.mark.parametrize("seed", range(12))
def test_the_search_per_bound_and_the_numpy_path_equal_the_walk_per_value(seed: int) -> None:
    """Random samples with heavy values, runs of equal values, NULLs, uneven weights (as partitions sampled by
    fraction give) and bigints at both ends: every way gives the walk's bounds and positions."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    spread = int(rng.choice([3, 50, 10**6, 2**62]))
    values: list[int | None] = [int(v) for v in rng.integers(-spread, spread, size=n)]
    for heavy in rng.integers(-spread, spread, size=int(rng.integers(0, 4))):  # values holding many rows
        values += [int(heavy)] * int(rng.integers(1, n // 2 + 2))
    values += [None] * int(rng.integers(0, 50)) + [-(2**63), 2**63 - 1] * int(rng.integers(0, 2))
    rng.shuffle(values)  # type: ignore[arg-type]
    weights = rng.choice([1.0, 0.7, 3.3333333333333335, 1 / 0.003], size=len(values))
    if seed % 3 == 0:
        weights = np.full(len(values), 4_000_000 / len(values))  # one weight, as `sample_rows` gives
    candidates = list(zip(values, weights.tolist(), strict=True))
    for ranges in (2, 7, 64, 1024):
        expected = walked_ranges(candidates, ranges)
        assert sample.weighted_ranges(candidates, ranges) == expected
        assert sample.weighted_number_ranges(values, weights, ranges) == expected
    strings = [None if v is None else f"{v:+021d}" for v in values]  # not numbers: the Python sort
    assert sample.weighted_number_ranges(strings, weights, 64) == walked_ranges(  # type: ignore[arg-type]
        list(zip(strings, weights.tolist(), strict=True)), 64)
    assert sample.weighted_number_ranges([None, None], np.ones(2), 8) == ([], [0])


def test_expansion_makes_every_column_span_the_same_range() -> None:
    bits, ranges = sample.expand([list(range(1023)), [10, 20, 30], []])
    assert (bits, ranges) == (10, [1024, 4, 1])  # 1024 ranges: 10 bits; 4 ranges spread over the same 10 bits
    assert sample.expand([[1, 2]]) == (2, [3])


def test_skewed_partitions_are_sampled_with_the_seeds_weights(spark: Any) -> None:
    from pyspark.sql import functions as F

    # ten input partitions of 100,000 ids: the first keeps them all, the others every 1000th (100 rows)
    ids = spark.range(0, 1_000_000, 1, 10).where((F.col("id") < 100_000) | (F.col("id") % 1000 == 0))
    keys = ids.select(F.col("id").alias("k0"))
    counts = sample.partition_counts(keys)
    assert sorted(counts.values()) == [100] * 9 + [100_000] and len(counts) == 10
    plan = sample.sample_plan(counts, ranges=10)
    big = next(pid for pid, n in counts.items() if n == 100_000)
    assert plan.imbalanced() == {big}
    got = sample.sample(keys, plan, seed=1)
    heavy = [(k, w) for k, w in got if k[0] < 100_000]
    light = [(k, w) for k, w in got if k[0] >= 100_000]
    assert all(w == 1 / plan.fraction for _, w in heavy)  # re-sampled with `fraction`, weight 1/fraction
    assert 100 < len(heavy) < 320  # ~ fraction * 100,000 = 198
    # each small partition keeps per_partition (60) of its 100 rows, weight 100/60
    assert len(light) == 9 * plan.per_partition and all(w == 100 / plan.per_partition for _, w in light)
    assert len({k for k, _ in light}) == len(light)  # without replacement
    assert sum(w for _, w in got) == pytest.approx(100_900, rel=0.25)
    assert got == sample.sample(keys, plan, seed=1)  # the same seed, the same sample: retries lay out alike


def test_a_known_row_count_samples_in_one_job_with_equal_weights(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.range(0, 100_000, 1, 4).withColumn("x", F.col("id") * 3)
    got = sample.sample_rows(df, sample.sample_keys(["x"], ["bigint"]), 100_000, ranges=64, seed=2)
    assert 3200 < len(got) < 4500  # ~ 3 * 20 * 64 = 3840 rows kept, uniformly
    assert sum(w for _, w in got) == pytest.approx(100_000) and len({w for _, w in got}) == 1
    assert all(k[0] % 3 == 0 for k, _ in got) and len({k for k, _ in got}) == len(got)
    assert got == sample.sample_rows(df, sample.sample_keys(["x"], ["bigint"]), 100_000, ranges=64, seed=2)
    assert len(sample.sample_rows(df.limit(10), sample.sample_keys(["x"], ["bigint"]), 10, ranges=64)) == 10


def test_ranks_count_the_bounds_below_and_spread_over_the_same_bits() -> None:
    values = pa.array([5, 10, 11, 30, 31, None, 20], type=pa.int64())
    strings = pa.array(["a", "b", "c", "d", "e", None, "b"])
    bounds: list[list[Any]] = [[10, 20, 30], ["b"]]
    bits, ranges = sample.expand(bounds)
    assert (bits, ranges) == (2, [4, 2])
    rv = keys.Coordinate(sample.bound_array(bounds[0]), ranges[0]).of(values, bits)
    rs = keys.Coordinate(sample.bound_array(bounds[1]), ranges[1]).of(strings, bits)
    # v (4 ranges, 2 bits): bounds below 5 -> 0, 10 -> 0 (not below), 11 -> 1, 30 -> 2, 31 -> 3, 20 -> 1;
    # s (2 ranges): rank 1 -> 1 * 4 // 2 = 2; NULL -> the largest coordinate, 3
    assert rv.tolist() == [0, 0, 1, 2, 3, 3, 1]
    assert rs.tolist() == [0, 0, 2, 2, 2, 3, 0]


def test_string_ranks_compare_utf8_bytes_as_spark_does(spark: Any) -> None:
    words = ["", "a", "ab", "abc", "b", "é", "z", "zz", "\u00ff", "\U0001f600", "a\u00e9", "A"]
    bounds = sorted(words)
    array = sample.bound_array(bounds)
    ranks = sample.rank(pa.array(words), array).tolist()
    ordered = [r["w"] for r in spark.createDataFrame([(w,) for w in words], "w STRING").orderBy("w").collect()]
    assert bounds == ordered  # Python's order of str is Spark's order of UTF-8 bytes
    assert ranks == [bounds.index(w) for w in words]  # each value's own bound is not below it
    sliced = pa.array(["zz", "abc", None, "b"]).slice(1, 3)  # an offset into the buffers
    assert sample.rank(sliced, array).tolist()[0::2] == [bounds.index("abc"), bounds.index("b")]


def test_string_ranks_follow_sparks_order_with_nul_bytes_and_prefixes(spark: Any) -> None:
    words = ["", "\x00", "\x00\x00", "\x01", "a", "a\x00", "a\x00\x00", "a\x00b", "a\x01", "ab", "b", "b\x00",
             "a\x00" * 40, "a\x00" * 40 + "\x00", "\U0001f600\x00", "\U0001f600", "é\x00", "é"]
    df = spark.createDataFrame([(w,) for w in words], "w STRING")
    ordered = [r["w"] for r in df.orderBy("w").collect()]  # Spark's binary UTF-8 order
    assert ordered.index("a") < ordered.index("a\x00") < ordered.index("a\x01") < ordered.index("b")
    for bounds in (ordered, ordered[::2], ordered[1::3], ["a\x00"]):  # every value's rank: bounds below it
        ranks = sample.rank(pa.array(words), sample.bound_array(bounds)).tolist()
        assert ranks == [sum(1 for b in bounds if ordered.index(b) < ordered.index(w)) for w in words], bounds
    rank_of = dict(zip(words, sample.rank(pa.array(words), sample.bound_array(ordered)).tolist(), strict=True))
    assert [rank_of[w] for w in ordered] == list(range(len(ordered)))  # distinct ranks, in Spark's order


def test_sample_ranks_tell_strings_with_a_shared_prefix_apart(spark: Any) -> None:
    from pyspark.sql import functions as F

    from airflow_lake.lake.clustering import coordinates

    urls = [f"http://www.{chr(97 + i % 26)}{i:04d}.com" for i in range(2000)]
    df = spark.createDataFrame([(u,) for u in urls], "s STRING")
    direct = {r[0] for r in df.select(coordinates.direct_coordinate(F.col("s"), "string")).collect()}
    assert len(direct) == 1  # the first 8 bytes are "http://w" for all
    keyed = df.select(F.col("s").alias("k0"))
    plan = sample.sample_plan(sample.partition_counts(keyed), ranges=64)
    bounds = sample.determine_bounds([(k[0], w) for k, w in sample.sample(keyed, plan)], 64)
    ordered = sorted(urls)
    ranks = sample.rank(pa.array(ordered), sample.bound_array(bounds)).tolist()
    assert len(set(ranks)) == 64 and ranks == sorted(ranks)  # dense ranks 0..63 in string order


def test_ranks_of_strings_sharing_a_prefix_longer_than_the_key_keep_their_order() -> None:
    """Strings that share more than a key's bytes (URLs, paths) tie on their keys; they are never told apart by
    their length (which ranked sorted values 0, 4, 4, 0, 4, 4, ...): a tie is settled by the whole strings."""
    prefix = "https://example.com/" + "p" * 80  # 100 bytes
    values = sorted(f"{prefix}/{i}" + "x" * (i % 7) for i in range(300))
    assert values != sorted(values, key=len)
    bounds = values[10::25]
    array = sample.bound_array(bounds)
    ranks = sample.rank(pa.array(values), array).tolist()
    assert ranks == sorted(ranks)  # sorted values, non-decreasing ranks
    assert ranks == [sum(1 for b in bounds if b < v) for v in values]  # exactly the bounds below each value
    assert len(set(ranks)) == len(bounds) + 1
    longer = [prefix + "a" * n for n in (0, 1, 200, 300)] + [prefix + "b", prefix[:50]]  # prefixes and NULs
    for bound_set in (longer, sorted(longer), [prefix + "a" * 250]):
        got = sample.rank(pa.array(longer), sample.bound_array(sorted(bound_set))).tolist()
        assert got == [sum(1 for b in bound_set if b < v) for v in longer], bound_set


def test_a_null_string_ranks_without_comparing_text_when_a_bound_is_cut_short() -> None:
    # a NULL's key is the empty string's: with a bound "" and a bound longer than a key, its tie was settled by
    # comparing None with bytes (TypeError); NULL's rank is not used (its coordinate is the largest)
    long = "x" * (sample.MAX_STRING_BYTES + 10)
    bounds = sample.bound_array(["", long, long + "y"])
    ranks = sample.rank(pa.array([None, "", long + "a", "z", None], type=pa.string()), bounds)
    assert ranks[1:4].tolist() == [0, 2, 3]
    coordinate = keys.Coordinate(bounds, 4)
    assert coordinate.of(pa.array([None, ""], type=pa.string()), 2).tolist() == [3, 0]  # NULL: the largest
