"""`BucketRewriteOperator`: rewrite partitions of a lake table into Hive-style buckets Spark reads as buckets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator


class BucketRewriteOperator(LakeOperator):
    """Rewrite the chosen partitions of a plain or differently bucketed table into a bucket spec, as one
    `replace` commit; returns metrics (files/bytes before and after, bucket counts per partition).

    :param partitions: a list of partitions ([{"dt": "2024-01-01"}]), a range
        ({"from": {"dt": ...}, "to": {"dt": ...}}, either end optional: {"from": ...} is "from X on"), or
        None / "all" for every partition.
    :param bucket: the new bucket spec, which becomes the table's: {"columns": [...], "count": N,
        "sort_columns": [...], "partition_counts": [{"partition": {...}, "count": M}], "from_partition": {...}};
        None keeps the table's. Bucketing a plain table with {"from": X} also sets "from_partition" to X.
    """

    operation: ClassVar[str] = "bucket_rewrite"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "partitions", "bucket")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeOperator.template_fields_renderers, "partitions": "json", "bucket": "json",
    }
    ui_color = "#d9ead3"

    def __init__(self, *, partitions: Sequence[Mapping[str, Any]] | Mapping[str, Any] | str | None = None,
                 bucket: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.partitions = partitions
        self.bucket = bucket

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The bucket_rewrite spec."""
        spec: dict[str, Any] = {}
        if self.partitions not in (None, "", []):
            spec["partitions"] = self.partitions
        if self.bucket:
            spec["bucket"] = dict(self.bucket)
        return spec
