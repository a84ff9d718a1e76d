"""What differs between two table specs, field by field, in words people read in an error or a task log.

`spec_diff(old, new)` lists what would turn `old` into `new`: columns added, removed, renamed (matched by their
physical name, which a rename keeps), retyped or made (not) nullable, their order; partitioning; the bucket
spec (columns, count, sort columns, hash, first bucketed partition, per-partition counts); the primary key, the
version column, merge operators, null values; properties set, unset or changed.

It compares specs as their users see them: where a column's data lives in the files (`Column.physical`, the
names of dropped columns) is the table's own business, so `same_spec` ignores it and `spec_diff` of two specs
that differ only there is empty. A user cannot even give those names: a schema in a DAG has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_lake.lake.spec.table_spec import BucketSpec, Column, TableSpec


@dataclass(frozen=True)
class SpecDifference:
    """One difference: the spec field it is in (`columns`, `bucket.count`, `properties.k`...) and what changed."""

    field: str
    change: str

    def __str__(self) -> str:
        return f"{self.field}: {self.change}"


def same_spec(one: TableSpec, other: TableSpec) -> bool:
    """Whether two specs describe the same table to its users (equal but for physical column names)."""
    return _logical(one) == _logical(other)


def _logical(spec: TableSpec) -> dict[str, Any]:
    out = spec.to_dict()
    out["columns"] = [{k: v for k, v in c.items() if k != "physical"} for c in out["columns"]]
    out.pop("retired_physical", None)
    return out


def spec_diff(old: TableSpec, new: TableSpec) -> list[SpecDifference]:
    """The differences from `old` to `new`, in the order of the spec's fields (empty: equal specs)."""
    out = _columns(old.columns, new.columns)
    out += _listed("partition_by", old.partition_columns, new.partition_columns)
    out += _bucket(old.bucket, new.bucket)
    out += _listed("primary_key", old.primary_key, new.primary_key)
    if old.version_column != new.version_column:
        out.append(SpecDifference("version_column", f"{_text(old.version_column)} -> {_text(new.version_column)}"))
    out += _mapping("merge_operators", old.merge_operators, new.merge_operators)
    out += _mapping("null_values", {k: list(v) for k, v in old.null_values.items()},
                    {k: list(v) for k, v in new.null_values.items()})
    out += _mapping("properties", old.properties, new.properties)
    return out


def describe(differences: Sequence[SpecDifference]) -> str:
    """The differences on one line ("; " between them), for an error message or a log line."""
    return "; ".join(str(d) for d in differences) if differences else "no difference"


def _column_text(column: Column) -> str:
    return f"`{column.name}` {column.type}{'' if column.nullable else ' NOT NULL'}"


def _columns(old: Sequence[Column], new: Sequence[Column]) -> list[SpecDifference]:
    out: list[SpecDifference] = []
    old_by_name = {c.name.lower(): c for c in old}
    new_by_name = {c.name.lower(): c for c in new}
    gone = [c for c in old if c.name.lower() not in new_by_name]
    came = [c for c in new if c.name.lower() not in old_by_name]
    # a rename keeps the column's physical name (its name in the data files): that is how it is recognised
    came_by_physical = {c.physical.lower(): c for c in came}
    renamed = {c.name: came_by_physical[c.physical.lower()] for c in gone if c.physical.lower() in came_by_physical}
    for column in gone:
        if column.name in renamed:
            out.append(SpecDifference("columns", f"renamed `{column.name}` -> `{renamed[column.name].name}`"))
        else:
            out.append(SpecDifference("columns", f"removed {_column_text(column)}"))
    taken = {c.name for c in renamed.values()}
    out += [SpecDifference("columns", f"added {_column_text(c)}") for c in came if c.name not in taken]
    for column in old:
        after = new_by_name.get(column.name.lower()) or renamed.get(column.name)
        if after is None:
            continue
        if after.type != column.type:
            out.append(SpecDifference("columns", f"`{after.name}` type {column.type} -> {after.type}"))
        if after.nullable != column.nullable:
            out.append(SpecDifference("columns", f"`{after.name}` {'nullable' if column.nullable else 'NOT NULL'} -> "
                                      f"{'nullable' if after.nullable else 'NOT NULL'}"))
    kept_old = [renamed[c.name].name if c.name in renamed else c.name for c in old
                if c.name.lower() in new_by_name or c.name in renamed]
    kept_new = [c.name for c in new if c.name.lower() in old_by_name or c.name in taken]
    if [n.lower() for n in kept_old] != [n.lower() for n in kept_new]:
        out.append(SpecDifference("columns", f"order {', '.join(kept_old)} -> {', '.join(kept_new)}"))
    return out


def _bucket(old: BucketSpec | None, new: BucketSpec | None) -> list[SpecDifference]:
    if old is None and new is None:
        return []
    if old is None or new is None:
        return [SpecDifference("bucket", f"{_bucket_text(old)} -> {_bucket_text(new)}")]
    out = _listed("bucket.columns", old.columns, new.columns)
    if old.count != new.count:
        out.append(SpecDifference("bucket.count", f"{old.count} -> {new.count}"))
    out += _listed("bucket.sort_columns", old.sort_columns, new.sort_columns)
    if old.hash != new.hash:
        out.append(SpecDifference("bucket.hash", f"{old.hash} -> {new.hash}"))
    if old.from_partition != new.from_partition:
        out.append(SpecDifference("bucket.from_partition", f"{_text(old.from_partition)} -> "
                                  f"{_text(new.from_partition)}"))
    old_counts = {_partition_text(p.partition): p.count for p in old.partition_counts}
    new_counts = {_partition_text(p.partition): p.count for p in new.partition_counts}
    out += _mapping("bucket.partition_counts", old_counts, new_counts)
    return out


def _bucket_text(bucket: BucketSpec | None) -> str:
    if bucket is None:
        return "none (plain files)"
    start = f" from partition {_partition_text(bucket.from_partition)}" if bucket.from_partition is not None else ""
    return f"{bucket.count} buckets on {', '.join(bucket.columns)}{start}"


def _partition_text(partition: Mapping[str, str | None] | None) -> str:
    return "none" if partition is None else "/".join(f"{k}={v}" for k, v in partition.items())


def _listed(name: str, old: Sequence[str], new: Sequence[str]) -> list[SpecDifference]:
    if list(old) == list(new):
        return []
    return [SpecDifference(name, f"[{', '.join(old)}] -> [{', '.join(new)}]")]


def _mapping(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[SpecDifference]:
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            out.append(SpecDifference(f"{name}.{key}", f"{_text(old[key])} -> unset"))
        elif key not in old:
            out.append(SpecDifference(f"{name}.{key}", f"unset -> {_text(new[key])}"))
        elif old[key] != new[key]:
            out.append(SpecDifference(f"{name}.{key}", f"{_text(old[key])} -> {_text(new[key])}"))
    return out


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return _partition_text(value)
    return str(value)
