"""Schema evolution as pure spec transforms: add, widen, drop and rename columns, set and unset properties.

Nothing here touches a file. Data files keep the columns, names and types they were written with; the spec
says how to read them (`Column.physical`):

- add: a nullable column; files written before it lack it and read NULL. Its physical name is its name
  unless a column (live or dropped) already used that name in the files, then `<name>__2`, `__3`, ...
- widen: a wider type that Spark's Parquet readers apply to old files themselves (`types.widening_problem`).
- drop: the column leaves the spec; its physical name is retired (its data stays in old files, never read).
- rename: the name changes, the physical name stays.

Columns that place rows (partition columns, bucket columns: the directory and the bucket of every row were
derived from them) and the columns a primary-key table merges by are protected: a change that would move
rows or break the table is refused naming the column and why (`LakeSpecError`), before anything is committed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.reserved import check_column_name
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import (
    DEFAULT_PROPERTIES,
    USER_PROPERTY_PREFIX,
    BucketSpec,
    Column,
    TableSpec,
    check_identifier,
    check_property,
)
from airflow_lake.lake.spec.types import normalize_type, widening_problem

KINDS = ("add", "widen", "drop", "rename", "set_properties", "unset_properties")
# Where schema_evolution is a write's or an upsert's option: "add_columns" adds the source's new columns.
SCHEMA_EVOLUTION_MODES = ("none", "add_columns")
ADD_COLUMNS = "add_columns"


@dataclass(frozen=True)
class Change:
    """One change of an `alter_table` spec (`where` names it in errors, e.g. `changes[2]`)."""

    kind: str
    column: str = ""
    type: str = ""
    after: str | None = None
    first: bool = False
    to: str = ""
    merge_operator: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    where: str = "changes"

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as given (recorded in the commit)."""
        if self.kind == "set_properties":
            return {"set_properties": dict(self.properties)}
        if self.kind == "unset_properties":
            return {"unset_properties": list(self.keys)}
        out: dict[str, Any] = {self.kind: self.column}
        if self.kind in ("add", "widen"):
            out["type"] = self.type
        if self.after is not None:
            out["after"] = self.after
        if self.first:
            out["first"] = True
        if self.to:
            out["to"] = self.to
        if self.merge_operator is not None:
            out["merge_operator"] = self.merge_operator
        return out

    def describe(self) -> str:
        """One line for logs and errors."""
        if self.kind == "set_properties":
            return "SET " + ", ".join(f"{k}={v}" for k, v in self.properties.items())
        if self.kind == "unset_properties":
            return "UNSET " + ", ".join(self.keys)
        text = f"{self.kind.upper()} {self.column}"
        if self.kind in ("add", "widen"):
            text += f" {self.type.upper()}"
        if self.first:
            text += " FIRST"
        elif self.after is not None:
            text += f" AFTER {self.after}"
        return text + (f" TO {self.to}" if self.to else "")


@dataclass(frozen=True)
class Protected:
    """Why a column must stay as it is, and which kinds of change that refuses (a plain reason refuses all)."""

    reason: str
    kinds: frozenset[str] = frozenset({"drop", "rename", "widen"})


def parse_changes(raw: Any, field_name: str = "changes") -> list[Change]:
    """Read the `changes` list strictly: a non-empty list of objects, each with exactly one kind key."""
    if raw is None or isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        raise LakeSpecError(field_name, f"expected a list of changes, got {raw!r}.",
                            'Give e.g. [{"add": "c2", "type": "bigint"}, {"rename": "a", "to": "b"}].')
    if not raw:
        raise LakeSpecError(field_name, "the list of changes is empty: an alter_table changes something.",
                            'List at least one change, e.g. {"add": "c2", "type": "bigint"}.')
    return [_parse_change(item, f"{field_name}[{i}]") for i, item in enumerate(raw)]


