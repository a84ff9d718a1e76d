"""A clustering plan: groups of files to rewrite together, how many files each becomes, and the layout.

A plan is stored as the metadata of a *requested* `replace` instant (`_lake/pending/<id>.requested.json`,
the Hudi way): scheduling writes it, executing completes it. Its JSON form is versioned, and read back
strictly: the file can be edited by hand or damaged, so every field is checked (`PlanFormatError` names the
first bad one) before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.clustering.layout import CURVES, DEFAULT_RANGES, KINDS, MAX_RANGES, SAMPLE, Layout
from airflow_lake.lake.errors import LakeSpecError, LakeUnsafePath
from airflow_lake.lake.format import instants, paths

if TYPE_CHECKING:
    from airflow_lake.lake.spec.table_spec import TableSpec

PLAN_FORMAT = 1
SCHEDULE_OPERATION = instants.PLAN_OPERATION  # its requested instants are plans, waiting for an executor
EXECUTE_OPERATION = "execute_clustering"


class PlanFormatError(ValueError):
    """A stored plan that cannot be run as it is: the message names the field and what is wrong."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


def _whole(raw: Mapping[str, Any], key: str, where: str, minimum: int) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanFormatError(f"{where}{key} is {_show(value)}, not a whole number >= {minimum}")
    return value


def _text_list(value: Any, where: str, *, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) \
            or (not value and not allow_empty):
        raise PlanFormatError(f"{where} is {_show(value)}, not a {'' if allow_empty else 'non-empty '}list of names")
    return tuple(value)


@dataclass(frozen=True)
class PlanGroup:
    """Files of one partition rewritten together into `output_files` files (one per bucket for buckets)."""

    partition: Mapping[str, str | None]
    files: tuple[str, ...]
    bytes: int
    rows: int
    output_files: int
    buckets: tuple[int, ...] = ()  # bucketed groups: the bucket ids the group holds

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out: dict[str, Any] = {"partition": dict(self.partition), "files": list(self.files), "bytes": self.bytes,
                               "rows": self.rows, "output_files": self.output_files}
        if self.buckets:
            out["buckets"] = list(self.buckets)
        return out

    @classmethod
    def from_dict(cls, raw: Any, where: str = "") -> PlanGroup:
        """Inverse of `to_dict`; raises `PlanFormatError` naming the field (prefixed by `where`)."""
        if not isinstance(raw, Mapping):
            raise PlanFormatError(f"{where.rstrip('.')} is {_show(raw)}, not an object")
        partition = raw.get("partition")
        if not isinstance(partition, Mapping) or not all(
                isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in partition.items()):
            raise PlanFormatError(f"{where}partition is {_show(partition)}, not an object of column: value")
        files = _text_list(raw.get("files"), f"{where}files", allow_empty=False)
        try:  # the files a plan rewrites (and so removes) lie in the table's data area
            paths.confined(files, f"the plan's {where}files")
        except LakeUnsafePath as err:
            raise PlanFormatError(str(err)) from err
        rows = _whole(raw, "rows", where, 0)
        outputs = _whole(raw, "output_files", where, 1)
        buckets = raw.get("buckets") or []
        if not isinstance(buckets, list) or any(isinstance(b, bool) or not isinstance(b, int) or b < 0
                                                for b in buckets) or len(set(buckets)) != len(buckets):
            raise PlanFormatError(f"{where}buckets is {_show(buckets)}, not a list of distinct bucket ids")
        if buckets and outputs != len(buckets):
            raise PlanFormatError(f"{where}output_files is {outputs}, but a bucketed group writes one file per "
                                  f"bucket ({len(buckets)})")
        if outputs > max(1, rows):
            raise PlanFormatError(f"{where}output_files is {outputs}, more files than the group has rows ({rows})")
        return cls(dict(partition), files, _whole(raw, "bytes", where, 0), rows, outputs, tuple(buckets))


