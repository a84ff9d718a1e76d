"""Reading JSON specs strictly, at every depth, with errors that name the field path and the fix.

One reader serves the table spec and every operation spec (and their nested objects): a field is
missing or `null` (the default applies), or it has exactly the expected type; an empty string, a
string where a number or boolean belongs, a non-finite number and an unknown key are errors.
Nested objects and lists of objects are read by child readers whose field names carry the path,
e.g. `bucket.sort_columns` or `columns[2].nullable`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_lake.lake.errors import LakeSpecError

# Numbers in specs are read as floats: larger whole numbers would silently lose digits (2**53 + 1 reads as 2**53).
MAX_EXACT_INT = 2**53


# No spec nests this deep (a filter is 3 levels, a clustering plan's layout 4): deeper is an attack or a bug, refused
# before code that walks a value recursively (repr, json.dumps, fingerprints) meets a RecursionError.
MAX_DEPTH = 32


def check_depth(value: Any, field: str, limit: int = MAX_DEPTH) -> None:
    """Refuse a value of lists and objects nested more than `limit` levels deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            children = item
        else:
            continue
        if depth > limit:
            raise LakeSpecError(field, f"the value is nested more than {limit} levels deep.",
                                "Give a flat value: lists and objects nest only as the field describes (e.g. a filter "
                                "is [column, op, value], its value one value or a flat list).")
        stack.extend((child, depth + 1) for child in children)


