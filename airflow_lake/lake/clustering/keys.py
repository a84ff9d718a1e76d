"""Curve keys: the words clustering sorts a group's rows by, and the file each row goes to.

The JVM maps each sort column to an integer that keeps its order (`coordinates.py`; SAMPLE strings stay
strings, SAMPLE doubles stay doubles, mapped as `coordinates.sortable_doubles` does); one UDF turns those into
coordinates — the rank among the sampled bounds (SAMPLE) or the low bits (DIRECT) — and the coordinates into
Z-order or Hilbert words (`curves.py`). The UDF is a Java one (`jvm_words.py`: `airflow_lake/jvm/CurveWords.java`,
the model passed as a binary literal) where its class is on the session's class path, else a scalar Arrow UDF
(`CurveKeys.evaluate`, numpy on Arrow batches of the sort columns only); both give the same words, bit for bit.

Cutting a group into `files` files: the sample that gives the SAMPLE bounds (DIRECT samples too, at least
20 rows per file) is put through the same function; the cuts are a range sort's boundaries over the whole
curve key (all its words, compared in order — never the first word alone, which DIRECT coordinates of
wide or skewed values leave equal for most rows). Top down first: where a curve cell's rows can be shared
between its two halves in whole files, each within a quarter of a file's share of rows, the cut is the
halves' border (so no file spans a large cell's border, the curve's far jumps; a key heavier than a file
counts as one file there). Where they cannot, cut by cut: each at the weighted quantile that splits the
rows still to cut evenly, moved within a quarter of a file's share to the value with the most trailing
zero bits (a border of the largest curve cell there, so files cover whole cells), and kept apart so that
every file starts at a sampled key of its own. So a group becomes the planned number of files whenever
the sample holds that many distinct keys. The UDF stores each row's file slot (the number of cuts at or
below its key) in the top bits of its first word, and the rows are repartitioned by a bigint that hashes
to that slot (`slots.py`): one pass, no second sampling of the data, and every output file is one
contiguous stretch of the curve.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from airflow_lake.lake.clustering import coordinates, curves, jvm_words, sample, slots
from airflow_lake.lake.clustering.layout import HILBERT, LINEAR, SAMPLE, Layout

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from airflow_lake.lake.spec.table_spec import TableSpec

log = logging.getLogger(__name__)
KEY_PREFIX = "__lake_curve"
SNAP_SHARE = 0.25  # a cut may move by this share of a file's rows either way, to a cell border


@dataclass(frozen=True)
class Coordinate:
    """How one sort column becomes a coordinate: SAMPLE ranks among `bounds` spread over `ranges` (see
    `sample.expand`), at each rank's position in 0..ranges-1 (`sample.weighted_ranges`; None: the rank itself),
    DIRECT (`bounds` None) keeps the low bits of `coordinates.direct_value`."""

    bounds: np.ndarray | sample.StringBounds | None = None
    ranges: int = 1
    positions: np.ndarray | None = None  # uint64, one per rank (len(bounds) + 1), non-decreasing, < ranges

    def of(self, values: pa.Array, bits: int) -> np.ndarray:
        """`np.uint64` coordinates of `bits` bits; NULL is the largest."""
        import pyarrow.compute as pc

        top = np.uint64((1 << bits) - 1)
        if self.bounds is None:  # the bits above `bits` are the same in every row (`_varying_bits`)
            raw = pc.fill_null(values, -1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            return np.asarray(raw.view(np.uint64) & top)
        at = np.arange(self.ranges, dtype=np.uint64) if self.positions is None else self.positions
        spread = (at << np.uint64(bits)) // np.uint64(self.ranges)
        out = np.asarray(spread[sample.rank(values, self.bounds)])  # position * 2**bits // ranges (sample.expand)
        if values.null_count:
            out[values.is_null().to_numpy(zero_copy_only=False)] = top
        return out


@dataclass(frozen=True)
class CurveKeys:
    """Everything the UDF needs (pickled to the Python workers): the curve, the coordinates' bit width, one
    `Coordinate` per sort column, and the file cuts of the group (`files` > 1)."""

    kind: str
    bits: int
    coordinates: tuple[Coordinate, ...]
    files: int = 1
    cuts: np.ndarray | None = None  # int64 (cuts x words), increasing curve keys where the next file starts

    @property
    def slot_bits(self) -> int:
        """Top bits of the first word that hold the row's file slot."""
        return (self.files - 1).bit_length() if self.files > 1 else 0

    @property
    def widths(self) -> list[int]:
        return curves.word_widths(len(self.coordinates) * self.bits, curves.WORD_BITS - self.slot_bits)

    @property
    def return_type(self) -> str:
        return curves.words_type(len(self.widths))

    def curve_words(self, arrays: Sequence[pa.Array]) -> list[np.ndarray]:
        """The curve words of rows given as one array per sort column (slot bits still zero)."""
        coords = [c.of(a, self.bits) for c, a in zip(self.coordinates, arrays, strict=True)]
        if self.kind == HILBERT:
            coords = curves.hilbert_transpose(coords, self.bits)
        return curves.interleave(coords, self.bits, curves.WORD_BITS - self.slot_bits)

    def words(self, arrays: Sequence[pa.Array]) -> list[np.ndarray]:
        """`curve_words` with the file slot in the first word's top bits."""
        words = self.curve_words(arrays)
        if self.slot_bits and self.cuts is not None and len(self.cuts):
            slot = cuts_at_or_below(self.cuts, words)
            words[0] = words[0] | (slot << np.int64(curves.WORD_BITS - self.slot_bits))
        return words

    def evaluate(self, *arrays: pa.Array) -> pa.Array:
        """The Arrow UDF: one batch of the sort columns in, the words out."""
        import pyarrow as pa

        words = self.words(arrays)
        if len(words) == 1:
            return pa.array(words[0], type=pa.int64())
        return pa.StructArray.from_arrays([pa.array(w, type=pa.int64()) for w in words],
                                          names=[f"w{i}" for i in range(len(words))])

    def with_cuts(self, arrays: Sequence[pa.Array], weights: np.ndarray, files: int) -> CurveKeys:
        """This model cutting rows into `files` files at the weighted quantiles of a sample (`arrays`);
        one file when the sample has fewer than two distinct keys."""
        model = dataclasses.replace(self, files=files)
        if files <= 1 or not len(weights):
            return dataclasses.replace(model, files=1)
        cuts = cut_points(model.curve_words(arrays), model.widths, weights, files)
        return dataclasses.replace(model, cuts=cuts) if len(cuts) else dataclasses.replace(model, files=1)