def _parse_change(raw: Any, where: str) -> Change:
    if not isinstance(raw, Mapping):
        raise LakeSpecError(where, f"expected an object, got {raw!r}.", 'Give e.g. {"drop": "c"}.')
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        problem = "names no change" if not kinds else f"names {len(kinds)} changes ({', '.join(kinds)})"
        raise LakeSpecError(where, f"the change {problem}.", f"Give exactly one of {', '.join(KINDS)} per change.")
    kind = kinds[0]
    reader = SpecReader(raw, "alter_table", where)
    if kind == "set_properties":
        properties = reader.string_map(kind, numbers=True) or {}
        if not properties:
            raise LakeSpecError(f"{where}.{kind}", "no property to set.", 'Give e.g. {"clean.retain.hours": "24"}.')
        for key, value in properties.items():
            try:
                check_property(key, value)
            except LakeSpecError as err:
                raise LakeSpecError(f"{where}.set_properties.{key}", err.problem, err.fix) from err
        reader.done()
        return Change(kind, properties=properties, where=where)
    if kind == "unset_properties":
        keys = reader.strings(kind, single=True) or []
        if not keys:
            raise LakeSpecError(f"{where}.{kind}", "no property to unset.", 'Give e.g. ["clean.retain.hours"].')
        reader.done()
        return Change(kind, keys=tuple(keys), where=where)
    column = check_identifier(reader.required(kind), f"{where}.{kind}")
    if kind == "add":
        type_name = normalize_type(reader.required("type"), f"{where}.type")
        after = reader.string("after")
        first = reader.boolean("first", default=False)
        if after is not None and first:
            raise LakeSpecError(f"{where}.first", "give `after` or `first`, not both.", "Drop one.")
        if not reader.boolean("nullable", default=True):
            raise LakeSpecError(f"{where}.nullable", "an added column cannot be NOT NULL: the rows already in the "
                                "table have no value for it.", "Add it nullable (leave `nullable` out).")
        merge_operator = reader.string("merge_operator")
        reader.done()
        return Change(kind, column, type_name, after, first, merge_operator=merge_operator, where=where)
    if kind == "widen":
        type_name = normalize_type(reader.required("type"), f"{where}.type")
        reader.done()
        return Change(kind, column, type_name, where=where)
    if kind == "rename":
        to = check_identifier(reader.required("to"), f"{where}.to")
        reader.done()
        return Change(kind, column, to=to, where=where)
    reader.done()
    return Change(kind, column, where=where)


def fresh_physical(spec: TableSpec, name: str, taken: Iterable[str] = ()) -> str:
    """A physical name for a new column `name`: the name itself unless a live or dropped column (or `taken`)
    used it in the files, then `<name>__2`, `<name>__3`, ..."""
    used = {c.physical.lower() for c in spec.columns} | {n.lower() for n in (*spec.retired_physical, *taken)}
    candidate, n = name, 1
    while candidate.lower() in used:
        n += 1
        candidate = f"{name}__{n}"
    return candidate


def apply_changes(spec: TableSpec, changes: Sequence[Change], *,
                  protected: Mapping[str, str | Protected] | None = None) -> TableSpec:
    """The spec after `changes`, in order; each is checked against the spec the ones before it made.

    `protected` maps columns to why they must stay as they are beyond what the spec itself knows (the bucketing
    of live files, a pending clustering plan that sorts by them): a reason (no drop, rename or widening) or a
    `Protected` naming the kinds of change it refuses.
    """
    if not changes:
        raise LakeSpecError("changes", "the list of changes is empty.", "List at least one change.")
    out = spec
    for change in changes:
        out = apply_change(out, change, protected=protected)
    return out


def apply_change(spec: TableSpec, change: Change, *,
                 protected: Mapping[str, str | Protected] | None = None) -> TableSpec:
    """The spec after one change (see `apply_changes`)."""
    if change.kind == "set_properties":
        return _rebuild(spec, change.where, properties={**spec.properties, **change.properties})
    if change.kind == "unset_properties":
        properties = dict(spec.properties)
        for key in change.keys:
            if key not in properties:
                known = key in DEFAULT_PROPERTIES or key.startswith(USER_PROPERTY_PREFIX)
                problem = f"property {key!r} is not set on the table" if known else f"unknown property {key!r}"
                set_now = ", ".join(sorted(properties)) or "none"
                raise LakeSpecError(f"{change.where}.unset_properties", f"{problem}; nothing to unset.",
                                    f"Unset one of the properties set now ({set_now}).")
            del properties[key]
        return _rebuild(spec, change.where, properties=properties)
    if change.kind == "add":
        return _add(spec, change)
    where = f"{change.where}.{change.kind}"
    if not spec.has_column(change.column):
        raise LakeSpecError(where, f"unknown column {change.column!r}.",
                            f"Use one of the table's columns: {', '.join(spec.column_names)}.")
    name = spec.column(change.column).name
    guard = (protected or {}).get(name)
    guard = Protected(guard) if isinstance(guard, str) else guard
    reason = guard.reason if guard is not None and change.kind in guard.kinds else None
    if change.kind == "widen":
        return _widen(spec, change, name, where, reason)
    if change.kind == "drop":
        return _drop(spec, change, name, where, reason)
    return _rename(spec, change, name, where, reason)


