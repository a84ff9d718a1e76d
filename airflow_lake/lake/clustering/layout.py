"""Layouts: how clustering orders rows — LINEAR (a sort), ZORDER or HILBERT (space-filling curves) over
1..N columns, with curve coordinates by DIRECT mapping or SAMPLE'd range bounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering import curves, sample
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec_reader import SpecReader

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from airflow_lake.lake.spec import TableSpec

LINEAR, ZORDER, HILBERT = "LINEAR", "ZORDER", "HILBERT"
DIRECT, SAMPLE = "DIRECT", "SAMPLE"
KINDS = (LINEAR, ZORDER, HILBERT)
CURVES = (DIRECT, SAMPLE)
# SAMPLE: ranges per column (Hudi: hoodie.layout.optimize.build.curve.sample.size); a power of two, so the
# curve's cells split the rows evenly (sample.expand)
DEFAULT_RANGES = 1024
MAX_RANGES = 100_000
KEY_PREFIX = "__lake_curve"


@dataclass(frozen=True)
class Layout:
    """The row order clustering writes."""

    kind: str = LINEAR
    columns: tuple[str, ...] = ()
    curve: str = SAMPLE
    sample_ranges: int = DEFAULT_RANGES

    @classmethod
    def read(cls, reader: SpecReader, spec: TableSpec) -> Layout:
        """From an operation spec's `layout`, `sort_columns`, `curve` and `sample_ranges` fields."""
        kind = reader.choice("layout", KINDS, LINEAR)
        columns = reader.strings("sort_columns") or []
        curve = reader.choice("curve", CURVES, SAMPLE)
        ranges = reader.number("sample_ranges", default=DEFAULT_RANGES, minimum=2)
        assert ranges is not None
        if not float(ranges).is_integer() or ranges > MAX_RANGES:
            raise LakeSpecError(reader.field("sample_ranges"), f"{ranges!r} is not a whole number of ranges "
                                f"in 2..{MAX_RANGES}.", f"Give e.g. {DEFAULT_RANGES}.")
        layout = cls(kind, tuple(columns), curve, int(ranges))
        return layout.resolved(spec, reader.field("sort_columns"))

    def resolved(self, spec: TableSpec, field: str = "sort_columns") -> Layout:
        """Checked against the table: columns exist (names as the table spells them), are not partition
        columns, have types the layout can order; bucketed tables keep their buckets' order."""
        names = []
        for name in self.columns:
            match = [c.name for c in spec.columns if c.name.lower() == str(name).lower()]
            if not match:
                raise LakeSpecError(field, f"{name!r} is not a column of the table (columns: "
                                    f"{', '.join(spec.column_names)}).", "Name existing columns.")
            if match[0] in spec.partition_columns:
                raise LakeSpecError(field, f"{match[0]!r} is a partition column: every row of a partition has "
                                    "the same value.", "Order by data columns.")
            names.append(match[0])
        if len(set(names)) != len(names):
            raise LakeSpecError(field, f"a column is listed twice in {names}.", "List each column once.")
        if self.kind != LINEAR and not names:
            raise LakeSpecError(field, f"layout {self.kind} needs sort columns.", "Give 1..N columns.")
        if self.kind != LINEAR:
            for name in names:
                type_name = spec.column(name).type
                if not curves.curve_type_ok(type_name):
                    raise LakeSpecError(field, f"column {name!r} has type {type_name}, which a {self.kind} curve "
                                        "cannot order.", "Use integer, floating point, decimal, date, timestamp "
                                        "or string columns, or layout LINEAR.")
        bucket = spec.bucket
        if bucket is not None and bucket.sort_columns:
            if self.kind != LINEAR:
                raise LakeSpecError(field, f"the table's buckets are sorted by {list(bucket.sort_columns)}; a "
                                    f"{self.kind} layout would undo that order.", "Use layout LINEAR (buckets "
                                    "keep their sort columns), or a bucket spec without sort_columns.")
            if names and names != list(bucket.sort_columns):
                raise LakeSpecError(field, f"the table's buckets are sorted by {list(bucket.sort_columns)}, not "
                                    f"{names}.", "Leave sort_columns out: clustering keeps the bucket order.")
            names = list(bucket.sort_columns)
        return Layout(self.kind, tuple(names), self.curve, self.sample_ranges)

    @property
    def effective_kind(self) -> str:
        """A curve over one column is a range sort of it."""
        return LINEAR if len(self.columns) <= 1 else self.kind

    def to_dict(self) -> dict[str, Any]:
        """JSON form (in the plan)."""
        return {"layout": self.kind, "sort_columns": list(self.columns), "curve": self.curve,
                "sample_ranges": self.sample_ranges}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Layout:
        """Inverse of `to_dict`."""
        return cls(str(raw["layout"]), tuple(raw.get("sort_columns") or ()), str(raw.get("curve", SAMPLE)),
                   int(raw.get("sample_ranges", DEFAULT_RANGES)))

    def describe(self) -> str:
        """One line for logs."""
        if self.effective_kind == LINEAR:
            return f"LINEAR({', '.join(self.columns)})" if self.columns else "no sort"
        return f"{self.kind}({', '.join(self.columns)}; {self.curve})"


