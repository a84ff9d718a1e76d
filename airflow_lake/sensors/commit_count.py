"""`CommitCountSensor`: wait until a lake table has had N commits — since its last clustering (default),
since an instant, or since its start — in poke, reschedule or deferrable mode."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_lake.exceptions import LakeJobError
from airflow_lake.operators.rendered import rendered_whole
from airflow_lake.sensors.commit_count_check import MIN_POKE_INTERVAL, check_actions, count_commits


class CommitCountSensor(BaseSensorOperator):
    """Succeed once `table` has at least `min_commits` completed commits; returns (XCom) the count, the
    counted instants and the instant counted from. Reads only the timeline: no Spark.

    :param table: path of the lake table (templated).
    :param min_commits: commits to wait for (templated), default 4.
    :param since: "last_clustering" (default), "start", or an instant id (templated).
    :param actions: actions that count (default ["commit", "upsert"]: data writes); one name ("commit") or a
        list of create, commit, replace, upsert, clean, rollback, restore, alter. Checked when the DAG is parsed:
        an unknown action would never be counted and the sensor would wait for good.
    :param deferrable: wait in the triggerer instead of a worker slot.

    `poke_interval` is at least 1 second (a smaller one is refused when the DAG is parsed).
    """

    template_fields: Sequence[str] = ("table", "min_commits", "since")
    ui_color = "#d9d2e9"

    def __init__(self, *, table: str, min_commits: int | str = 4, since: str = "last_clustering",
                 actions: str | Sequence[str] | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.poke_interval < MIN_POKE_INTERVAL:
            raise ValueError(f"poke_interval must be at least {MIN_POKE_INTERVAL:g} second(s), got "
                             f"{self.poke_interval!r}: each poke reads the table's timeline")
        self.table = table
        self.min_commits = min_commits
        self.since = since
        self.actions = check_actions(actions)
        self.deferrable = deferrable

    def _wanted(self) -> int:
        value = rendered_whole(self.min_commits)  # "{{ params.min_commits }}" renders "2" (or "2.0")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"min_commits must be a whole number >= 0, got {self.min_commits!r}")
        return value

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """Count once."""
        from airflow_lake.lake.clustering.timeline import check_since  # the core loads when a task runs

        found = count_commits(self.table, check_since(self.since), self.actions)
        wanted = self._wanted()
        self.log.info("%s: %d of %d commit(s) since %s", self.table, found["count"], wanted,
                      found["since_instant"] or self.since)
        return PokeReturnValue(is_done=found["count"] >= wanted, xcom_value=found)

    def execute(self, context: Context) -> Any:
        """Poke (and reschedule) as any sensor; deferrable: check once, then wait in the triggerer."""
        if not self.deferrable:
            return super().execute(context)
        found = self.poke(context)
        if isinstance(found, PokeReturnValue) and found.is_done:
            return found.xcom_value
        from airflow_lake.lake.clustering.timeline import check_since
        from airflow_lake.triggers.commit_count import CommitCountTrigger

        self.defer(trigger=CommitCountTrigger(self.table, self._wanted(), check_since(self.since), self.actions,
                                              float(self.poke_interval)),
                   method_name="execute_complete", timeout=timedelta(seconds=float(self.timeout)))
        return None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the watched table is this task's input (`airflow_lake.lineage`), so a lineage graph draws
        the sensor between the table's writers and the tasks it gates."""
        from airflow_lake.lineage.facets import sensor_lineage

        return sensor_lineage(self)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Back from the trigger: the count, or the trigger's error."""
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "no event")
            raise LakeJobError(f"CommitCountSensor on {self.table!r} failed: {message}")
        self.log.info("%s: %d commit(s) since %s", self.table, event["count"], event.get("since_instant"))
        return {k: v for k, v in event.items() if k != "status"}