def add_columns(spec: TableSpec, columns: Sequence[Column], *, merge_operators: Mapping[str, str] | None = None,
                where: str = "schema_evolution") -> TableSpec:
    """The spec with nullable `columns` added at the end, in order (schema evolution of a write or upsert)."""
    out = spec
    for column in columns:
        operator = (merge_operators or {}).get(column.name)
        out = _add(out, Change("add", column.name, column.type, merge_operator=operator, where=where))
    return out


def _add(spec: TableSpec, change: Change) -> TableSpec:
    where = change.where
    check_column_name(change.column, f"{where}.add")
    if spec.has_column(change.column):
        raise LakeSpecError(f"{where}.add", f"the table already has a column {spec.column(change.column).name!r} "
                            "(names are case-insensitive).", "Add a column under another name, or widen this one.")
    column = Column(change.column, change.type, True, fresh_physical(spec, change.column))
    columns = list(spec.columns)
    if change.first:
        columns.insert(0, column)
    elif change.after is not None:
        if not spec.has_column(change.after):
            raise LakeSpecError(f"{where}.after", f"unknown column {change.after!r}.",
                                f"Use one of the table's columns: {', '.join(spec.column_names)}.")
        columns.insert(spec.column_names.index(spec.column(change.after).name) + 1, column)
    else:
        columns.append(column)
    merge_operators = dict(spec.merge_operators)
    if change.merge_operator is not None:
        if not spec.primary_key:
            raise LakeSpecError(f"{where}.merge_operator", "the table has no primary key: nothing is merged.",
                                "Leave `merge_operator` out.")
        merge_operators[change.column] = change.merge_operator
    return _rebuild(spec, where, columns=tuple(columns), merge_operators=merge_operators)


def _widen(spec: TableSpec, change: Change, name: str, where: str, reason: str | None) -> TableSpec:
    old = spec.column(name).type
    problem = widening_problem(old, change.type)
    if problem is not None:
        raise LakeSpecError(f"{change.where}.type", f"column {name!r} cannot become {change.type}: {problem}.",
                            _widen_fix(old, change.type))
    if name in bucket_columns(spec):
        raise LakeSpecError(where, f"column {name!r} is a bucket column: a row's bucket is the hash of its value, "
                            f"and {old} and {change.type} values hash differently, so rows would move.",
                            "Keep its type (or rewrite the table into a new one with the wider type).")
    if reason is not None:
        raise LakeSpecError(where, f"column {name!r} cannot be widened: {reason}.", "Keep its type.")
    if name in spec.partition_columns and change.type not in ("smallint", "int", "bigint"):
        raise LakeSpecError(where, f"column {name!r} is a partition column: its values live in directory names, "
                            f"which a {change.type} could not be read from.",
                            "Widen a partition column only to a wider integer.")
    if name == spec.version_column and change.type not in ("smallint", "int", "bigint"):
        raise LakeSpecError(where, f"column {name!r} is the version column: versions are whole numbers.",
                            "Widen it to a wider integer only.")
    columns = tuple(dataclasses.replace(c, type=change.type) if c.name == name else c for c in spec.columns)
    return _rebuild(spec, change.where, columns=columns)


def _widen_fix(old: str, new: str) -> str:
    if old == "date" and new == "timestamp":
        return ("Widen it to timestamp_ntz (read as midnight without a time zone), or add a new timestamp "
                "column and fill it from this one.")
    return ("Allowed: a wider integer (tinyint < smallint < int < bigint), an integer or float to double, a "
            "decimal(p,s) with no fewer digits before and after the point, date to timestamp_ntz.")


def _drop(spec: TableSpec, change: Change, name: str, where: str, reason: str | None) -> TableSpec:
    role = _role(spec, name)
    if role is not None:
        raise LakeSpecError(where, f"column {name!r} cannot be dropped: it is {role}.", _keep_fix(role))
    if reason is not None:
        raise LakeSpecError(where, f"column {name!r} cannot be dropped: {reason}.", "Keep it for now.")
    column = spec.column(name)
    columns = tuple(c for c in spec.columns if c.name != name)
    if not columns or len(columns) <= len(spec.partition_columns):
        raise LakeSpecError(where, f"column {name!r} is the table's last data column.", "Keep at least one.")
    return _rebuild(spec, change.where, columns=columns,
                    merge_operators={k: v for k, v in spec.merge_operators.items() if k != name},
                    null_values={k: v for k, v in spec.null_values.items() if k != name},
                    retired_physical=(*spec.retired_physical, column.physical))


