"""Curve keys: the words clustering sorts a group's rows by, and the file each row goes to.

The JVM maps each sort column to an integer that keeps its order (`coordinates.py`; SAMPLE strings stay
strings); one scalar Arrow UDF (`CurveKeys.evaluate`, numpy on Arrow batches of the sort columns only, the
rest of the row stays in the JVM) turns those into coordinates — the rank among the sampled bounds (SAMPLE)
or the low bits (DIRECT) — and the coordinates into Z-order or Hilbert words (`curves.py`).

Cutting a group into `files` files: the sample that gives the SAMPLE bounds (DIRECT samples too) is put
through the same function; its weighted quantiles of the first word, each moved within a quarter of a
file's share of rows to the value with the most trailing zero bits (a border of the largest curve cell
there, so files cover whole cells), are the cuts. The UDF stores each row's file slot in the top bits of
its first word, and the rows are repartitioned by a bigint that hashes to that slot (`slots.py`): one
pass, no second sampling of the data, and every output file is one contiguous stretch of the curve.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from airflow_lake.lake.clustering import coordinates, curves, sample, slots
from airflow_lake.lake.clustering.layout import HILBERT, LINEAR, SAMPLE, Layout

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from airflow_lake.lake.spec import TableSpec

log = logging.getLogger(__name__)
KEY_PREFIX = "__lake_curve"
SNAP_SHARE = 0.25  # a cut may move by this share of a file's rows either way, to a cell border


@dataclass(frozen=True)
class Coordinate:
    """How one sort column becomes a coordinate: SAMPLE ranks among `bounds` spread over `ranges` (see
    `sample.expand`), DIRECT (`bounds` None) keeps the low bits of `coordinates.direct_value`."""

    bounds: np.ndarray | None = None
    ranges: int = 1

    def of(self, values: pa.Array, bits: int) -> np.ndarray:
        """`np.uint64` coordinates of `bits` bits; NULL is the largest."""
        import pyarrow.compute as pc

        top = np.uint64((1 << bits) - 1)
        if self.bounds is None:  # the bits above `bits` are the same in every row (`_varying_bits`)
            raw = pc.fill_null(values, -1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            return np.asarray(raw.view(np.uint64) & top)
        spread = (np.arange(self.ranges, dtype=np.uint64) << np.uint64(bits)) // np.uint64(self.ranges)
        out = np.asarray(spread[sample.rank(values, self.bounds)])  # rank * 2**bits // ranges (sample.expand)
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
    cuts: np.ndarray | None = None  # sorted first-word values where the next file starts

    @property
    def slot_bits(self) -> int:
        """Top bits of the first word that hold the row's file slot."""
        return (self.files - 1).bit_length() if self.files > 1 else 0

    @property
    def widths(self) -> list[int]:
        return curves.word_widths(len(self.coordinates) * self.bits, curves.WORD_BITS - self.slot_bits)

    @property
    def return_type(self) -> str:
        if len(self.widths) == 1:
            return "bigint"
        return "struct<" + ", ".join(f"w{i}: bigint" for i in range(len(self.widths))) + ">"

    def curve_words(self, arrays: Sequence[pa.Array]) -> list[np.ndarray]:
        """The curve words of rows given as one array per sort column (slot bits still zero)."""
        coords = [c.of(a, self.bits) for c, a in zip(self.coordinates, arrays, strict=True)]
        if self.kind == HILBERT:
            coords = curves.hilbert_transpose(coords, self.bits)
        return curves.interleave(coords, self.bits, curves.WORD_BITS - self.slot_bits)

    def words(self, arrays: Sequence[pa.Array]) -> list[np.ndarray]:
        """`curve_words` with the file slot in the first word's top bits."""
        words = self.curve_words(arrays)
        if self.slot_bits and self.cuts is not None:
            slot = np.searchsorted(self.cuts, words[0], side="right").astype(np.int64)
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
        """This model cutting rows into `files` files at the weighted quantiles of a sample (`arrays`)."""
        model = dataclasses.replace(self, files=files)
        if files <= 1 or not len(weights):
            return dataclasses.replace(model, files=1)
        first = model.curve_words(arrays)[0].view(np.uint64)
        return dataclasses.replace(model, cuts=cut_points(first, weights, files).view(np.int64))


