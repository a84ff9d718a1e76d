"""`ScheduleClusteringOperator` and `ExecuteClusteringOperator`: Hudi-style clustering of a lake table.

    wait = CommitCountSensor(task_id="wait", table=T, min_commits=4, deferrable=True)
    plan = ScheduleClusteringOperator(task_id="plan", table=T, layout="ZORDER", sort_columns=["x", "y"])
    run = ExecuteClusteringOperator(task_id="run", table=T, plan_id=plan.output["plan_id"])  # XCom key plan_id
    wait >> plan >> run

The schedule step reads only the timeline (no Spark). With nothing to plan it succeeds, returns
`plan_id: None` and the reason, and skips its downstream tasks (a skip, not a failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pendulum
from airflow.sdk import Context

from airflow_lake.compat import SkipMixin
from airflow_lake.operators.base import LakeOperator
from airflow_lake.operators.rendered import rendered_selection, rendered_whole

if TYPE_CHECKING:
    from airflow_lake.jobs.noop import NothingToDo

_SCHEDULE_FIELDS = ("min_commits", "partitions", "partition_regex", "filter_mode", "lookback_partitions",
                    "skip_from_latest", "begin_partition", "end_partition", "small_file_limit_bytes",
                    "max_bytes_per_group", "target_file_max_bytes", "max_groups", "single_group_clustering",
                    "layout", "sort_columns", "curve", "sample_ranges")
_NUMBER_FIELDS = ("min_commits", "lookback_partitions", "skip_from_latest", "small_file_limit_bytes",
                  "max_bytes_per_group", "target_file_max_bytes", "max_groups", "sample_ranges")


class ScheduleClusteringOperator(LakeOperator, SkipMixin):
    """Store a clustering plan when at least `min_commits` commits completed since the last clustering.

    Returns (XCom) `plan_id` (None when there is no plan), `noop` (true exactly when `plan_id` is None),
    `reason`, `existing_plan` (the plan was stored by an earlier try of this task, not now; `already_committed`
    too if it has been executed since) and the plan's numbers (groups, input files and bytes, output files):
    docs/api.md, "XCom of the clustering operators". `plan_id` is also pushed under its own XCom key, so
    `plan.output["plan_id"]` feeds `ExecuteClusteringOperator(plan_id=...)`. Without a plan, the downstream
    tasks are skipped.

    :param min_commits: commits needed since the last clustering (Hudi max.commits), default 4.
    :param partitions: an explicit list of partitions to plan ([{"dt": "2024-01-01"}]); wins over the rest.
        An empty list plans nothing (no plan: the downstream tasks are skipped) — also when an upstream task
        or a template gives none ([], "[]", None, ""); leave it out (None) to choose by the other fields.
    :param partition_regex: full match against "col=value/col2=value".
    :param filter_mode: NONE, RECENT_DAYS (lookback_partitions, skip_from_latest), SELECTED_PARTITIONS
        (begin_partition, end_partition, inclusive), DAY_ROLLING (partitions whose index mod 24 is the hour
        of the run's logical date in `timezone`) or COMMITS_SINCE_LAST_CLUSTERING (the partitions the commits
        counted since the last clustering wrote to: a backfill into an old day plans that day).
    :param small_file_limit_bytes: files below it are candidates (default 300 MB).
    :param max_bytes_per_group: a group holds files up to this size (default 2 GB).
    :param target_file_max_bytes: a group becomes ceil(bytes / this) files (default 1 GB).
    :param max_groups: groups per plan (default 30).
    :param single_group_clustering: keep a last group of one file even without sort columns.
    :param layout: LINEAR, ZORDER or HILBERT.
    :param sort_columns: the columns to order by (1..N).
    :param curve: SAMPLE (range bounds from a sample, default) or DIRECT (values mapped to bits).
    :param sample_ranges: SAMPLE ranges per column (default 1000).
    :param timezone: for DAY_ROLLING, the zone of the hour (default the DAG's).
    :param ignore_downstream_trigger_rules: without a plan, skip every downstream task (True) or only the
        direct ones, letting trigger rules decide for the rest (False, default).
    """

    operation: ClassVar[str] = "schedule_clustering"
    template_fields: Sequence[str] = (*LakeOperator.template_fields, *_SCHEDULE_FIELDS)
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeOperator.template_fields_renderers, "partitions": "json", "begin_partition": "json",
        "end_partition": "json",
    }
    ui_color = "#fce5cd"
    inherits_from_skipmixin = True

    def __init__(self, *, min_commits: int | str = 4, partitions: Sequence[Mapping[str, Any]] | None = None,
                 partition_regex: str | None = None, filter_mode: str = "NONE", lookback_partitions: int | None = None,
                 skip_from_latest: int | None = None, begin_partition: Mapping[str, Any] | None = None,
                 end_partition: Mapping[str, Any] | None = None, small_file_limit_bytes: int | None = None,
                 max_bytes_per_group: int | None = None, target_file_max_bytes: int | None = None,
                 max_groups: int | None = None, single_group_clustering: bool = False, layout: str = "LINEAR",
                 sort_columns: Sequence[str] | str | None = None, curve: str = "SAMPLE",
                 sample_ranges: int | None = None, timezone: str | None = None,
                 ignore_downstream_trigger_rules: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.min_commits = min_commits
        self.partitions = partitions
        self.partitions_given = partitions is not None  # then an empty rendering plans nothing
        self.partition_regex = partition_regex
        self.filter_mode = filter_mode
        self.lookback_partitions = lookback_partitions
        self.skip_from_latest = skip_from_latest
        self.begin_partition = begin_partition
        self.end_partition = end_partition
        self.small_file_limit_bytes = small_file_limit_bytes
        self.max_bytes_per_group = max_bytes_per_group
        self.target_file_max_bytes = target_file_max_bytes
        self.max_groups = max_groups
        self.single_group_clustering = single_group_clustering
        self.layout = layout
        self.sort_columns = sort_columns
        self.curve = curve
        self.sample_ranges = sample_ranges
        self.timezone = timezone
        self.ignore_downstream_trigger_rules = ignore_downstream_trigger_rules

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The schedule_clustering spec (layout names in capitals; the hour for DAY_ROLLING)."""
        spec: dict[str, Any] = {}
        for name in _SCHEDULE_FIELDS:
            value = getattr(self, name)
            if name in ("partitions", "begin_partition", "end_partition"):
                value = rendered_selection(value, name, given=name == "partitions" and self.partitions_given)
                if value is not None:
                    spec[name] = value  # [] goes on: the operation plans nothing, never every partition
                continue
            if value is None or value in ("", []) or (name == "single_group_clustering" and not value):
                continue
            if name in ("layout", "curve", "filter_mode") and isinstance(value, str):
                value = value.strip().upper()
            if name == "sort_columns" and isinstance(value, str):
                value = [c.strip() for c in value.split(",") if c.strip()]
            if name in _NUMBER_FIELDS:
                value = rendered_whole(value)  # a rendered template ("{{ params.min_commits }}") is text
            spec[name] = value
        if spec.get("filter_mode") == "DAY_ROLLING":
            spec["hour"] = self.run_hour(context)
        return spec

    def run_hour(self, context: Context) -> int:
        """The hour of the run's logical date (else when it was queued) in `timezone` or the DAG's zone."""
        moment = context.get("logical_date") or getattr(context.get("dag_run"), "run_after", None) or pendulum.now()
        zone = self.timezone or getattr(getattr(self, "dag", None), "timezone", None) or "UTC"
        return int(pendulum.instance(moment).in_timezone(zone).hour)

    def execute(self, context: Context) -> dict[str, Any]:
        """Schedule; without a plan, skip the downstream tasks."""
        metrics = super().execute(context)
        context["ti"].xcom_push(key="plan_id", value=metrics.get("plan_id"))  # for `plan.output["plan_id"]`
        if metrics.get("plan_id"):
            self.log.info("Clustering plan %s: %s", metrics["plan_id"], metrics.get("reason"))
            return metrics
        self.log.info("No clustering plan: %s. Skipping downstream tasks.", metrics.get("reason"))
        task = context["task"]
        downstream = task.get_flat_relatives(upstream=False) if self.ignore_downstream_trigger_rules \
            else task.get_direct_relatives(upstream=False)
        to_skip = [t for t in downstream if not getattr(t, "is_teardown", False)]
        if to_skip:
            self.skip(ti=context["ti"], tasks=to_skip)
        return metrics


class ExecuteClusteringOperator(LakeOperator):
    """Run a clustering plan as one replace commit; returns its metrics (files/bytes before and after), `plan_id`,
    `noop` (true exactly when no plan ran or was returned: `plan_id` None, `reason` says why) and
    `already_committed` (the plan's commit was made before this try: a retry, or another request ran it).

    :param plan_id: the plan to run (templated; e.g. `plan.output["plan_id"]`). Given, but rendered empty
        (None, "", "None": the upstream schedule planned nothing), nothing runs (`noop`): never another plan.
    :param which: without plan_id (left out), "oldest" pending plan or "all" of them (one commit each).
    :param parallelism: groups rewritten at once (parallel Spark jobs), default 4.

    A retry of a completed plan writes nothing and returns its metrics; a plan whose input files a
    concurrent commit replaced is rolled back and the task fails with LakePlanAborted (schedule again).
    """

    operation: ClassVar[str] = "execute_clustering"
    emits_asset: ClassVar[bool] = True
    template_fields: Sequence[str] = (*LakeOperator.template_fields, "plan_id", "which")
    ui_color = "#f9cb9c"

    def __init__(self, *, plan_id: str | None = None, which: str = "oldest", parallelism: int = 4,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan_id = plan_id
        self.plan_id_given = plan_id is not None  # then an empty rendering runs nothing, not `which`
        self.which = which
        self.parallelism = parallelism

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The execute_clustering spec."""
        plan_id = None if self.plan_id in (None, "", "None") else str(self.plan_id).strip()
        spec: dict[str, Any] = {"parallelism": self.parallelism}
        if plan_id:
            spec["plan_id"] = plan_id
        else:
            spec["which"] = self.which
        return spec

    def nothing_to_do(self, spec: Mapping[str, Any]) -> NothingToDo | None:
        """A plan_id given but empty: the schedule it came from planned nothing, so nothing runs."""
        from airflow_lake.jobs.noop import NothingToDo
        from airflow_lake.jobs.registry import validate

        validate(self.operation, spec)  # a bad spec fails as it would have
        if not self.plan_id_given or "plan_id" in spec:
            return None
        return NothingToDo(str(spec["table"]), self.operation, "plan_id", spec.get("request_id"),
                           extra={"plans_executed": 0, "plan_id": None},
                           detail=f"plan_id is empty ({self.plan_id!r}: the schedule planned nothing), so no plan "
                                  "runs")

    def execute(self, context: Context) -> dict[str, Any]:
        """Run the plan(s); for `which="all"` the metrics list every plan under `plans`."""
        metrics = super().execute(context)
        from airflow_lake.lake.table import LakeTable

        table = LakeTable.open(self.table)
        request_id = self.effective_request_id(context)
        plan_id = self.build_spec(context).get("plan_id")
        if metrics.get("noop") and plan_id:
            # run before by another request: its commit is the plan's
            seq = table.state().instants.get(plan_id)
            if seq is not None:
                entry = table.commit_log.read(seq)
                return {**entry.metrics, "plan_id": plan_id, "instant": entry.instant, "seq": entry.seq,
                        "noop": False, "already_committed": True, "table": table.url, "operation": self.operation}
        plans = [metrics] if not metrics.get("noop") else []
        index = 1
        while (more := table.find_request(f"{request_id}#{index}", self.operation)) is not None:
            plans.append({**more.metrics, "instant": more.instant, "seq": more.seq})
            index += 1
        if len(plans) > 1:
            metrics = {**metrics, "plans_executed": len(plans), "plans": plans,
                       "files_before": sum(p.get("files_before", 0) for p in plans),
                       "files_after": sum(p.get("files_after", 0) for p in plans)}
            self.emit_asset_event(context, metrics)  # the event tells about every plan run
        return metrics
