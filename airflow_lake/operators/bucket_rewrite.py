"""`BucketRewriteOperator`: rewrite partitions of a lake table into Hive-style buckets Spark reads as buckets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_bucket, rendered_selection


class BucketRewriteOperator(LakeOperator):
    """Rewrite the chosen partitions of a plain or differently bucketed table into a bucket spec, as one
    `replace` commit; returns metrics (files/bytes before and after, bucket counts per partition).

    :param partitions: a list of partitions ([{"dt": "2024-01-01"}]), a range
        ({"from": {"dt": ...}, "to": {"dt": ...}}, either end optional: {"from": ...} is "from X on"), or
        None (left out) / "all" for every partition. An empty list rewrites nothing (`noop`, no bucket spec
        stored) — also when an upstream task or a template gives no partitions ([], "[]", None, "").
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
        self.partitions_given = partitions is not None  # then an empty rendering selects nothing
        self.bucket = bucket

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The bucket_rewrite spec."""
        spec: dict[str, Any] = {}
        partitions = rendered_selection(self.partitions, "partitions", given=self.partitions_given)
        if partitions is not None:
            spec["partitions"] = partitions
        bucket = rendered_bucket(rendered_selection(self.bucket, "bucket", given=False))
        if bucket is not None:  # {} is passed on: the operation says what it lacks
            spec["bucket"] = dict(bucket) if isinstance(bucket, Mapping) else bucket
        return spec