def cut_points(words: Sequence[np.ndarray], widths: Sequence[int], weights: np.ndarray, files: int) -> np.ndarray:
    """Increasing cuts (`int64`, one row of words per cut) of weighted sample keys (`words`, of `widths`
    bits each, compared in order) into `files` files of near equal weight: `min(files, distinct keys) - 1`
    of them, every file starting at a sampled key of its own.

    Top down first (`_halve`): where the rows of a block of the curve (a range of keys sharing their top bits)
    can be shared between its two halves in whole files, each file within `SNAP_SHARE` of its share, the cut
    is the halves' border, so no file spans the border of a large cell (a curve's far jump). Where they cannot,
    the block's cuts are taken one by one (`_walk`): each at the weighted quantile that splits the rows still to
    cut evenly, moved within `SNAP_SHARE` of a file's share to the value with the most trailing zero bits."""
    keys = np.stack([np.asarray(w, dtype=np.int64) for w in words], axis=1)  # words are non-negative
    order = np.lexsort(keys.T[::-1])  # (lexsort's last key is the primary one)
    ordered = keys[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    starts = np.flatnonzero(first)
    # one word: the key is the word (a list of Python ints, for `bisect` and the bit arithmetic of the cuts)
    distinct = ordered[starts, 0].tolist() if len(widths) == 1 else [_key(row, widths) for row in ordered[starts]]
    count = len(distinct)
    pieces = min(files, count)
    per_key = np.add.reduceat(np.asarray(weights, np.float64)[order], starts) if count else np.zeros(0)
    below = np.concatenate(([0.0], np.cumsum(per_key)))  # the weight of the keys under distinct[j]
    capped = np.concatenate(([0.0], np.cumsum(_capped(per_key, pieces))))  # ... heavy keys counting one file
    cuts = _halve(distinct, (capped, below), (0, count), pieces, bit=sum(widths) - 1,
                  share=capped[count] / max(pieces, 1))
    out = np.zeros((len(cuts), len(widths)), dtype=np.int64)
    for row, cut in enumerate(cuts):
        out[row] = _words(cut, widths)
    return out


def _capped(weights: np.ndarray, pieces: int) -> np.ndarray:
    """Key weights with the heavy ones capped at the rows per file of the others: a key holding more than a
    file's share fills one file however heavy it is, so the other files share the rest evenly (at every level
    of `_halve` too, not only in `_walk`). The cap `s` is the fixed point s = (light weight) / (pieces - heavy
    keys), heavy meaning a weight of at least s."""
    heavy = np.sort(weights)[::-1]
    total, taken = float(weights.sum()), 0.0
    for h in range(min(pieces, len(heavy))):
        cap = (total - taken) / (pieces - h)
        if heavy[h] < cap:
            return np.asarray(np.minimum(weights, cap))
        taken += float(heavy[h])
    return weights


def _halve(distinct: Sequence[int], weights: tuple[np.ndarray, np.ndarray], keys: tuple[int, int], pieces: int, *,
           bit: int, share: float) -> list[int]:
    """Cuts of the distinct keys `keys` (start..end-1, sharing their bits above `bit`) into `pieces` files, each
    half's files within `SNAP_SHARE` of `share` (the whole sample's rows per file: it does not drift).
    `weights`: the weight under each key with heavy keys capped (`_capped`), and as sampled (for `_walk`)."""
    below = weights[0]
    start, end = keys
    top_level = start == 0 and end == len(distinct)
    while pieces > 1 and bit >= 0:
        top = distinct[start] >> (bit + 1)
        middle = ((top << 1) | 1) << bit  # the first key of the upper half of the block
        split = bisect.bisect_left(distinct, middle, start, end)
        if split in (start, end):  # all keys in one half: look inside it
            bit -= 1
            continue
        low_weight, high_weight = below[split] - below[start], below[end] - below[split]
        exact = pieces * low_weight / (low_weight + high_weight) if low_weight + high_weight > 0 else pieces / 2
        lower = min(max(round(exact), 1, pieces - (end - split)), pieces - 1, split - start)
        if lower < 1 or max(abs(low_weight / lower - share), abs(high_weight / (pieces - lower) - share)) > \
                SNAP_SHARE * share:
            break  # the halves cannot have whole files of near equal rows
        return [*_halve(distinct, weights, (start, split), lower, bit=bit - 1, share=share), middle,
                *_halve(distinct, weights, (split, end), pieces - lower, bit=bit - 1, share=share)]
    # in a block that got its files here, a cut moves less as its files' share is off the whole one's already
    slack = None if top_level or pieces < 1 else \
        max(0.0, SNAP_SHARE * share - abs((below[end] - below[start]) / pieces - share))
    return _walk(distinct, weights[1], (start, end), pieces, slack)


def _walk(distinct: Sequence[int], below: np.ndarray, keys: tuple[int, int], pieces: int,
          slack: float | None = None) -> list[int]:
    """Cuts of the distinct keys `keys` (start..end-1) into `pieces` files one by one (see `cut_points`), each
    moved by at most `slack` of weight (and `SNAP_SHARE` of its file's share)."""
    cuts: list[int] = []
    start, end = keys  # start: the distinct key the current file starts at
    for i in range(1, pieces):
        # the rest is shared evenly, so one heavy key early on does not leave later files empty
        share = (below[end] - below[start]) / (pieces - i + 1)
        target = below[start] + share
        lowest, highest = start + 1, end - (pieces - i)  # each file keeps a key of its own
        near = _nearest(below, target, lowest, highest)
        move = SNAP_SHARE * share if slack is None else min(slack, SNAP_SHARE * share)
        low = max(lowest, int(np.searchsorted(below[:end], target - move, side="left")))
        high = min(highest, int(np.searchsorted(below[:end], target + move, side="right")) - 1)
        if low > high:
            low = high = near
        cut = _roundest(distinct[low - 1], distinct[high])
        start = bisect.bisect_left(distinct, cut, low, high + 1)
        cuts.append(cut)
    return cuts


def cuts_at_or_below(cuts: np.ndarray, words: Sequence[np.ndarray]) -> np.ndarray:
    """For each row of `words`, how many of the increasing `cuts` (rows of words) are at or below its key,
    in lexicographic order of the words: its file slot. A branch-free binary search over all rows at once."""
    size = 1 << len(cuts).bit_length()  # a power of two above the number of cuts
    padded = np.full((size, cuts.shape[1]), np.iinfo(np.int64).max, dtype=np.int64)  # above every key
    padded[:len(cuts)] = cuts
    columns = [np.ascontiguousarray(padded[:, j]) for j in range(padded.shape[1])]
    position = np.zeros(len(words[0]), dtype=np.int64)
    step = size >> 1
    while step:
        probe = position + (step - 1)
        at_or_below = columns[-1][probe] <= words[-1]
        for j in range(len(columns) - 2, -1, -1):  # from the last word up: an earlier word decides first
            cut = columns[j][probe]
            at_or_below = (cut < words[j]) | ((cut == words[j]) & at_or_below)
        position += at_or_below * step
        step >>= 1
    return position


def _key(row: np.ndarray, widths: Sequence[int]) -> int:
    """The curve key of one row of words, as one integer."""
    key = 0
    for word, width in zip(row.tolist(), widths, strict=True):
        key = (key << width) | int(word)
    return key


def _words(key: int, widths: Sequence[int]) -> list[int]:
    """Inverse of `_key`."""
    out = []
    for width in reversed(widths):
        out.append(key & ((1 << width) - 1))
        key >>= width
    return out[::-1]


def _nearest(below: np.ndarray, target: float, lowest: int, highest: int) -> int:
    """The index in lowest..highest whose weight below is nearest `target`."""
    j = min(max(int(np.searchsorted(below[:highest + 1], target)), lowest), highest)
    if j > lowest and target - below[j - 1] <= below[j] - target:
        return j - 1
    return j


def _roundest(low: int, high: int) -> int:
    """The value in (low, high] with the most trailing zero bits (`high` if they are equal)."""
    if low >= high:
        return high
    shift = (low ^ high).bit_length() - 1  # the top bit where they differ: set in high, clear in low
    return (high >> shift) << shift


def add_keys(df: DataFrame, layout: Layout, spec: TableSpec, *, files: int = 1, seed: int = 0,
             rows: int | None = None, jvm: bool = True) -> tuple[DataFrame, list[str], Column | None]:
    """`df` with the columns to sort by and their names, and for `files` > 1 the column to repartition by
    into `files` partitions (None: LINEAR, or nothing sampled; then use `repartitionByRange` of the keys).
    LINEAR sorts by the columns themselves. `rows`: the rows of `df`, if known (then the sample is taken
    without counting them first, `sample.sample_rows`). `jvm`: compute the words in the JVM where its class is
    on the session's class path (`jvm_words`), else (and with False) in Python workers (the same words)."""
    from pyspark.sql import functions as F

    if layout.effective_kind == LINEAR:
        return df, list(layout.columns), None
    model, inputs = curve_model(df, layout, spec, files=files, seed=seed, rows=rows)
    names = [f"{KEY_PREFIX}_w{i}" for i in range(len(model.widths))]
    words, where = words_column(df, model, inputs, [spec.column(c).type for c in layout.columns], jvm=jvm)
    log.info("%s: curve words computed in %s", layout.describe(), where)
    if len(names) == 1:
        df = df.withColumn(names[0], words)
    else:
        df = df.withColumn(KEY_PREFIX, words)
        df = df.withColumns({n: F.col(KEY_PREFIX)[f"w{i}"] for i, n in enumerate(names)}).drop(KEY_PREFIX)
    partition = None
    if model.files > 1:
        values = F.expr(f"array({', '.join(f'CAST({v} AS BIGINT)' for v in slots.slot_values(model.files))})")
        slot = F.shiftright(F.col(names[0]), curves.WORD_BITS - model.slot_bits).cast("int")
        partition = F.element_at(values, slot + F.lit(1))
    return df, names, partition


def curve_model(df: DataFrame, layout: Layout, spec: TableSpec, *, files: int = 1, seed: int = 0,
                rows: int | None = None) -> tuple[CurveKeys, list[Column]]:
    """The curve of a ZORDER / HILBERT `layout` over `df` (bounds and file cuts from a sample) and the columns
    its words are computed from (see `add_keys`)."""
    from pyspark.sql import functions as F

    types = [spec.column(c).type for c in layout.columns]
    if layout.curve == SAMPLE:
        inputs = sample.sample_keys(layout.columns, types)
    else:
        inputs = [coordinates.direct_value(F.col(f"`{c}`"), t) for c, t in zip(layout.columns, types, strict=True)]
    keys = df.select(*[k.alias(f"k{i}") for i, k in enumerate(inputs)])
    started = time.monotonic()
    candidates: list[tuple[tuple[Any, ...], float]] = []
    if layout.curve == SAMPLE or files > 1:
        # enough sampled rows per file too (Spark's RangePartitioner takes 20 per partition)
        if rows is not None:
            candidates = sample.sample_rows(df, inputs, rows, max(layout.sample_ranges, files), seed)
        else:
            plan = sample.sample_plan(sample.partition_counts(keys), max(layout.sample_ranges, files))
            candidates = sample.sample(keys, plan, seed)
    columns = [[c[0][i] for c in candidates] for i in range(len(inputs))]
    weights = np.array([c[1] for c in candidates], dtype=np.float64)
    if layout.curve == SAMPLE:
        ranges = min(layout.sample_ranges, max(1, len(candidates)))
        coords = tuple(Coordinate(sample.bound_array(b), ranges, np.array(at, dtype=np.uint64))
                       for b, at in (sample.weighted_ranges(list(zip(col, weights.tolist(), strict=True)), ranges)
                                     if t == "string" else sample.weighted_number_ranges(col, weights, ranges)
                                     for col, t in zip(columns, types, strict=True)))
        bits = max(1, (ranges - 1).bit_length())  # positions are < ranges (sample.expand)
    else:
        bits = _varying_bits(keys)
        coords = tuple(Coordinate() for _ in inputs)
    model = CurveKeys(layout.kind, bits, coords).with_cuts(_arrays(columns, types, layout.curve), weights, files)
    log.info("%s: %d sampled rows, %d bits per coordinate, %d file(s) (%.1f s)", layout.describe(), len(candidates),
             bits, model.files, time.monotonic() - started)
    return model, inputs


def words_column(df: DataFrame, model: CurveKeys, inputs: Sequence[Column], types: Sequence[str], *,
                 jvm: bool = True) -> tuple[Column, str]:
    """The column of `model`'s words of `inputs` (a bigint, or a struct of `w0`..) and where they are computed:
    in the JVM (`jvm_words`) where its class is on the session's class path, else in Python workers."""
    from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

    words = jvm_words.words_column(df.sparkSession, model, inputs, types) if jvm else None
    if words is not None:
        return words, "the JVM"
    with warnings.catch_warnings():  # "prefer type hints": the function is a bound method taking *arrays
        warnings.simplefilter("ignore", UserWarning)
        return arrow_udf(model.evaluate, model.return_type, ArrowUDFType.SCALAR)(*inputs), \
            "Python workers (an Arrow UDF)"


def _arrays(columns: Sequence[Sequence[Any]], types: Sequence[str], curve: str) -> list[pa.Array]:
    import pyarrow as pa

    return [pa.array(col, type=pa.string() if curve == SAMPLE and t == "string" else pa.int64())
            for col, t in zip(columns, types, strict=True)]


def _varying_bits(keys: DataFrame) -> int:
    """How many low bits of the DIRECT values vary (one pass over the sort columns): the bits above are the
    same in every row, so the curve needs fewer levels (the order is the same)."""
    from pyspark.sql import functions as F

    flip = F.lit(coordinates.MIN_LONG)  # signed order of (v ^ MIN) is the unsigned order of v
    aggs = [f(F.col(c).bitwiseXOR(flip)) for c in keys.columns for f in (F.min, F.max)]
    row = keys.agg(*aggs).first()
    bits = 1
    mask = (1 << 64) - 1
    for i in range(len(keys.columns)):
        low, high = (row[2 * i], row[2 * i + 1]) if row is not None else (None, None)
        if low is not None and high is not None:
            bits = max(bits, coordinates.common_bits((low ^ coordinates.MIN_LONG) & mask,
                                                     (high ^ coordinates.MIN_LONG) & mask))
    return bits


__all__ = ["KEY_PREFIX", "Coordinate", "CurveKeys", "add_keys", "curve_model", "cut_points", "cuts_at_or_below",
           "words_column"]
