"""The OpenLineage provider's `OperatorLineage` of a lake task: its datasets with schema, version, commit and
statistics facets.

This module imports the OpenLineage provider and client: only `LakeOperator.get_openlineage_facets_on_complete`
loads it, which the provider's listener calls (so the provider stays an optional extra, `airflow-lake[openlineage]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attr
from airflow.providers.common.compat.openlineage.facet import (
    InputDataset,
    LifecycleStateChange,
    LifecycleStateChangeDatasetFacet,
    OutputDataset,
    OutputStatisticsOutputDatasetFacet,
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
)
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.facet_v2 import DatasetFacet
from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
from openlineage.client.generated.storage_dataset import StorageDatasetFacet

from airflow_lake.lineage.datasets import Commit, LakeDataset, operator_fields, task_datasets, watched_datasets

COMMIT_FACET = "airflowLake_commit"  # custom facets carry their producer's prefix (OpenLineage spec)
STORAGE_LAYER = "airflow_lake"


@attr.define
class LakeCommitDatasetFacet(DatasetFacet):
    """The lake table commit a task made: its log sequence number (also the dataset version), instant id,
    operation, action and when it completed. Its schema is OpenLineage's `DatasetFacet` plus these fields."""

    seq: int
    instant: str
    operation: str
    action: str
    completedAt: str | None = attr.field(default=None)
    requestId: str | None = attr.field(default=None)
    alreadyCommitted: bool = attr.field(default=False)


def operator_lineage(operator: Any, task_instance: Any = None) -> OperatorLineage:  # type: ignore[type-arg]
    """Inputs and outputs of the task `operator` ran, from the metrics its `execute` returned (kept on the
    operator: `LakeOperator.returned_metrics`; none when the task failed)."""
    metrics = getattr(operator, "returned_metrics", None)
    found = task_datasets(str(operator.operation), str(operator.table), operator_fields(operator),
                          metrics if isinstance(metrics, Mapping) else None)
    return OperatorLineage(inputs=[_input(d) for d in found.inputs], outputs=[_output(d) for d in found.outputs])


def sensor_lineage(sensor: Any) -> OperatorLineage:  # type: ignore[type-arg]
    """The input of a `CommitCountSensor` task: the table whose commits it counted."""
    found = watched_datasets(str(sensor.table))
    return OperatorLineage(inputs=[_input(d) for d in found.inputs], outputs=[])


def _facets(dataset: LakeDataset) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if dataset.columns is not None:
        facets["schema"] = SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=name, type=type_)
                                                      for name, type_ in dataset.columns])
    if dataset.lake_table:
        facets["storage"] = StorageDatasetFacet(storageLayer=STORAGE_LAYER, fileFormat=dataset.file_format)
    if dataset.version is not None:
        facets["version"] = DatasetVersionDatasetFacet(datasetVersion=str(dataset.version))
    if dataset.commit is not None:
        facets[COMMIT_FACET] = _commit_facet(dataset.commit)
    if dataset.lifecycle is not None:
        facets["lifecycleStateChange"] = LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=LifecycleStateChange(dataset.lifecycle))
    return facets


def _commit_facet(commit: Commit) -> LakeCommitDatasetFacet:
    completed = None if commit.completed_at is None else \
        datetime.fromtimestamp(commit.completed_at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return LakeCommitDatasetFacet(seq=commit.seq, instant=commit.instant, operation=commit.operation,
                                  action=commit.action, completedAt=completed, requestId=commit.request_id,
                                  alreadyCommitted=commit.already_committed)


def _input(dataset: LakeDataset) -> Any:
    return InputDataset(namespace=dataset.namespace, name=dataset.name, facets=_facets(dataset))


def _output(dataset: LakeDataset) -> Any:
    stats = dataset.statistics
    output_facets: dict[str, Any] = {} if stats is None else {"outputStatistics": OutputStatisticsOutputDatasetFacet(
        rowCount=stats.rows, size=stats.bytes, fileCount=stats.files)}
    return OutputDataset(namespace=dataset.namespace, name=dataset.name, facets=_facets(dataset),
                         outputFacets=output_facets)
