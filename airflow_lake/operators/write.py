"""`LakeWriteOperator`: append to or overwrite a lake table from files or a Spark SQL query."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_selection
from airflow_lake.operators.source import SourceMixin


class LakeWriteOperator(SourceMixin, LakeOperator):
    """Write to a lake table with the `write` operation; returns its metrics (rows_added, files_added, ...).

    Give either `source_path` (+ `source_format`, `source_options`) or `query` (+ `tables`, a mapping of
    view names to lake table paths the query reads).

    :param mode: "append" or "overwrite".
    :param partitions: for overwrite: a list of partitions ({"dt": "2024-01-01"}) or "dynamic"
        (the partitions present in the data); left out (None), the whole table is overwritten. An empty
        list overwrites nothing: the task succeeds with `noop` metrics and commits nothing — also when an
        upstream task or a template gives no partitions (`[]`, "[]", None, "").
    :param schema_evolution: "add_columns" adds the source's columns the table lacks (nullable, at the end) in
        the same commit; left out, such a column fails the task (templated).
    :param incremental: upstream lake tables whose changes the query reads, each ``{"view": "<name>", "table":
        "<upstream path>"}`` (plus ``"from"``: the upstream seq a first run starts after), or a list of them
        (templated): the view holds the upstream's changes since this table last consumed it (`_change_type`,
        `_commit_seq`, `_commit_time` besides its columns), pinned to the upstream's head at the task's start, and
        the commit records how far it consumed, so retries and concurrent runs process each change exactly once.
    """

    operation: ClassVar[str] = "write"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, *SourceMixin.source_fields, "mode",
                                      "partitions", "schema_evolution")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeOperator.template_fields_renderers, **SourceMixin.source_renderers, "partitions": "json",
    }

    def __init__(self, *, source_path: str | None = None, source_format: str = "parquet",
                 source_options: Mapping[str, str] | None = None, query: str | None = None,
                 tables: Mapping[str, Any] | None = None,
                 incremental: Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | None = None,
                 mode: str = "append",
                 partitions: Sequence[Mapping[str, Any]] | str | None = None, max_exchanges: int | None = None,
                 schema_evolution: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_source(source_path, source_format, source_options, query, tables, incremental=incremental)
        self.mode = mode
        self.partitions = partitions
        self.partitions_given = partitions is not None  # then an empty rendering selects nothing, not the table
        if max_exchanges is not None and (isinstance(max_exchanges, bool) or not isinstance(max_exchanges, int)
                                          or max_exchanges < 0):
            raise ValueError(f"max_exchanges must be a whole number >= 0, got {max_exchanges!r}")
        self.max_exchanges = max_exchanges
        self.schema_evolution = schema_evolution

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The write spec."""
        spec: dict[str, Any] = {"source": self.source_spec(), "mode": self.mode}
        partitions = rendered_selection(self.partitions, "partitions", given=self.partitions_given)
        if partitions is not None:
            spec["partitions"] = partitions
        if self.max_exchanges is not None:
            spec["max_exchanges"] = self.max_exchanges
        if self.schema_evolution:
            spec["schema_evolution"] = self.schema_evolution
        return spec