@dataclass(frozen=True)
class ClusteringPlan:
    """What one execution rewrites, decided at scheduling time from snapshot `base_seq`."""

    groups: tuple[PlanGroup, ...]
    layout: Layout
    base_seq: int
    strategy: Mapping[str, Any] = field(default_factory=dict)  # the settings that chose the groups (for people)

    @property
    def files(self) -> list[str]:
        """Every input file."""
        return [f for g in self.groups for f in g.files]

    @property
    def input_bytes(self) -> int:
        """Bytes of all input files."""
        return sum(g.bytes for g in self.groups)

    @property
    def output_files(self) -> int:
        """Files the plan writes (at most)."""
        return sum(g.output_files for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the requested instant's metadata `plan`)."""
        return {"format": PLAN_FORMAT, "base_seq": self.base_seq, "layout": self.layout.to_dict(),
                "strategy": dict(self.strategy), "groups": [g.to_dict() for g in self.groups],
                "input_files": len(self.files), "input_bytes": self.input_bytes, "output_files": self.output_files}

    @classmethod
    def from_dict(cls, raw: Any) -> ClusteringPlan:
        """Inverse of `to_dict`; raises `PlanFormatError` naming the first bad field."""
        if not isinstance(raw, Mapping):
            raise PlanFormatError(f"the plan is {type(raw).__name__}, not an object")
        if raw.get("format") != PLAN_FORMAT:
            raise PlanFormatError(f"format is {raw.get('format')!r}, not {PLAN_FORMAT}")
        groups = raw.get("groups")
        if not isinstance(groups, list) or not groups:
            raise PlanFormatError(f"groups is {_show(groups)}, not a non-empty list")
        plan = cls(tuple(PlanGroup.from_dict(g, f"groups[{i}].") for i, g in enumerate(groups)),
                   _layout(raw.get("layout")), _whole(raw, "base_seq", "", 0),
                   dict(raw.get("strategy") or {}) if isinstance(raw.get("strategy") or {}, Mapping) else {})
        seen: set[str] = set()
        for i, group in enumerate(plan.groups):
            for path in group.files:
                if path in seen:  # read twice, it would be written twice
                    raise PlanFormatError(f"groups[{i}].files lists {path!r} a second time")
                seen.add(path)
        return plan

    def check_against(self, spec: TableSpec) -> None:
        """Raise `PlanFormatError` if the table (as it is now) cannot run this plan: its layout's columns
        and the groups' partition columns must be the table's."""
        try:
            self.layout.resolved(spec, "layout.sort_columns")
        except LakeSpecError as err:
            raise PlanFormatError(f"{err.field}: {err.problem.rstrip('.')}") from None
        for i, group in enumerate(self.groups):
            if sorted(group.partition) != sorted(spec.partition_columns):
                raise PlanFormatError(f"groups[{i}].partition is {dict(group.partition)!r}, but the table is "
                                      f"partitioned by {list(spec.partition_columns)}")

    def summary(self) -> dict[str, Any]:
        """Numbers for XCom and the CLI."""
        return {"groups": len(self.groups), "input_files": len(self.files), "input_bytes": self.input_bytes,
                "output_files": self.output_files, "partitions": len({tuple(sorted(g.partition.items()))
                                                                      for g in self.groups}),
                "layout": self.layout.describe()}


def _layout(raw: Any) -> Layout:
    if not isinstance(raw, Mapping):
        raise PlanFormatError(f"layout is {_show(raw)}, not an object")
    kind, curve = raw.get("layout"), raw.get("curve", SAMPLE)
    if kind not in KINDS:
        raise PlanFormatError(f"layout.layout is {_show(kind)}, not one of {', '.join(KINDS)}")
    if curve not in CURVES:
        raise PlanFormatError(f"layout.curve is {_show(curve)}, not one of {', '.join(CURVES)}")
    columns = _text_list(raw.get("sort_columns") or [], "layout.sort_columns", allow_empty=True)
    ranges = raw.get("sample_ranges", DEFAULT_RANGES)
    if isinstance(ranges, bool) or not isinstance(ranges, int) or not 2 <= ranges <= MAX_RANGES:
        raise PlanFormatError(f"layout.sample_ranges is {_show(ranges)}, not a whole number in 2..{MAX_RANGES}")
    return Layout(kind, columns, curve, ranges)
