"""SAMPLE curve coordinates (seed 000, Hudi's `RangeSample`, Spark's `RangePartitioner`): sampled range
bounds per column, and the index of a value's range as its coordinate.

1. Count the rows of every input partition (a job that reads no column values).
2. Sample: `sample_size = min(20 * ranges, 1e6)`; each partition keeps a uniform random sample of
   `ceil(3 * sample_size / partitions)` rows (reservoir semantics: every subset of that size equally
   likely; done vectorized as "the rows with the smallest random keys"), weight = rows / samples. A
   partition with far more rows than average (`fraction * rows > per-partition size`, fraction =
   `sample_size / total rows`) is sampled with probability `fraction` instead, weight `1 / fraction`.
   Only the sort columns travel to Python, in Arrow batches, as numbers that keep their order (see
   `coordinates.sortable_long`) or strings; floating point travels as doubles, mapped to the same numbers
   in numpy (`coordinates.sortable_array`: the JVM's expression for it costs 10x a cast per row).
3. Bounds per column (`weighted_ranges`): sort the candidates, walk the cumulative weight of the distinct
   values, take a bound each time it passes the next multiple of `step = total weight / ranges`. A value
   holding a step or more (a run of equal values) gets a range of its own, and the next target is the first
   multiple of the step above the weight so far, so no ranks are spent on one-value ranges after a heavy run
   (the seed's `target += step` does that). So bounds follow the data (dense ranks from 0, robust to shared
   string prefixes and to heavy duplicates).
4. Expansion (`expand`): every column spans the same range [0, 2**bits), bits enough for `ranges`: a rank's
   *position* is where its weight starts, in steps (a heavy range and the one after it a step of their own),
   and rank r at position p becomes p * 2**bits // ranges. Without heavy values position = rank. With a
   power-of-two number of ranges (the default 1024) the curve's cells then hold equal shares of the rows, on
   skewed data too (a heavy value sits on one coordinate, the coordinates its weight spans stay empty), so
   files cut at equal row counts fall on cell borders. (Hudi multiplies by `max bounds / its bounds` and adds
   a random offset within the widened range; we add none, so rows of one range keep the other columns' order
   and a retry lays out the same.)
5. The rank of a value (`rank`) is the number of bounds below it: a binary search (`numpy.searchsorted`)
   over the bounds in Spark's Python workers, on Arrow batches of the sort columns (`keys.py`); strings
   compare by their UTF-8 bytes, as in Spark (binary order: a prefix first, NUL bytes count; see
   `string_keys`). NULL takes the largest coordinate. A string's key holds its first bytes only: two strings
   longer than that which share them (URLs, paths) tie on their keys, and the tie is settled by comparing the
   whole strings (`StringBounds`), never by their lengths — so ranks always follow the values' order.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering.coordinates import sortable_array, sortable_doubles, sortable_long
from airflow_lake.lake.spec.types import FLOAT_TYPES

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

SAMPLE_POINTS_PER_RANGE = 20  # Spark's samplePointsPerPartitionHint
MAX_SAMPLE_SIZE = 1_000_000
OVERSAMPLE = 3.0  # each partition samples 3x its share, as Spark does
PREFILTER = 2.0  # the JVM passes ~2x the rows a balanced partition keeps
MAX_STRING_BYTES = 64
LENGTH_BYTES = 2  # a string's key ends with its length (`string_keys`)
CUT = (1 << (8 * LENGTH_BYTES)) - 1  # ... or, for a string longer than the key's bytes, this: "cut short"
PID, ROWS, WEIGHT = "__lake_pid", "__lake_rows", "__lake_weight"


@dataclass(frozen=True)
class SamplePlan:
    """How many rows each input partition samples, from the row counts of step 1."""

    sample_size: float
    per_partition: int
    fraction: float
    counts: dict[int, int]

    @property
    def total(self) -> int:
        """Rows in all partitions."""
        return sum(self.counts.values())

    def imbalanced(self) -> set[int]:
        """Partitions sampled by `fraction` instead of by reservoir."""
        return {pid for pid, n in self.counts.items() if self.fraction * n > self.per_partition}


def sample_plan(counts: dict[int, int], ranges: int) -> SamplePlan:
    """The seed's sizes for `ranges` ranges per column over partitions with these row counts."""
    sample_size = min(SAMPLE_POINTS_PER_RANGE * float(ranges), float(MAX_SAMPLE_SIZE))
    partitions = max(1, len(counts))
    per_partition = math.ceil(OVERSAMPLE * sample_size / partitions)
    total = sum(counts.values())
    fraction = min(sample_size / max(total, 1), 1.0)
    return SamplePlan(sample_size, per_partition, fraction, dict(counts))