def cut_points(keys: np.ndarray, weights: np.ndarray, files: int) -> np.ndarray:
    """Up to `files - 1` increasing `np.uint64` cuts of weighted sample keys into `files` equal shares, each
    moved within `SNAP_SHARE` of a share to the value with the most trailing zero bits."""
    order = np.argsort(keys, kind="stable")
    ordered, cumulative = keys[order], np.cumsum(weights[order])
    total, share = float(cumulative[-1]), float(cumulative[-1]) / files
    last = len(ordered) - 1
    cuts: list[int] = []
    for i in range(1, files):
        target = i * share
        low = int(ordered[min(last, int(np.searchsorted(cumulative, target - SNAP_SHARE * share)))])
        high = int(ordered[min(last, int(np.searchsorted(cumulative, min(total, target + SNAP_SHARE * share))))])
        cut = _roundest(low, high)
        if not cuts or cut > cuts[-1]:
            cuts.append(cut)
    return np.array(cuts, dtype=np.uint64)


def _roundest(low: int, high: int) -> int:
    """The value in (low, high] with the most trailing zero bits (`high` if they are equal)."""
    if low >= high:
        return high
    shift = (low ^ high).bit_length() - 1  # the top bit where they differ: set in high, clear in low
    return (high >> shift) << shift


def add_keys(df: DataFrame, layout: Layout, spec: TableSpec, *, files: int = 1, seed: int = 0
             ) -> tuple[DataFrame, list[str], Column | None]:
    """`df` with the columns to sort by and their names, and for `files` > 1 the column to repartition by
    into `files` partitions (None: LINEAR, or nothing sampled; then use `repartitionByRange` of the keys).
    LINEAR sorts by the columns themselves."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

    if layout.effective_kind == LINEAR:
        return df, list(layout.columns), None
    types = [spec.column(c).type for c in layout.columns]
    if layout.curve == SAMPLE:
        inputs = sample.sample_keys(layout.columns, types)
    else:
        inputs = [coordinates.direct_value(F.col(f"`{c}`"), t) for c, t in zip(layout.columns, types, strict=True)]
    keys = df.select(*[k.alias(f"k{i}") for i, k in enumerate(inputs)])
    started = time.monotonic()
    candidates: list[tuple[tuple[Any, ...], float]] = []
    if layout.curve == SAMPLE or files > 1:
        plan = sample.sample_plan(sample.partition_counts(keys), layout.sample_ranges)
        candidates = sample.sample(keys, plan, seed)
    columns = [[c[0][i] for c in candidates] for i in range(len(inputs))]
    weights = np.array([c[1] for c in candidates], dtype=np.float64)
    if layout.curve == SAMPLE:
        ranges = min(layout.sample_ranges, max(1, len(candidates)))
        bounds = [sample.determine_bounds(list(zip(col, weights.tolist(), strict=True)), ranges) for col in columns]
        bits, counts = sample.expand(bounds)
        coords = tuple(Coordinate(sample.bound_array(b), n) for b, n in zip(bounds, counts, strict=True))
    else:
        bits = _varying_bits(keys)
        coords = tuple(Coordinate() for _ in inputs)
    model = CurveKeys(layout.kind, bits, coords).with_cuts(_arrays(columns, types, layout.curve), weights, files)
    names = [f"{KEY_PREFIX}_w{i}" for i in range(len(model.widths))]
    log.info("%s: %d sampled rows, %d bits per coordinate, %d file(s) (%.1f s)", layout.describe(), len(candidates),
             bits, model.files, time.monotonic() - started)
    with warnings.catch_warnings():  # "prefer type hints": the function is a bound method taking *arrays
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(model.evaluate, model.return_type, ArrowUDFType.SCALAR)
    if len(names) == 1:
        df = df.withColumn(names[0], udf(*inputs))
    else:
        df = df.withColumn(KEY_PREFIX, udf(*inputs))
        df = df.withColumns({n: F.col(KEY_PREFIX)[f"w{i}"] for i, n in enumerate(names)}).drop(KEY_PREFIX)
    partition = None
    if model.files > 1:
        values = F.expr(f"array({', '.join(f'CAST({v} AS BIGINT)' for v in slots.slot_values(model.files))})")
        slot = F.shiftright(F.col(names[0]), curves.WORD_BITS - model.slot_bits).cast("int")
        partition = F.element_at(values, slot + F.lit(1))
    return df, names, partition


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


__all__ = ["KEY_PREFIX", "Coordinate", "CurveKeys", "add_keys", "cut_points"]
