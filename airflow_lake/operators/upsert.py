"""`VersionedUpsertOperator`: upsert rows by primary key with a version (merge-on-read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.source import SourceMixin


class VersionedUpsertOperator(SourceMixin, LakeOperator):
    """Upsert into a primary-key table with the `versioned_upsert` operation; returns its metrics (rows,
    versions, files_added, already_committed, ...).

    Upserts of different versions may run at once (parallel or mapped tasks) and in any order: reads merge
    them in version order. Give either `source_path` (+ `source_format`, `source_options`) or `query` (+
    `tables`), and either `version` (templated: a batch number, ``"{{ ds_nodash }}"``) or `version_column` (a
    column of the source; default: the table's `version_column`).

    :param replace_version: replace an earlier upsert of the same version(s) that had other data (not yet
        compacted); without it, such an upsert fails and the same data again is a no-op.
    :param schema_evolution: "add_columns" adds the source's columns the table lacks (nullable, at the end) in
        the same commit; keys upserted before read them as NULL (templated).
    :param merge_operators: merge operators of the columns schema evolution adds (default "last").
    :param delete_column: the source's boolean delete-marker column (default: `_delete`, when the source has it
        and the table does not; e.g. Hudi's `_hoodie_is_deleted`): a true row deletes its key at the row's version
        (a later upsert of a lower version stays deleted); never stored (templated).
    :param incremental: upstream lake tables whose changes the query reads, each ``{"view": "<name>", "table":
        "<upstream path>"}`` (plus ``"from"``: the upstream seq a first run starts after), or a list of them
        (templated): the view holds the upstream's changes since this table last consumed it (`_change_type`,
        `_commit_seq`, `_commit_time` besides its columns), pinned to the upstream's head at the task's start, and
        the commit records how far it consumed, so retries and concurrent runs process each change exactly once.
    :param in_process_max_bytes: a `source_path` of plain Parquet files up to this many bytes (default 64 MiB) is
        upserted with pyarrow in the task's own process, with no Spark to start (the same files, commit and
        guarantees; XCom metrics say `"spark": false`); 0 runs every upsert on Spark. A source or table the pyarrow
        path does not handle (a query, delete markers, schema evolution, plugin merge operators, ...) runs on Spark.
    """

    operation: ClassVar[str] = "versioned_upsert"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, *SourceMixin.source_fields, "version",
                                      "version_column", "schema_evolution", "delete_column")
    template_fields_renderers: ClassVar[dict[str, str]] = {**LakeOperator.template_fields_renderers,
                                                           **SourceMixin.source_renderers}

    def __init__(self, *, source_path: str | None = None, source_format: str = "parquet",
                 source_options: Mapping[str, str] | None = None, query: str | None = None,
                 tables: Mapping[str, Any] | None = None,
                 incremental: Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | None = None,
                 version: int | str | None = None,
                 version_column: str | None = None, replace_version: bool = False,
                 schema_evolution: str | None = None, merge_operators: Mapping[str, str] | None = None,
                 delete_column: str | None = None, in_process_max_bytes: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_source(source_path, source_format, source_options, query, tables, incremental=incremental)
        if version is not None and version_column is not None:
            raise ValueError("give version or version_column, not both")
        self.version = version
        self.version_column = version_column
        self.replace_version = replace_version
        self.schema_evolution = schema_evolution
        self.merge_operators = dict(merge_operators or {})
        self.delete_column = delete_column
        if in_process_max_bytes is not None and (isinstance(in_process_max_bytes, bool) or
                                                 not isinstance(in_process_max_bytes, int) or in_process_max_bytes < 0):
            raise ValueError(f"in_process_max_bytes must be a whole number of bytes >= 0 (0: always on Spark), not "
                             f"{in_process_max_bytes!r}")
        self.in_process_max_bytes = in_process_max_bytes

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The versioned_upsert spec."""
        spec: dict[str, Any] = {"source": self.source_spec(), "replace_version": self.replace_version}
        if self.version is not None:  # a template rendering "" is an error, never "use the version column"
            spec["version"] = self.version
        if self.version_column:
            spec["version_column"] = self.version_column
        if self.schema_evolution:
            spec["schema_evolution"] = self.schema_evolution
        if self.merge_operators:
            spec["merge_operators"] = self.merge_operators
        if self.delete_column:
            spec["delete_column"] = self.delete_column
        return spec
