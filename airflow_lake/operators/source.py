"""`SourceMixin`: the source arguments shared by operators that read files or a query (write, upsert)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

INCREMENTAL_KEYS = ("view", "table", "from")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # (the spec's IDENTIFIER, without importing the lake core)


class SourceMixin:
    """Either `source_path` (+ `source_format`, `source_options`) or `query` (+ `tables`, view name -> lake
    table path, and `incremental`, the upstreams whose changes the query reads); all templated except the
    format."""

    source_fields: ClassVar[tuple[str, ...]] = ("source_path", "source_options", "query", "tables", "incremental")
    source_renderers: ClassVar[dict[str, str]] = {"query": "sql", "tables": "json", "incremental": "json"}

    def init_source(self, source_path: str | None, source_format: str, source_options: Mapping[str, str] | None,
                    query: str | None, tables: Mapping[str, Any] | None, *,
                    incremental: Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | None = None) -> None:
        """Check and keep the source arguments (`incremental`: a dict or a list of dicts, see `check_incremental`)."""
        if (source_path is None) == (query is None):
            raise ValueError(f"give exactly one of source_path and query (got source_path={source_path!r}, "
                             f"query={query!r})")
        if incremental is not None and query is None:
            raise ValueError(f"incremental needs a query over its views (got source_path={source_path!r}, "
                             f"incremental={incremental!r})")
        self.source_path = source_path
        self.source_format = source_format
        self.source_options = dict(source_options or {})
        self.query = query
        self.tables = dict(tables or {})
        self.incremental = check_incremental(incremental, self.tables)

    def source_spec(self) -> dict[str, Any]:
        """The `source` field of the operation's spec, from the rendered fields."""
        if self.query is not None:
            upstreams = incremental_list(self.incremental)
            return {"query": self.query, "tables": self.tables,
                    **({"incremental": upstreams} if upstreams is not None else {})}
        return {"path": self.source_path, "format": self.source_format, "options": self.source_options}


def check_incremental(value: Any, tables: Mapping[str, Any] | str) -> Any:
    """`incremental` as the operator keeps it: `{"view": ..., "table": ..., "from": ...}` or a list of them, or a
    template (a string holding "{{", or a list or dict with templated values); what can be checked before
    rendering is checked here (ValueError quoting the value): the keys, the view names, clashes with `tables`."""
    if value is None or (isinstance(value, str) and "{{" in value):
        return value
    items = [value] if isinstance(value, Mapping) else value
    if isinstance(items, str) or not isinstance(items, Sequence) or not items:
        raise ValueError(f"incremental must be a dict {{'view': ..., 'table': ...}} or a non-empty list of them, "
                         f"got {value!r}")
    views: set[str] = {str(v).lower() for v in tables} if isinstance(tables, Mapping) else set()
    for item in items:
        if not isinstance(item, Mapping):
            raise ValueError(f"incremental items must be dicts {{'view': ..., 'table': ...}}, got {item!r}")
        unknown = sorted(str(k) for k in item if k not in INCREMENTAL_KEYS)
        missing = [k for k in ("view", "table") if not item.get(k)]
        if unknown or missing:
            problem = f"unknown key {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
            raise ValueError(f"incremental item {item!r} has {problem}: give 'view', 'table' and optionally "
                             "'from' (an upstream seq)")
        view = item["view"]
        if not isinstance(view, str) or ("{{" not in view and not _IDENTIFIER.fullmatch(view)):
            raise ValueError(f"incremental view name {view!r} is not a valid view name (letters, digits, _)")
        if "{{" not in view:
            if view.lower() in views:
                raise ValueError(f"incremental view name {view!r} is taken by `tables` or another upstream")
            views.add(view.lower())
        if not isinstance(item["table"], str):
            raise ValueError(f"incremental table {item['table']!r} is not a lake table path")
    return [dict(item) for item in items]


def incremental_list(value: Any) -> list[Any] | None:
    """The rendered `incremental` as the spec takes it: a list (a dict is a list of one; JSON text is parsed)."""
    if isinstance(value, str):
        text = value.strip()
        if not text or text == "None":
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return [value]  # the job's parser refuses it, naming the field
    if value is None:
        return None
    return [value] if isinstance(value, Mapping) else list(value)