class SpecReader:
    """Typed access to a JSON object; `done()` rejects fields nobody read (typos fail loudly)."""

    def __init__(self, raw: Any, operation: str, path: str = "", *, noun: str = "operation") -> None:
        """Read `raw`, the spec of `operation` (a "table spec" with noun="spec"), or its field at `path`."""
        if not isinstance(raw, Mapping):
            where = path or "spec"
            problem = "expected an object" if path else f"the {operation} spec must be an object"
            raise LakeSpecError(where, f"{problem}, got {type(raw).__name__}.",
                                'Pass a JSON object such as {"table": "/lake/t"}.' if not path
                                else f"Give `{path}` as an object.")
        self.raw = raw
        self.operation = operation
        self.path = path
        self.noun = noun
        self.what = f"the {operation} {noun}"
        self._seen: set[str] = set()

    def field(self, key: str) -> str:
        """The full path of `key`, as error messages name it."""
        return f"{self.path}.{key}" if self.path else key

    def _get(self, key: str) -> Any:
        self._seen.add(key)
        return self.raw.get(key)

    def has(self, key: str) -> bool:
        """True if the field is present and not null."""
        self._seen.add(key)
        return self.raw.get(key) is not None

    def string(self, key: str, *, required: bool = False, default: str | None = None) -> str | None:
        """A string field; an empty string is an error (only a missing field or null means the default)."""
        value = self._get(key)
        name = self.field(key)
        if value is None or (required and value == ""):
            if required:
                raise LakeSpecError(name, f"{self.what} needs `{name}`.", f"Set `{name}`.")
            return default
        if not isinstance(value, str):
            raise LakeSpecError(name, f"expected a string, got {value!r}.", f"Give `{name}` as a string.")
        if not value.strip():
            raise LakeSpecError(name, f"{value!r} is empty.", f"Give a value, or leave `{name}` out (or null).")
        return value

    def required(self, key: str) -> str:
        """A required string field."""
        value = self.string(key, required=True)
        assert value is not None
        return value

    def choice(self, key: str, options: Iterable[str], default: str) -> str:
        """A string field limited to `options`; missing or null means `default`."""
        allowed = list(options)
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str) or value not in allowed:
            raise LakeSpecError(self.field(key), f"{value!r} is not allowed.",
                                f"Use one of {', '.join(allowed)} (or leave it out for {default!r}).")
        return value

    def number(self, key: str, *, default: float | None = None, minimum: float = 0.0) -> float | None:
        """A finite number field >= minimum."""
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT:
            # a float would round it (or overflow: a 401-digit number), so no count or size here means it
            raise LakeSpecError(self.field(key), f"{_short(value)} is too large.",
                                f"Give `{self.field(key)}` as a number below {MAX_EXACT_INT + 1:,}.")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or value < minimum:
            raise LakeSpecError(self.field(key), f"{value!r} is not a finite number >= {minimum:g}.",
                                f"Give `{self.field(key)}` as a number.")
        return float(value)

    def boolean(self, key: str, *, default: bool) -> bool:
        """A JSON boolean field (no strings such as "false")."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise LakeSpecError(self.field(key), f"expected true or false, got {value!r}.",
                                f"Give `{self.field(key)}` as a JSON boolean (true/false, not a string).")
        return value

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        """An object field whose keys the caller checks (e.g. a map of column names)."""
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise LakeSpecError(self.field(key), f"expected an object, got {value!r}.",
                                f"Give `{self.field(key)}` as an object.")
        return value

    def string_map(self, key: str, *, numbers: bool = False) -> dict[str, str] | None:
        """An object of string values (`numbers`: finite numbers allowed too, kept as text)."""
        value = self.mapping(key)
        if value is None:
            return None
        out: dict[str, str] = {}
        for name, item in value.items():
            where = f"{self.field(key)}.{name}"
            if numbers and isinstance(item, int | float) and not isinstance(item, bool) and math.isfinite(item):
                out[str(name)] = str(item)
            elif isinstance(item, str) and item.strip():
                out[str(name)] = item
            else:
                raise LakeSpecError(where, f"expected a {'number or ' if numbers else ''}non-empty string, "
                                    f"got {item!r}.", f"Give `{where}` as a string.")
        return out

    def obj(self, key: str) -> SpecReader | None:
        """A nested object, read strictly by a child reader (call its `done()`)."""
        value = self._get(key)
        if value is None:
            return None
        return SpecReader(value, self.operation, self.field(key), noun=self.noun)

    def objects(self, key: str) -> list[Any] | None:
        """A list field whose items the caller reads (e.g. with `item()`)."""
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, list):
            raise LakeSpecError(self.field(key), f"expected a list, got {value!r}.",
                                f"Give `{self.field(key)}` as a list.")
        return list(value)

    def item(self, key: str, index: int, value: Any) -> SpecReader:
        """A child reader for item `index` of the list field `key`."""
        return SpecReader(value, self.operation, f"{self.field(key)}[{index}]", noun=self.noun)

    def strings(self, key: str, *, single: bool = False) -> list[str] | None:
        """A list-of-strings field (`single`: one string stands for a list of one)."""
        value = self._get(key)
        if value is None:
            return None
        if single and isinstance(value, str):
            value = [value]
        if isinstance(value, str) or not isinstance(value, list):
            raise LakeSpecError(self.field(key), f"expected a list of strings, got {value!r}.",
                                f"Give `{self.field(key)}` as a list.")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise LakeSpecError(f"{self.field(key)}[{i}]", f"expected a non-empty string, got {item!r}.",
                                    "Give a column name as a string.")
        return list(value)

    def raw_value(self, key: str) -> Any:
        """A field of any shape (the caller validates it)."""
        return self._get(key)

    def done(self) -> None:
        """Reject fields that no reader asked for."""
        unknown = sorted(set(self.raw) - self._seen, key=str)
        if unknown:
            where = self.what if not self.path else f"`{self.path}` in {self.what}"
            raise LakeSpecError(self.field(str(unknown[0])), f"unknown field for {where}.",
                                f"Use only {', '.join(sorted(self._seen))}.")


def _short(value: Any) -> str:
    """A value for a message: a 401-digit number is shown by its length, not printed whole."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:12]}... ({len(text)} digits)"


class _DuplicateKeys(dict[str, Any]):
    """A JSON object that named a key twice (the key is kept to name it in the error)."""

    duplicate: str = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            marked = _DuplicateKeys(pairs)
            marked.duplicate = key
            return marked
        out[key] = value
    return out


def _first_duplicate(value: Any, path: str) -> str | None:
    """The path of the first key given twice in a parsed document, depth first."""
    if isinstance(value, _DuplicateKeys):
        return f"{path}.{value.duplicate}" if path else value.duplicate
    if isinstance(value, dict):
        for key, item in value.items():
            found = _first_duplicate(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _first_duplicate(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def loads_spec(text: str | bytes) -> Any:
    """Parse a JSON spec strictly: a key given twice in one object is an error naming its path (plain
    `json.loads` keeps the last value in silence, so `{"mode": "append", "mode": "overwrite"}` would
    overwrite). Other JSON errors are raised as `json.JSONDecodeError`."""
    document = json.loads(text, object_pairs_hook=_object)
    where = _first_duplicate(document, "")
    if where is not None:
        raise LakeSpecError(where, "the key is given twice in the JSON spec; only one value can be meant.",
                            f"Give `{where}` once.")
    return document