def _rename(spec: TableSpec, change: Change, name: str, where: str, reason: str | None) -> TableSpec:
    to = change.to
    if to == name:
        raise LakeSpecError(f"{change.where}.to", f"column {name!r} already has that name.", "Give a new name.")
    check_column_name(to, f"{change.where}.to")
    if to.lower() != name.lower() and spec.has_column(to):
        raise LakeSpecError(f"{change.where}.to", f"the table already has a column {spec.column(to).name!r} "
                            "(names are case-insensitive).", "Rename it to a name no column has.")
    if name in spec.partition_columns:
        raise LakeSpecError(where, f"column {name!r} is a partition column: the table's directories are named "
                            f"{name}=<value>, so renaming it would mean moving every file.",
                            "Keep its name (or rewrite the table into a new one partitioned by the new name).")
    if name in bucket_columns(spec):
        raise LakeSpecError(where, f"column {name!r} is a bucket column: the buckets of the table's files are "
                            "recorded by column name.", "Keep its name.")
    if reason is not None:
        raise LakeSpecError(where, f"column {name!r} cannot be renamed: {reason}.", "Keep its name for now.")

    def follow(n: str) -> str:
        return to if n == name else n

    columns = tuple(dataclasses.replace(c, name=to) if c.name == name else c for c in spec.columns)
    bucket = spec.bucket
    if bucket is not None:
        bucket = BucketSpec(bucket.columns, bucket.count, tuple(map(follow, bucket.sort_columns)), bucket.hash,
                            bucket.from_partition, bucket.partition_counts)
    return _rebuild(spec, change.where, columns=columns, bucket=bucket,
                    primary_key=tuple(map(follow, spec.primary_key)),
                    version_column=None if spec.version_column is None else follow(spec.version_column),
                    merge_operators={follow(k): v for k, v in spec.merge_operators.items()},
                    null_values={follow(k): v for k, v in spec.null_values.items()})


def bucket_columns(spec: TableSpec) -> set[str]:
    """The columns the table's buckets hash."""
    return set(spec.bucket.columns) if spec.bucket is not None else set()


def _role(spec: TableSpec, name: str) -> str | None:
    """What makes a column impossible to drop (None: nothing)."""
    if name in spec.partition_columns:
        return "a partition column (the table's directories are named by it)"
    if name in bucket_columns(spec):
        return "a bucket column (every row's bucket was computed from it)"
    if name in spec.primary_key:
        return "a primary-key column (upserts match rows by it)"
    if name == spec.version_column:
        return "the version column (upserts take their version from it)"
    if spec.bucket is not None and name in spec.bucket.sort_columns:
        return "a bucket sort column (every bucket file is sorted by it)"
    return None


def _keep_fix(role: str) -> str:
    if role.startswith("a bucket sort column"):
        return "Keep it, or rewrite the buckets without it first (bucket_rewrite with other sort_columns)."
    return "Keep it; to lose it, write the data into a new table without it."


def _rebuild(spec: TableSpec, where: str, **changes: Any) -> TableSpec:
    """`spec` with `changes`, validated as a whole; a problem is reported at the change that caused it."""
    try:
        return dataclasses.replace(spec, **changes)
    except LakeSpecError as err:
        raise LakeSpecError(f"{where} ({err.field})", err.problem, err.fix) from err


def added_columns(old: TableSpec, new: TableSpec) -> list[str]:
    """Columns of `new` that `old` lacks."""
    return [c.name for c in new.columns if not old.has_column(c.name)]


def check_schema_evolution(value: Any, field_name: str = "schema_evolution") -> str:
    """The schema evolution mode of a write or upsert spec ("none" when left out)."""
    if value is None:
        return "none"
    if not isinstance(value, str) or value not in SCHEMA_EVOLUTION_MODES:
        raise LakeSpecError(field_name, f"{value!r} is not a schema evolution mode.",
                            f'Use "{ADD_COLUMNS}" (add the source\'s new columns to the table) or leave it out.')
    return value


__all__ = ["ADD_COLUMNS", "KINDS", "SCHEMA_EVOLUTION_MODES", "Change", "Protected", "add_columns", "added_columns",
           "apply_change", "apply_changes", "bucket_columns", "check_schema_evolution", "fresh_physical",
           "parse_changes"]
