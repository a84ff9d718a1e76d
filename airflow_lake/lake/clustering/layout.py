"""Layouts: how clustering orders rows — LINEAR (a sort), ZORDER or HILBERT (space-filling curves) over
1..N columns, with curve coordinates by DIRECT mapping or SAMPLE'd range bounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering import coordinates
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.strict import SpecReader

if TYPE_CHECKING:
    from airflow_lake.lake.spec.table_spec import TableSpec

LINEAR, ZORDER, HILBERT = "LINEAR", "ZORDER", "HILBERT"
DIRECT, SAMPLE = "DIRECT", "SAMPLE"
KINDS = (LINEAR, ZORDER, HILBERT)
CURVES = (DIRECT, SAMPLE)
# SAMPLE: ranges per column (Hudi: hoodie.layout.optimize.build.curve.sample.size); a power of two, so the
# curve's cells split the rows evenly (sample.expand)
DEFAULT_RANGES = 1024
MAX_RANGES = 100_000


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
                if not coordinates.curve_type_ok(type_name):
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