def sample_keys(columns: Sequence[str], types: Sequence[str]) -> list[Column]:
    """The values sampled and searched: order-keeping bigints (strings stay strings), NULL kept. Floating
    point stays a double (cast in the JVM, cheap): the sample (`_sortable`) and `rank` map it to its
    `sortable_long` in numpy, as the JVM's `double_bits` would, at a fraction of its cost."""
    from pyspark.sql import functions as F

    return [F.col(f"`{c}`") if t == "string" else F.col(f"`{c}`").cast("double") if t in FLOAT_TYPES
            else sortable_long(F.col(f"`{c}`"), t) for c, t in zip(columns, types, strict=True)]


def _sortable(table: pa.Table) -> list[list[Any]]:
    """The columns of a sampled Arrow table as Python lists, doubles as their `sortable_long` (NULL kept)."""
    return [sortable_array(table.column(i).combine_chunks()).to_pylist() for i in range(table.num_columns)]


def partition_counts(keys: DataFrame) -> dict[int, int]:
    """Rows per input partition (partition id -> rows); empty partitions are absent."""
    from pyspark.sql import functions as F

    rows = keys.select(F.spark_partition_id().alias(PID)).groupBy(PID).count().collect()
    return {int(r[PID]): int(r["count"]) for r in rows}


