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

    Operators that commit data (`emits_asset`) list their table's Asset (`airflow_lake.assets.table_asset`)
    among their outlets, unless the table path is templated or `outlets` is given, and put the commit's
    metrics into the asset event's extra.

    A spec that selects nothing (an empty list of partitions, instants...) is no job: the task commits nothing,
    submits nothing, logs why and returns metrics with `noop: true` and the `reason`.
    """

    operation: ClassVar[str] = ""
    template_fields: Sequence[str] = ("table", "spark_conf")
    template_fields_renderers: ClassVar[dict[str, str]] = {"spark_conf": "json"}
    ui_color = "#cde8f6"
    emits_asset: ClassVar[bool] = False
    operator_extra_links = (LakeTableLink(),)  # the table's Lake page (when under a configured root)

    def __init__(self, *, table: str, conn_id: str = DEFAULT_CONN_ID,
                 spark_conf: Mapping[str, Any] | None = None, python: str | None = None, **kwargs: Any) -> None:
        if self.emits_asset and "outlets" not in kwargs and isinstance(table, str) and "{{" not in table:
            kwargs["outlets"] = [table_asset(table)]
        super().__init__(**kwargs)
        self.table = table
        self.conn_id = conn_id
        self.spark_conf = dict(spark_conf or {})
        self.python = python

    @cached_property
    def hook(self) -> LakeHook:
        """The hook, built on first use (never at DAG parse time: it loads the job registry and the core)."""
        from airflow_lake.hooks.lake import LakeHook

        return LakeHook(self.conn_id, spark_conf=self.spark_conf, python=self.python)

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The operation's spec from the rendered fields."""
        raise NotImplementedError

    def request_id(self, context: Context) -> str:
        """Same for every try of this task instance, so a retry finds a commit its first try made."""
        ti = context["ti"]
        return f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{ti.map_index}"

    def nothing_to_do(self, spec: Mapping[str, Any]) -> NothingToDo | None:
        """The operation's verdict on `spec` when it selects nothing (the job runner decides the same way)."""
        from airflow_lake.jobs.noop import NothingToDo
        from airflow_lake.jobs.registry import validate

        parsed = validate(self.operation, spec)
        return parsed if isinstance(parsed, NothingToDo) else None

    def execute(self, context: Context) -> dict[str, Any]:
        """Submit the operation and push its metrics to XCom."""
        spec = {"table": self.table, **self.build_spec(context), "request_id": self.request_id(context)}
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
        """Put the commit's metrics into the extra of the event of this table's Asset (if it is an outlet)."""
        if not self.emits_asset:
            return
        uri = table_uri(self.table)
        for outlet in self.outlets:
            if isinstance(outlet, Asset) and outlet.uri == uri:
                context["outlet_events"][outlet].extra = event_extra(metrics)

    def on_kill(self) -> None:
        """Kill the running spark-submit."""
        if "hook" in self.__dict__:
            self.hook.on_kill()


METRICS_PREFIX = "AIRFLOW_LAKE_METRICS "


def json_line(metrics: Mapping[str, Any]) -> str:
    """Metrics on one line for the task log."""
    return ", ".join(f"{k}={v}" for k, v in metrics.items())
