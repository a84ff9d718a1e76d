"""`LakeCreateTableOperator`: create a lake table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_bucket


class LakeCreateTableOperator(LakeOperator):
    """Create a lake table (`create_table`). With if_exists="ignore" (default) an existing table is left alone when
    the spec is its spec or one it had before a provider operation changed it (bucket_rewrite, alter_table, schema
    evolution): the XCom's `spec_changed_by` and `spec_differences` say what changed since. Any other spec fails
    naming every field that differs. `table` is a local or mounted path, or an object-store URL (`s3://`, `s3a://`,
    `gs://`, `abfs://`, `abfss://`, `az://`) whose store has a conditional write (its extra installed:
    `airflow-lake[s3]`, ...); another store (`memory://`, `http://`) is refused, naming why.

    :param schema: DDL such as "id BIGINT NOT NULL, dt STRING" (or give `columns`).
    :param partition_by: partition columns.
    :param bucket: {"columns": [...], "count": N, "sort_columns": [...]} (templated; a count such as
        ``"{{ params.buckets }}"`` is read as a number).
    :param primary_key: key columns of a primary-key table (upserted with `VersionedUpsertOperator`); it needs
        `bucket` on the key. `merge_operators` ({column: "sum"}, default "last"), `null_values` ({column:
        ["null"]} for `last_non_null`) and `version_column` complete it.
    """

    operation: ClassVar[str] = "create_table"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "schema", "partition_by", "bucket")

    def __init__(self, *, schema: str | None = None, columns: Sequence[Mapping[str, Any]] | None = None,
                 partition_by: Sequence[str] | None = None, bucket: Mapping[str, Any] | None = None,
                 primary_key: Sequence[str] | None = None, version_column: str | None = None,
                 merge_operators: Mapping[str, str] | None = None, properties: Mapping[str, str] | None = None,
                 null_values: Mapping[str, Sequence[str]] | None = None, if_exists: str = "ignore",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schema = schema
        self.columns = columns
        self.partition_by = partition_by
        self.bucket = bucket
        self.primary_key = primary_key
        self.version_column = version_column
        self.merge_operators = merge_operators
        self.properties = properties
        self.null_values = null_values
        self.if_exists = if_exists

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The create_table spec (fields left unset are omitted)."""
        fields = {
            "schema": self.schema, "columns": self.columns, "partition_by": self.partition_by,
            "bucket": self.bucket, "primary_key": self.primary_key, "version_column": self.version_column,
            "merge_operators": self.merge_operators, "properties": self.properties,
            "null_values": self.null_values, "if_exists": self.if_exists,
        }
        # a templated count ("{{ params.buckets }}") renders as text, "8.0" for a Param given as 8.0
        fields["bucket"] = rendered_bucket(self.bucket)
        return {k: v for k, v in fields.items() if v not in (None, [], {})}
