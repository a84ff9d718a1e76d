"""`LakeOperator`: what every lake operator shares — a templated table, a hook, metrics to XCom."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import Asset, BaseOperator, Context

from airflow_lake.assets import event_extra, table_asset, table_uri
from airflow_lake.hooks.defaults import DEFAULT_CONN_ID
from airflow_lake.ui.links import LakeTableLink

if TYPE_CHECKING:
    from airflow_lake.hooks.lake import LakeHook
    from airflow_lake.jobs.noop import NothingToDo


class LakeOperator(BaseOperator):
    """Base of lake operators: builds a spec, submits it through `LakeHook`, returns metrics (XCom).

    :param table: path or URL of the lake table (templated).
    :param conn_id: Spark connection to submit with.
    :param spark_conf: extra Spark settings (templated).
    :param python: Python for Spark's driver and executors (default: Airflow's own interpreter).
    :param request_id: what makes two runs of this task one request (templated), e.g.
        `"{{ ds }}-clicks-{{ ti.map_index }}"`. A request id already in the table's log commits nothing again: the
        task returns the first commit's metrics with `already_committed: true` (and the same id with other
        inputs is refused). Default (None): `dag_id/task_id/run_id/map_index`, the same for every try of one
        task instance, so a retry is a no-op, but a new DAG run is a new request: re-running a day as a new
        run (a manual or backfill run of a day already loaded) appends its batches again. Key it on what the
        load is (the day, the batch) to make such re-runs no-ops. A value that renders empty (or "None") fails
        the task: it never means "no idempotency".

    Every commit the task makes records the task instance in its log entry's metadata under "airflow"
    (`dag_id`, `run_id`, `task_id`, `map_index`, `try_number`), for the timeline, the CLI and the Lake page.

    Operators that commit data (`emits_asset`) list their table's Asset (`airflow_lake.assets.table_asset`)
    among their outlets, unless the table path is templated or `outlets` is given, and put the commit's
    metrics into the asset event's extra.

    A spec that selects nothing (an empty list of partitions, instants...) is no job: the task commits nothing,
    submits nothing, logs why and returns metrics with `noop: true` and the `reason`.
    """

    operation: ClassVar[str] = ""
    template_fields: Sequence[str] = ("table", "spark_conf", "request_id")
    template_fields_renderers: ClassVar[dict[str, str]] = {"spark_conf": "json"}
    ui_color = "#cde8f6"
    emits_asset: ClassVar[bool] = False
    in_process_max_bytes: int | None = None  # (operators that can run small inputs without Spark take it)
    operator_extra_links = (LakeTableLink(),)  # the table's Lake page (when under a configured root)

    def __init__(self, *, table: str, conn_id: str = DEFAULT_CONN_ID,
                 spark_conf: Mapping[str, Any] | None = None, python: str | None = None,
                 request_id: str | None = None, **kwargs: Any) -> None:
        if self.emits_asset and "outlets" not in kwargs and isinstance(table, str) and "{{" not in table:
            kwargs["outlets"] = [table_asset(table)]
        super().__init__(**kwargs)
        self.table = table
        self.conn_id = conn_id
        self.spark_conf = dict(spark_conf or {})
        self.python = python
        if isinstance(request_id, str) and "{{" not in request_id:
            checked_request_id(request_id)  # at DAG parse time when there is nothing to render
        self.request_id = request_id

    @cached_property
    def hook(self) -> LakeHook:
        """The hook, built on first use (never at DAG parse time: it loads the job registry and the core)."""
        from airflow_lake.hooks.lake import LakeHook

        return LakeHook(self.conn_id, spark_conf=self.spark_conf, python=self.python,
                        in_process_max_bytes=self.in_process_max_bytes)

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The operation's spec from the rendered fields."""
        raise NotImplementedError

    def effective_request_id(self, context: Context) -> str:
        """The rendered `request_id`, or the task instance's own: the same for every try of this task instance,
        so a retry finds a commit its first try made."""
        if self.request_id is not None:
            return checked_request_id(self.request_id)
        ti = context["ti"]
        return f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{ti.map_index}"

    def task_identity(self, context: Context) -> dict[str, Any]:
        """The task instance, as every commit of this task records it (the spec's `airflow` field)."""
        ti = context["ti"]
        return {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id,
                "map_index": -1 if ti.map_index is None else ti.map_index, "try_number": ti.try_number}

    def nothing_to_do(self, spec: Mapping[str, Any]) -> NothingToDo | None:
        """The operation's verdict on `spec` when it selects nothing (the job runner decides the same way)."""
        from airflow_lake.jobs.noop import NothingToDo
        from airflow_lake.jobs.registry import validate

        parsed = validate(self.operation, spec)
        return parsed if isinstance(parsed, NothingToDo) else None

    def execute(self, context: Context) -> dict[str, Any]:
        """Submit the operation and push its metrics to XCom."""
        spec = {"table": self.table, **self.build_spec(context), "request_id": self.effective_request_id(context),
                "airflow": self.task_identity(context)}
        nothing = self.nothing_to_do(spec)
        if nothing is not None:
            metrics = nothing.run()
            self.log.info("%s on %s: %s. Nothing submitted, nothing committed.", self.operation, self.table,
                          nothing.reason)
        else:
            metrics = self.hook.submit(self.operation, spec)
        self.log.info("%s on %s: %s", self.operation, self.table, json_line(metrics))
        # one line for programs that read task logs (the demo's report), whichever path ran the operation
        self.log.info("%s%s", METRICS_PREFIX, json.dumps(metrics, default=str))
        self.emit_asset_event(context, metrics)
        return metrics

    def emit_asset_event(self, context: Context, metrics: Mapping[str, Any]) -> None:
        """Put the commit's metrics into the extra of the event of this table's Asset (if it is an outlet), and keep
        them as `returned_metrics` for `get_openlineage_facets_on_complete`."""
        # kept on the operator, not read back from XCom: the OpenLineage listener runs in a forked process where
        # an XCom read can hang (it does under `airflow dags test`)
        self.returned_metrics = dict(metrics)
        if not self.emits_asset:
            return
        uri = table_uri(self.table)
        for outlet in self.outlets:
            if isinstance(outlet, Asset) and outlet.uri == uri:
                context["outlet_events"][outlet].extra = event_extra(metrics)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage inputs and outputs of this task (`airflow_lake.lineage`): called by the OpenLineage
        provider's listener when that provider is installed; it is imported here, never at DAG parse time."""
        from airflow_lake.lineage.facets import operator_lineage

        return operator_lineage(self, task_instance)

    def on_kill(self) -> None:
        """Kill the running spark-submit."""
        if "hook" in self.__dict__:
            self.hook.on_kill()


METRICS_PREFIX = "AIRFLOW_LAKE_METRICS "
_NO_ID = ("none", "null")


def checked_request_id(value: Any) -> str:
    """A request id as given or rendered: a non-blank string (a whole number, as a native template renders
    "{{ ds_nodash }}", is taken as its text). Empty, blank or "None" is refused: it is what a template of an
    unset value renders, and as an id it would make unrelated runs one request (or, read as no id, make every
    retry commit again)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip() or value.strip().lower() in _NO_ID:
        from airflow_lake.lake.errors import LakeSpecError

        raise LakeSpecError("request_id", f"the operator's request_id is {value!r}: an empty or unset request id "
                            "would not key this load, so retries and re-runs could not be told apart.",
                            "Make request_id render a non-empty string (e.g. \"{{ ds }}-clicks-{{ ti.map_index }}\"), "
                            "or leave it out for the default dag_id/task_id/run_id/map_index.")
    return value


def json_line(metrics: Mapping[str, Any]) -> str:
    """Metrics on one line for the task log."""
    return ", ".join(f"{k}={v}" for k, v in metrics.items())