def sample(keys: DataFrame, plan: SamplePlan, seed: int = 0) -> list[tuple[tuple[Any, ...], float]]:
    """Weighted candidates [(key values, weight)] from every partition of `keys` (step 2).

    A balanced partition keeps `per_partition` rows chosen uniformly without replacement, weight
    rows / kept; an imbalanced one keeps each row with probability `fraction`, weight 1 / fraction. To move
    few rows to Python, the JVM first keeps each row of a balanced partition with probability
    `PREFILTER * per_partition / rows`; Python then keeps a uniform subset of `per_partition` of those (a
    uniform subset of a Bernoulli sample is a uniform subset of the partition, as reservoir sampling gives).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    imbalanced = plan.imbalanced()
    per_partition, fraction, counts = plan.per_partition, plan.fraction, plan.counts
    if not counts:
        return []
    probability = [0.0] * (max(counts) + 1)
    for pid, rows in counts.items():
        probability[pid] = fraction if pid in imbalanced else min(1.0, PREFILTER * per_partition / max(rows, 1))
    array = F.expr(f"array({', '.join(f'CAST({p!r} AS DOUBLE)' for p in probability)})")
    keep = F.element_at(array, F.spark_partition_id() + 1)
    fields = list(keys.schema.fields)
    schema = T.StructType([*fields, T.StructField(WEIGHT, T.DoubleType())])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        pid = context.partitionId() if context is not None else 0
        table = pa.Table.from_batches(list(batches))
        if table.num_rows == 0:
            return
        if pid in imbalanced:
            weight = 1.0 / fraction
        else:
            if table.num_rows > per_partition:
                rng = np.random.default_rng([seed, pid])
                table = table.take(pa.array(np.sort(rng.choice(table.num_rows, per_partition, replace=False))))
            weight = counts.get(pid, table.num_rows) / table.num_rows
        out = table.append_column(WEIGHT, pa.array(np.full(table.num_rows, weight)))
        yield from out.combine_chunks().to_batches()

    table = keys.where(F.rand(seed) < keep).mapInArrow(run, schema).toArrow()
    columns = _sortable(table.select(list(range(len(fields)))))
    weights = table.column(WEIGHT).to_pylist()
    return [(tuple(col[r] for col in columns), float(weights[r])) for r in range(table.num_rows)]


def sample_rows(df: DataFrame, keys: Sequence[Column], rows: int, ranges: int, seed: int = 0
                ) -> list[tuple[tuple[Any, ...], float]]:
    """Weighted candidates of `keys` (`sample_keys`) over `df`, whose row count is known (the log's file stats):
    steps 1 and 2 in one job that reads only the sort columns and moves no row through a Python worker. Every
    row is kept with probability `min(1, OVERSAMPLE * sample_size / rows)` (as many candidates as step 2 keeps
    from balanced partitions, without the count job), each of weight rows / kept, as a balanced partition's
    are; the keys are computed for the kept rows only."""
    from pyspark.sql import functions as F

    sample_size = min(SAMPLE_POINTS_PER_RANGE * float(ranges), float(MAX_SAMPLE_SIZE))
    probability = min(1.0, OVERSAMPLE * sample_size / max(rows, 1))
    kept = df.where(F.rand(seed) < F.lit(probability))
    table = kept.select(*[k.alias(f"k{i}") for i, k in enumerate(keys)]).toArrow()
    if table.num_rows == 0:
        return []
    weight = max(rows, table.num_rows) / table.num_rows
    columns = _sortable(table)
    return [(values, weight) for values in zip(*columns, strict=True)]


def determine_bounds(candidates: Sequence[tuple[Any, float]], ranges: int) -> list[Any]:
    """The bounds of `weighted_ranges` (step 3); NULL candidates are ignored."""
    return weighted_ranges(candidates, ranges)[0]


def weighted_ranges(candidates: Sequence[tuple[Any, float]], ranges: int) -> tuple[list[Any], list[int]]:
    """Bounds from weighted candidates, and each range's position in 0..ranges-1 (step 3; NULLs ignored).

    Walk the distinct values in order with their summed weights; a bound is taken when the cumulative weight
    passes the next multiple of `step = total / ranges`, as in the seed. A *heavy* value (one holding at least a
    step) gets a range of its own: a bound just below it (at the previous value) and at it. After any bound the
    next target is the first multiple of the step above the weight so far, so the steps a heavy value covers are
    not spent on one-value ranges after it (the seed's `target += step` puts a bound at every value after a
    heavy run until the target catches up).

    A range's position is where its weight starts, in steps (rounded), never below the previous range's, and
    a heavy range one above it: so a value's coordinate (`position * 2**bits // ranges`, `keys.Coordinate`)
    follows the weight below it, heavy values sit on cells of their own, and the coordinates a heavy value's
    weight spans stay free, so the curve's cells hold equal shares of the rows on skewed data too. On data
    without heavy values every range holds about one step: positions 0, 1, 2, ..., as a plain rank."""
    values: list[Any] = []
    weights: list[float] = []
    for key, weight in sorted((c for c in candidates if c[0] is not None), key=lambda c: c[0]):
        if values and key == values[-1]:
            weights[-1] += weight
        else:
            values.append(key)
            weights.append(weight)
    return _ranges(values, weights, ranges)


def weighted_number_ranges(values: Sequence[int | None], weights: np.ndarray, ranges: int
                           ) -> tuple[list[int], list[int]]:
    """`weighted_ranges` of whole numbers (a column's sampled `sortable_long`s, None for NULL) with their weights,
    sorted and summed in numpy: the same bounds and positions (equal values' weights are added in the same order),
    at a tenth of the Python sort's time on a sample of 60,000 (the curve's model is made on the driver while
    the cluster waits)."""
    import numpy as np

    present = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    numbers = np.array([v for v in values if v is not None])
    if numbers.dtype != np.int64 and len(numbers):  # not all bigints (floats, strings, larger): the Python sort
        return weighted_ranges(list(zip(values, np.asarray(weights).tolist(), strict=True)), ranges)
    numbers = numbers.astype(np.int64)  # (an empty array is float64)
    order = np.argsort(numbers, kind="stable")  # equal values keep their order, as `sorted` does
    ordered, ordered_weights = numbers[order], np.asarray(weights, dtype=np.float64)[present][order]
    if not len(ordered):
        return _ranges([], [], ranges)
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, len(ordered)))
    summed = ordered_weights[starts].tolist()
    for group in np.flatnonzero(sizes > 1).tolist():  # a running sum, as `weighted_ranges` adds them
        start = int(starts[group])
        summed[group] = float(np.cumsum(ordered_weights[start:start + int(sizes[group])])[-1])
    return _ranges(ordered[starts].tolist(), summed, ranges)


def _ranges(values: Sequence[Any], weights: Sequence[float], ranges: int) -> tuple[list[Any], list[int]]:
    """Step 3 over the distinct `values` in order with their summed `weights` (see `weighted_ranges`). The bounds
    are found by a search per bound, not a step per value: the weight so far is the running sum of `weights`."""
    import numpy as np

    if not values or ranges <= 1:
        return [], [0]
    cumulative = np.cumsum(np.asarray(weights, dtype=np.float64))  # left to right: a running float sum
    count = len(values)
    step = float(cumulative[-1]) / ranges
    heavy = np.flatnonzero(np.asarray(weights, dtype=np.float64) >= step).tolist()
    taken: list[int] = []  # the values a bound is taken at: the weight so far passed the target, or heavy
    target, j = step, 0
    while j < count - 1:  # (no bound with nothing above it)
        passed = j + int(np.searchsorted(cumulative[j:], target, side="left"))
        next_heavy = bisect.bisect_left(heavy, j)
        at = min(passed, heavy[next_heavy] if next_heavy < len(heavy) else count)
        if at >= count - 1:
            break
        taken.append(at)
        target = (math.floor(float(cumulative[at]) / step) + 1) * step
        j = at + 1
    # the values below a heavy one end their range there (unless a bound was taken at them)
    below = {h - 1 for h in heavy if h > 0} - set(taken)
    at_bounds = sorted({*taken, *below})
    sums = cumulative.tolist()
    bounds = [values[i] for i in at_bounds]
    edges = [0.0, *(sums[i] for i in at_bounds), sums[-1]]  # range i: (bounds[i - 1], bounds[i]], edges i, i + 1
    heavy_range = [edges[i + 1] - edges[i] >= step for i in range(len(edges) - 1)]
    positions: list[int] = []
    for i in range(len(edges) - 1):
        position = math.floor(edges[i] / step + 0.5)
        if positions:  # a heavy range and the one after it start a cell of their own
            position = max(position, positions[-1] + (1 if heavy_range[i] or heavy_range[i - 1] else 0))
        if heavy_range[i]:
            last = max(position, math.floor(edges[i + 1] / step + 0.5) - 1)
            position = _roundest(position - 1, min(ranges - 1, last))
        positions.append(min(ranges - 1, position))
    return bounds, positions


def _roundest(low: int, high: int) -> int:
    """The value in (low, high] with the most trailing zero bits (`high` if they are equal)."""
    if low >= high:
        return high
    if low < 0:
        return 0
    shift = (low ^ high).bit_length() - 1
    return (high >> shift) << shift


def expand(bounds: Sequence[Sequence[Any]]) -> tuple[int, list[int]]:
    """Step 4 for plain ranks (position = rank): the coordinates' bit width (enough for the column with the
    most ranges) and each column's number of ranges (its bounds + 1). A column's coordinate is
    `rank * 2**bits // ranges`, so every column spans [0, 2**bits) (the seed multiplies by `max bounds / its
    bounds` for the same end)."""
    ranges = [len(b) + 1 for b in bounds]
    bits = max(1, (max(ranges, default=1) - 1).bit_length())
    return bits, ranges


@dataclass(frozen=True)
class StringBounds:
    """A string column's bounds for `rank`: their keys (`string_keys`, `width` bytes of text) and their UTF-8
    bytes, which settle the order of a value whose key ties with a bound's key cut short."""

    keys: np.ndarray
    texts: tuple[bytes, ...]
    width: int

    @property
    def cut(self) -> bool:
        """Whether some bound is longer than its key (else keys alone decide every rank)."""
        return any(len(t) > self.width for t in self.texts)


def bound_array(bounds: Sequence[Any]) -> np.ndarray | StringBounds:
    """A column's bounds for `rank`: bigints as a sorted numpy array, strings as `StringBounds`."""
    import numpy as np
    import pyarrow as pa

    if bounds and isinstance(bounds[0], str):
        texts = tuple(b.encode("utf-8") for b in bounds)
        width = string_width(texts)
        return StringBounds(string_keys(pa.array(bounds, type=pa.string()), width), texts, width)
    return np.array([int(b) for b in bounds], dtype=np.int64)


def string_width(encoded: Sequence[bytes]) -> int:
    """Bytes of text in a string's key: the longest bound's, at most `MAX_STRING_BYTES` (a longer bound's key is
    cut there; a value whose key ties with it is then compared whole, see `rank`)."""
    return max(1, min(MAX_STRING_BYTES, max((len(b) for b in encoded), default=0)))


def rank(values: pa.Array, bounds: np.ndarray | StringBounds) -> np.ndarray:
    """Step 5: the number of bounds below each value (`int64`; NULL values get 0, see `Coordinate.of`).
    Numbers: a branch-free binary search over all values at once, one gather and compare per halving (3x
    faster than `numpy.searchsorted` on unsorted values). Strings: numpy's search over the keys; where a value's
    key equals keys of bounds (both cut short: they share the key's bytes), a search of those bounds' whole
    bytes — equal prefixes tie on keys, they are never ordered by length."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(bounds, StringBounds):  # (for bytes, numpy's own search is the faster one)
        needles = string_keys(values, bounds.width)
        ranks = np.searchsorted(bounds.keys, needles, side="left").astype(np.int64)
        if bounds.cut:
            upper = np.searchsorted(bounds.keys, needles, side="right")
            ties = upper > ranks  # equal keys: equal strings, or both cut short
            if values.null_count:  # (a NULL's key is the empty string's; its rank is not used: `Coordinate.of`)
                ties &= values.is_valid().to_numpy(zero_copy_only=False)
            tied = np.flatnonzero(ties)
            if len(tied):
                texts = values.take(pa.array(tied)).cast(pa.large_binary()).to_pylist()
                for i, text in zip(tied.tolist(), texts, strict=True):
                    ranks[i] = bisect.bisect_left(bounds.texts, text, int(ranks[i]), int(upper[i]))
        return ranks
    filled = pc.fill_null(values, 0) if values.null_count else values
    if pa.types.is_floating(values.type):  # doubles (`sample_keys`): their `sortable_long`, as the bounds
        numbers = sortable_doubles(filled.to_numpy(zero_copy_only=False))
    else:
        numbers = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)
    size = 1 << len(bounds).bit_length()  # a power of two above the number of bounds
    padded = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)  # never below a value
    padded[:len(bounds)] = bounds
    count = len(numbers)
    position = np.zeros(count, dtype=np.intp)
    # into buffers made once (2.5x faster than new arrays in each halving): gather, compare, step on
    probe, found, below = np.empty(count, dtype=np.intp), np.empty(count, dtype=np.int64), np.empty(count, dtype=bool)
    step = size >> 1
    while step:
        np.add(position, step - 1, out=probe)
        np.take(padded, probe, out=found)
        np.less(found, numbers, out=below)
        np.multiply(below, step, out=probe)
        position += probe
        step >>= 1
    return position.astype(np.int64, copy=False)


def string_keys(values: pa.Array, width: int) -> np.ndarray:
    """Strings as numpy fixed-width bytes (`S<width + LENGTH_BYTES>`) in Spark's string order: the first
    `width` UTF-8 bytes, zero padded, then the length (big-endian), or `CUT` for a string longer than `width`.
    numpy compares these bytewise; the length tells a string from the same one with NUL bytes appended
    ('a' < 'a\\x00' < 'a\\x01'), which zero padding alone makes equal, and `CUT` puts a longer string after
    every string it starts with. So a key below another is a string below the other; equal keys are equal
    strings, or two strings cut short that share their first `width` bytes (their order is unknown: never
    their lengths'). Vectorized: one gather of rows x width bytes."""
    import numpy as np
    import pyarrow as pa

    binary = values.cast(pa.large_binary())
    count = len(binary)
    _, offsets_buffer, data_buffer = binary.buffers()
    assert offsets_buffer is not None
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[binary.offset:binary.offset + count + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    sizes = offsets[1:] - starts
    out = np.zeros((count, width + LENGTH_BYTES), dtype=np.uint8)
    if len(data):
        columns = np.arange(width, dtype=np.int64)
        index = np.minimum(starts[:, None] + columns[None, :], len(data) - 1)  # one gather of rows x width
        out[:, :width] = np.where(columns[None, :] < np.minimum(sizes, width)[:, None], data[index], np.uint8(0))
    length = np.where(sizes > width, CUT, sizes)  # (width <= MAX_STRING_BYTES: a length never reads as CUT)
    for i in range(LENGTH_BYTES):
        out[:, width + i] = (length >> (8 * (LENGTH_BYTES - 1 - i))) & 0xFF
    return np.asarray(out.reshape(-1).view(f"S{width + LENGTH_BYTES}"))
