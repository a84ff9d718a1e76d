"""Reading operation specs field by field, with errors that name the field and the fix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_lake.lake.errors import LakeSpecError


class SpecReader:
    """Typed access to a JSON spec; `done()` rejects fields nobody read (typos fail loudly)."""

    def __init__(self, raw: Any, operation: str) -> None:
        if not isinstance(raw, Mapping):
            raise LakeSpecError("spec", f"the {operation} spec must be an object, got {type(raw).__name__}.",
                                'Pass a JSON object such as {"table": "/lake/t"}.')
        self.raw = raw
        self.operation = operation
        self._seen: set[str] = set()

    def _get(self, key: str) -> Any:
        self._seen.add(key)
        return self.raw.get(key)

    def has(self, key: str) -> bool:
        """True if the field is present and not null."""
        self._seen.add(key)
        return self.raw.get(key) is not None

    def string(self, key: str, *, required: bool = False, default: str | None = None) -> str | None:
        """A string field."""
        value = self._get(key)
        if value is None or value == "":
            if required:
                raise LakeSpecError(key, f"the {self.operation} operation needs `{key}`.", f"Set `{key}`.")
            return default
        if not isinstance(value, str):
            raise LakeSpecError(key, f"expected a string, got {value!r}.", f"Give `{key}` as a string.")
        return value

    def required(self, key: str) -> str:
        """A required string field."""
        value = self.string(key, required=True)
        assert value is not None
        return value

    def choice(self, key: str, options: Iterable[str], default: str) -> str:
        """A string field limited to `options`."""
        allowed = list(options)
        value = self.string(key, default=default)
        assert value is not None
        if value not in allowed:
            raise LakeSpecError(key, f"{value!r} is not allowed.", f"Use one of {', '.join(allowed)}.")
        return value

    def number(self, key: str, *, default: float | None = None, minimum: float = 0.0) -> float | None:
        """A number field >= minimum."""
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise LakeSpecError(key, f"{value!r} is not a number >= {minimum:g}.", f"Give `{key}` as a number.")
        return float(value)

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        """An object field."""
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise LakeSpecError(key, f"expected an object, got {value!r}.", f"Give `{key}` as an object.")
        return value

    def strings(self, key: str) -> list[str] | None:
        """A list-of-strings field."""
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise LakeSpecError(key, f"expected a list of strings, got {value!r}.", f"Give `{key}` as a list.")
        return list(value)

    def raw_value(self, key: str) -> Any:
        """A field of any shape (the caller validates it)."""
        return self._get(key)

    def done(self) -> None:
        """Reject fields that no reader asked for."""
        unknown = sorted(set(self.raw) - self._seen)
        if unknown:
            raise LakeSpecError(unknown[0], f"unknown field for the {self.operation} operation.",
                                f"Use only {', '.join(sorted(self._seen))}.")
