"""`SourceMixin`: the source arguments shared by operators that read files or a query (write, upsert)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class SourceMixin:
    """Either `source_path` (+ `source_format`, `source_options`) or `query` (+ `tables`, view name -> lake
    table path); all templated except the format."""

    source_fields: ClassVar[tuple[str, ...]] = ("source_path", "source_options", "query", "tables")
    source_renderers: ClassVar[dict[str, str]] = {"query": "sql", "tables": "json"}

    def init_source(self, source_path: str | None, source_format: str, source_options: Mapping[str, str] | None,
                    query: str | None, tables: Mapping[str, Any] | None) -> None:
        if (source_path is None) == (query is None):
            raise ValueError(f"give exactly one of source_path and query (got source_path={source_path!r}, "
                             f"query={query!r})")
        self.source_path = source_path
        self.source_format = source_format
        self.source_options = dict(source_options or {})
        self.query = query
        self.tables = dict(tables or {})

    def source_spec(self) -> dict[str, Any]:
        """The `source` field of the operation's spec, from the rendered fields."""
        if self.query is not None:
            return {"query": self.query, "tables": self.tables}
        return {"path": self.source_path, "format": self.source_format, "options": self.source_options}
