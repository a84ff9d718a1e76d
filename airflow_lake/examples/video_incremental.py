"""The example pipeline, incremental (`lake_ods_to_dm_incremental`): the same tables as `video_pipeline`, each
downstream step consuming its upstreams' changes (`incremental` views) and rebuilding only the days they touch.
No Airflow import.

What every step keeps true: a downstream table equals what a full rebuild gives from its upstreams' *current*
snapshots — the dimensions as merged now, for every day. So a step rebuilds a day when

- `dwd_plays`: the day's events changed, or a user who played that day changed (region and level come from
  `ods_users`);
- `dwd_likes`: the day's events changed;
- `dwd_works`: (the whole table) any work changed;
- `dws_work_daily`: the day's plays or likes changed, or a work played that day changed (its category and author);
- `dm_work_7d`: a DWS day in the day's 7-day window changed (a DM day is a day with DWS rows).

Each step's query computes the set `days` (`DAYS`) and recomputes those days from the whole upstream tables of
those days (read at the snapshots the changes end at), written with `partitions="dynamic"`: exactly the
recomputed days are overwritten. A changed day of a partitioned upstream is a partition its changes window
touched, found in the log (`partitions: "changed"` or a list of views on a `tables` entry, `sources.load`): the
upstream is read in those partitions only, so a late day of events reads that day, not the table, and no change
rows need computing (a day rewritten with the same rows is rebuilt alike). A changed dimension key gives the
days it occurs on, from the dimension's change rows. With `rebuild="full"` the same queries run with `days` =
every day of the upstream, unpruned: the whole table rebuilt from the current snapshots, its positions recorded
as any incremental run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.examples.video_pipeline import (
    BUCKETED_JOIN_CONF,
    DWD_LIKES_SQL,
    DWD_PLAYS_SQL,
    DWD_WORKS_SQL,
    DWS_SQL,
    PARAM_NAMES,
)

REBUILD_MODES = ("incremental", "full")
# The Params of the incremental DAG: the pipeline's plus `rebuild` (its first task refuses any other conf key).
INCREMENTAL_PARAM_NAMES = (*PARAM_NAMES, "rebuild")

# The views of changes each step reads (`incremental=`), by the name its query uses.
EVENTS_CHANGES, USERS_CHANGES, WORKS_CHANGES = "events_changes", "users_changes", "works_changes"
PLAYS_CHANGES, LIKES_CHANGES, DWD_WORKS_CHANGES = "plays_changes", "likes_changes", "dwd_works_changes"
DWS_CHANGES = "dws_changes"


def _of_days(view: str, alias: str) -> str:
    """The rows of `view` on the days `days` selects, as a relation called `alias`: a semi join with the (small)
    set of days, broadcast (also where a step turns broadcasts off to keep its bucketed joins), so the rows keep
    their bucketed partitioning and nothing is shuffled for the filter."""
    return f"(SELECT /*+ BROADCAST(d) */ x.* FROM {view} x LEFT SEMI JOIN days d ON x.dt = d.dt) {alias}"  # noqa: S608


def _on_days(days: str, sql: str, *reads: tuple[str, str]) -> str:
    """`sql` with each read `FROM <view> <rest>` in `reads` kept to the days `days` selects."""
    for old, new in reads:
        assert sql.count(old) == 1, (old, sql)
        sql = sql.replace(old, new)
    if sql.startswith("WITH "):
        return f"WITH days AS ({days}), {sql[len('WITH '):]}"
    return f"WITH days AS ({days}) {sql}"


def dwd_plays_sql(days: str) -> str:
    """The DWD plays step (`video_pipeline.DWD_PLAYS_SQL`) over the days `days` selects."""
    return _on_days(days, DWD_PLAYS_SQL, (" FROM events e ", f" FROM {_of_days('events', 'e')} "))


def dwd_likes_sql(days: str) -> str:
    """The DWD likes step over the days `days` selects."""
    return _on_days(days, DWD_LIKES_SQL, (" FROM events ", f" FROM {_of_days('events', 'events')} "))


def dws_sql(days: str) -> str:
    """The DWS step (`video_pipeline.DWS_SQL`: plays join works, likes join on (work_id, dt)) over the days
    `days` selects; the plays and likes are kept to those days below the joins and aggregates."""
    return _on_days(days, DWS_SQL, (" FROM plays p ", f" FROM {_of_days('plays', 'p')} "),
                    (" FROM likes ", f" FROM {_of_days('likes', 'likes')} "))


def dm_sql(days: str) -> str:
    """The DM step for the DWS days `days` selects: per day and work, the sums over the day's 7-day window
    (`video_pipeline.DM_SQL`, for many days at once)."""
    return (
        f"WITH days AS ({days}), "  # noqa: S608  (the example's own SQL)
        "win AS (SELECT /*+ BROADCAST(t) */ t.dt AS day, d.work_id, d.category, d.author_id, d.plays, d.likes,"
        " d.play_ms, d.dt FROM dws d JOIN days t"
        " ON d.dt BETWEEN date_format(date_sub(to_date(t.dt), 6), 'yyyy-MM-dd') AND t.dt) "
        "SELECT work_id, MAX_BY(category, dt) AS category, MAX_BY(author_id, dt) AS author_id,"
        " SUM(plays) AS plays_7d, SUM(likes) AS likes_7d, SUM(play_ms) AS play_ms_7d, COUNT(*) AS active_days,"
        " day AS dt FROM win GROUP BY day, work_id"
    )


# Which days each step rebuilds. Incremental: the partitions its partitioned upstreams' windows touched (the
# `*_touched` views: read in those partitions only, so this costs a listing, not a diff of the rows; a partition
# rewritten with the same rows is rebuilt alike), plus the days where a changed dimension key occurs (from the
# dimension's change rows); the DM step: the days whose 7-day window holds a DWS day with changed rows. Full:
# every day of its upstream.
DAYS: dict[str, dict[str, str]] = {
    "dwd_plays": {
        "incremental": "SELECT dt FROM events_touched UNION SELECT e.dt FROM events e "
                       "LEFT SEMI JOIN users_changes c ON e.user_id = c.user_id",
        "full": "SELECT DISTINCT dt FROM events",
    },
    # (its one upstream is partitioned: `events` is read in the touched partitions only)
    "dwd_likes": {"incremental": "SELECT DISTINCT dt FROM events", "full": "SELECT DISTINCT dt FROM events"},
    "dws_work_daily": {
        "incremental": "SELECT dt FROM plays_touched UNION SELECT dt FROM likes_touched UNION "
                       "SELECT p.dt FROM plays p LEFT SEMI JOIN dwd_works_changes c ON p.work_id = c.work_id",
        "full": "SELECT dt FROM plays UNION SELECT dt FROM likes",
    },
    "dm_work_7d": {
        "incremental": "SELECT DISTINCT d.dt FROM dws d JOIN (SELECT DISTINCT dt FROM dws_changes) c"
                       " ON d.dt BETWEEN c.dt AND date_format(date_add(to_date(c.dt), 6), 'yyyy-MM-dd')",
        "full": "SELECT DISTINCT dt FROM dws",
    },
}


# A `tables` view of an upstream read in only the partitions its change windows touched, incrementally; whole
# for a full rebuild (`PARTITIONS`: the `rebuild` Param picks it when the task runs).
PARTITIONS = "{{ 'all' if params.rebuild == 'full' else 'changed' }}"


@dataclass(frozen=True)
class Step:
    """One downstream step: the table it writes, the views its query reads (view -> upstream table name, and
    which partitions: all (False), those its views of changes touched when incremental (True), or those the named
    views of changes touched), its views of changes (view -> upstream table name), and whether it overwrites the
    days it computes (`partitions="dynamic"`) or the whole table."""

    table: str
    tables: Mapping[str, tuple[str, bool | tuple[str, ...]]]
    incremental: Mapping[str, str]
    by_day: bool = True
    sql: Callable[[str], str] | None = None  # the query over the days `days` selects (None: `fixed_sql`)
    fixed_sql: str = ""  # a query without days: the whole table, when any upstream changed
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    max_exchanges: int | None = None

    def query(self, rebuild: str) -> str:
        """The step's query for one `rebuild` mode ("incremental" or "full")."""
        if rebuild not in REBUILD_MODES:
            raise ValueError(f"rebuild: {rebuild!r} is not one of {', '.join(REBUILD_MODES)}. Fix: use one of "
                             "them.")
        return self.fixed_sql if self.sql is None else self.sql(DAYS[self.table][rebuild])

    def templated_query(self) -> str:
        """The step's query as a template: the `rebuild` Param picks the mode when the task runs."""
        if self.sql is None:
            return self.fixed_sql
        return ("{% if params.rebuild == 'full' %}" + self.query("full") + "{% else %}" + self.query("incremental")
                + "{% endif %}")

    def source(self, paths: Mapping[str, str], partitions: str) -> dict[str, Any]:
        """The `tables` and `incremental` of the step's query source, for the tables at `paths` (by name);
        `partitions`: "changed", "all" or a template choosing one."""
        tables: dict[str, Any] = {}
        for view, (name, pruned) in self.tables.items():
            if isinstance(pruned, tuple):  # (the full rebuild's days do not read these views)
                tables[view] = {"path": paths[name], "partitions": list(pruned)}
            else:
                tables[view] = {"path": paths[name], "partitions": partitions} if pruned else paths[name]
        incremental = [{"view": view, "table": paths[name]} for view, name in self.incremental.items()]
        return {"tables": tables, "incremental": incremental}

    def write_spec(self, paths: Mapping[str, str], rebuild: str) -> dict[str, Any]:
        """The `write` job spec of the step in one `rebuild` mode, for the tables at `paths`."""
        source = self.source(paths, "all" if rebuild == "full" else "changed")
        spec: dict[str, Any] = {"table": paths[self.table], "source": {"query": self.query(rebuild), **source},
                                "mode": "overwrite"}
        if self.by_day:
            spec["partitions"] = "dynamic"
        if self.max_exchanges is not None:
            spec["max_exchanges"] = self.max_exchanges
        return spec

    def operator_args(self, paths: Mapping[str, str]) -> dict[str, Any]:
        """`LakeWriteOperator` arguments of the step, the `rebuild` Param choosing the mode when it runs."""
        source = self.source(paths, PARTITIONS)
        args: dict[str, Any] = {"task_id": f"build_{self.table}", "table": paths[self.table],
                                "query": self.templated_query(), "tables": source["tables"],
                                "incremental": source["incremental"], "mode": "overwrite"}
        if self.by_day:
            args["partitions"] = "dynamic"
        if self.spark_conf:
            args["spark_conf"] = dict(self.spark_conf)
        if self.max_exchanges is not None:
            args["max_exchanges"] = self.max_exchanges
        return args