def add_keys(df: DataFrame, layout: Layout, spec: TableSpec, seed: int = 0) -> tuple[DataFrame, list[str]]:
    """`df` with the columns to sort by (for curves: key words `__lake_curve_*`, computed in the JVM) and
    their names. LINEAR sorts by the columns themselves."""
    from pyspark.sql import functions as F

    if layout.effective_kind == LINEAR:
        return df, list(layout.columns)
    types = [spec.column(c).type for c in layout.columns]
    coords = [f"{KEY_PREFIX}_c{i}" for i in range(len(layout.columns))]
    if layout.curve == DIRECT:
        df = df.withColumns({name: curves.direct_value(F.col(f"`{c}`"), t)
                             for name, c, t in zip(coords, layout.columns, types, strict=True)})
        bits = _varying_bits(df, coords)
        df = df.withColumns({name: curves.trimmed(F.col(name), bits) for name in coords})
    else:
        key_exprs = sample.sample_keys(layout.columns, types)
        keys = df.select(*[k.alias(f"k{i}") for i, k in enumerate(key_exprs)])
        plan = sample.sample_plan(sample.partition_counts(keys), layout.sample_ranges)
        candidates = sample.sample(keys, plan, seed)
        ranges = min(layout.sample_ranges, max(1, len(candidates)))
        bounds = [sample.determine_bounds([(c[0][i], c[1]) for c in candidates], ranges)
                  for i in range(len(layout.columns))]
        df, bits = sample.rank_columns(df, key_exprs, bounds, coords)
    if layout.kind == HILBERT:
        df = curves.hilbert_transpose(df, coords, bits)
    words = curves.interleave([F.col(c) for c in coords], bits)
    names = [f"{KEY_PREFIX}_w{i}" for i in range(len(words))]
    df = df.withColumns(dict(zip(names, words, strict=True))).drop(*coords)
    return df, names



def _varying_bits(df: DataFrame, coords: list[str]) -> int:
    """How many low bits of the DIRECT coordinates vary in `df` (one pass over the sort columns): the bits
    above are the same in every row, so the curve needs fewer levels (the order is the same)."""
    from pyspark.sql import functions as F

    flip = F.lit(curves.MIN_LONG)  # signed order of (v ^ MIN) is the unsigned order of v
    aggs = [f(F.col(c).bitwiseXOR(flip)) for c in coords for f in (F.min, F.max)]
    row = df.agg(*aggs).first()
    bits = 1
    for i in range(len(coords)):
        low, high = (row[2 * i], row[2 * i + 1]) if row is not None else (None, None)
        if low is not None and high is not None:
            mask = (1 << 64) - 1
            bits = max(bits, curves.common_bits((low ^ curves.MIN_LONG) & mask, (high ^ curves.MIN_LONG) & mask))
    return bits
