"""`CompactUpsertsOperator`: fold a primary-key table's upserts into base files (Hudi's merge-on-read compaction)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_selection


class CompactUpsertsOperator(LakeOperator):
    """Compact a primary-key table with the `compact_upserts` operation: in every partition (or the listed ones) with
    more files than buckets or upserts since its last compaction, all files are merged per key into one file per
    bucket, in one `replace` commit. Upserts running meanwhile land; late upserts of lower versions still merge
    right. Returns its metrics (files_before, files_after, keys, ...; `noop` when nothing needed compacting). The
    small files of a plain table are merged by clustering (`ScheduleClusteringOperator`), not by this operator.

    :param partitions: partitions to compact ([{"dt": "2024-01-01"}]); None (left out): all. An empty list
        compacts nothing (`noop`) — also when an upstream task or a template gives none ([], "[]", None, "").
    """

    operation: ClassVar[str] = "compact_upserts"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "partitions")
    template_fields_renderers: ClassVar[dict[str, str]] = {**LakeOperator.template_fields_renderers,
                                                           "partitions": "json"}

    def __init__(self, *, partitions: Sequence[Mapping[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.partitions = partitions
        self.partitions_given = partitions is not None  # then an empty rendering selects nothing

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The compact_upserts spec."""
        partitions = rendered_selection(self.partitions, "partitions", given=self.partitions_given)
        return {} if partitions is None else {"partitions": partitions}