STEPS: dict[str, Step] = {
    "dwd_plays": Step("dwd_plays", {"events": ("ods_events", True), "users": ("ods_users", False),
                                    "events_touched": ("ods_events", (EVENTS_CHANGES,))},
                      {EVENTS_CHANGES: "ods_events", USERS_CHANGES: "ods_users"}, sql=dwd_plays_sql),
    "dwd_likes": Step("dwd_likes", {"events": ("ods_events", True)}, {EVENTS_CHANGES: "ods_events"},
                      sql=dwd_likes_sql),
    # the whole (small) dimension; its view of changes only says whether to run (no change: no query)
    "dwd_works": Step("dwd_works", {"works": ("ods_works", False)}, {WORKS_CHANGES: "ods_works"}, by_day=False,
                      fixed_sql=DWD_WORKS_SQL, max_exchanges=0),
    "dws_work_daily": Step("dws_work_daily", {"plays": ("dwd_plays", True), "likes": ("dwd_likes", True),
                                              "works": ("dwd_works", False),
                                              "plays_touched": ("dwd_plays", (PLAYS_CHANGES, LIKES_CHANGES)),
                                              "likes_touched": ("dwd_likes", (PLAYS_CHANGES, LIKES_CHANGES))},
                           {PLAYS_CHANGES: "dwd_plays", LIKES_CHANGES: "dwd_likes", DWD_WORKS_CHANGES: "dwd_works"},
                           sql=dws_sql, spark_conf=BUCKETED_JOIN_CONF),
    # the DWS table is small (a row per work and day): read whole, as the 7-day windows reach past the changes
    "dm_work_7d": Step("dm_work_7d", {"dws": ("dws_work_daily", False)}, {DWS_CHANGES: "dws_work_daily"},
                       sql=dm_sql),
}


def whole_table_specs(paths: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """`write` job specs of the DWD and DWS tables at `paths` (by name) built the plain way: `lake_ods_to_dm`'s
    queries over every day, each table overwritten whole from its upstreams' latest snapshots — no views of
    changes, no positions. What the incremental steps must equal, and the baseline of
    `benchmarks/bench_incremental.py`. (The DWS step wants `BUCKETED_JOIN_CONF` in the session, as its task
    sets.)"""
    queries = {
        "dwd_plays": (DWD_PLAYS_SQL, {"events": "ods_events", "users": "ods_users"}),
        "dwd_likes": (DWD_LIKES_SQL, {"events": "ods_events"}),
        "dwd_works": (DWD_WORKS_SQL, {"works": "ods_works"}),
        "dws_work_daily": (DWS_SQL, {"plays": "dwd_plays", "likes": "dwd_likes", "works": "dwd_works"}),
    }
    return {name: {"table": paths[name], "mode": "overwrite",
                   "source": {"query": query, "tables": {view: paths[up] for view, up in views.items()}}}
            for name, (query, views) in queries.items()}
