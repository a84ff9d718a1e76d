"""A clustering plan: groups of files to rewrite together, how many files each becomes, and the layout.

A plan is stored as the metadata of a *requested* `replace` instant (`_lake/pending/<id>.requested.json`,
the Hudi way): scheduling writes it, executing completes it. Its JSON form is versioned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.clustering.layout import Layout

PLAN_FORMAT = 1
SCHEDULE_OPERATION = "schedule_clustering"
EXECUTE_OPERATION = "execute_clustering"


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
    def from_dict(cls, raw: Mapping[str, Any]) -> PlanGroup:
        """Inverse of `to_dict`."""
        return cls(dict(raw["partition"]), tuple(raw["files"]), int(raw["bytes"]), int(raw["rows"]),
                   int(raw["output_files"]), tuple(int(b) for b in raw.get("buckets") or ()))


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
    def from_dict(cls, raw: Mapping[str, Any]) -> ClusteringPlan:
        """Inverse of `to_dict`."""
        if int(raw.get("format", 0)) != PLAN_FORMAT:
            raise ValueError(f"clustering plan format {raw.get('format')!r} is not {PLAN_FORMAT}")
        return cls(tuple(PlanGroup.from_dict(g) for g in raw["groups"]), Layout.from_dict(raw["layout"]),
                   int(raw["base_seq"]), dict(raw.get("strategy") or {}))

    def summary(self) -> dict[str, Any]:
        """Numbers for XCom and the CLI."""
        return {"groups": len(self.groups), "input_files": len(self.files), "input_bytes": self.input_bytes,
                "output_files": self.output_files, "partitions": len({tuple(sorted(g.partition.items()))
                                                                      for g in self.groups}),
                "layout": self.layout.describe()}
