"""The lake tables of the example short-video pipeline (`lake_ods_to_dm`, `lake_ods_to_dm_incremental`,
`lake_maintenance`): their paths, their layouts and the Spark SQL that builds each layer. Shared by the DAGs (and
their tests); no Airflow import.

Every layer from DWD on is bucketed by `work_id` (seed 004): the bucket counts are powers of two — `B` from
the `buckets` Param, `2B` for the biggest fact table — so joins and group-bys on `work_id` read matching
buckets and need no shuffle (Spark coalesces 2B buckets to B when they meet in a join).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from airflow_lake.datagen import video_schema as video

LAKE_ROOT = os.environ.get("AIRFLOW_LAKE_ROOT", "/tmp/airflow-lake/lake")
LANDING = os.environ.get("AIRFLOW_LAKE_LANDING", "/tmp/airflow-lake/landing")
# "@daily" by default; set it empty for a stack where runs are only triggered (the UI form, REST)
PIPELINE_SCHEDULE = os.environ.get("AIRFLOW_LAKE_PIPELINE_SCHEDULE", "@daily") or None
# the connection lake tasks run on: a `spark` one (spark-submit per task) or a `spark_connect` one (warm server)
SPARK_CONN_ID = os.environ.get("AIRFLOW_LAKE_SPARK_CONN_ID", "spark_default")

ODS_EVENTS = f"{LAKE_ROOT}/ods_events"
ODS_WORKS = f"{LAKE_ROOT}/ods_works"
ODS_USERS = f"{LAKE_ROOT}/ods_users"
DWD_PLAYS = f"{LAKE_ROOT}/dwd_plays"
DWD_LIKES = f"{LAKE_ROOT}/dwd_likes"
DWD_WORKS = f"{LAKE_ROOT}/dwd_works"
DWS_WORK_DAILY = f"{LAKE_ROOT}/dws_work_daily"
DM_WORK_7D = f"{LAKE_ROOT}/dm_work_7d"
TABLES = {"ods_events": ODS_EVENTS, "ods_works": ODS_WORKS, "ods_users": ODS_USERS, "dwd_plays": DWD_PLAYS,
          "dwd_likes": DWD_LIKES, "dwd_works": DWD_WORKS, "dws_work_daily": DWS_WORK_DAILY,
          "dm_work_7d": DM_WORK_7D}

B = "{{ params.buckets }}"  # rendered as text; the create operator reads a digit string as a number
BB = "{{ params.buckets * 2 }}"
DAY = "{{ run_day(params, dag_run) }}"
WEEK_START = "{{ run_day(params, dag_run, -6) }}"
DM_SORT_COLUMNS = ["category", "plays_7d"]  # what the DM queries filter on: clustering orders by them

CREATE: dict[str, dict[str, Any]] = {
    "ods_events": {"schema": video.EVENTS_SCHEMA, "partition_by": ["dt"]},
    "ods_works": {"schema": video.WORKS_SCHEMA, "primary_key": ["work_id"],
                  "bucket": {"columns": ["work_id"], "count": B}, "merge_operators": video.WORKS_MERGE,
                  "null_values": video.WORKS_NULLS},
    "ods_users": {"schema": video.USERS_SCHEMA, "primary_key": ["user_id"],
                  "bucket": {"columns": ["user_id"], "count": B}, "merge_operators": video.USERS_MERGE},
    "dwd_plays": {"schema": "event_id BIGINT NOT NULL, work_id BIGINT NOT NULL, user_id BIGINT, play_ms BIGINT, "
                            "event_ts TIMESTAMP, region STRING, level INT, dt STRING",
                  "partition_by": ["dt"], "bucket": {"columns": ["work_id"], "count": BB,
                                                     "sort_columns": ["work_id", "user_id"]}},
    "dwd_likes": {"schema": "event_id BIGINT NOT NULL, work_id BIGINT NOT NULL, user_id BIGINT, "
                            "event_ts TIMESTAMP, dt STRING",
                  "partition_by": ["dt"], "bucket": {"columns": ["work_id"], "count": B,
                                                     "sort_columns": ["work_id"]}},
    "dwd_works": {"schema": "work_id BIGINT NOT NULL, author_id BIGINT, category STRING, title STRING, "
                            "duration_s INT",
                  "bucket": {"columns": ["work_id"], "count": B, "sort_columns": ["work_id"]}},
    "dws_work_daily": {"schema": "work_id BIGINT NOT NULL, category STRING, author_id BIGINT, plays BIGINT, "
                                 "viewers BIGINT, vip_plays BIGINT, play_ms BIGINT, likes BIGINT, dt STRING",
                       "partition_by": ["dt"], "bucket": {"columns": ["work_id"], "count": B,
                                                          "sort_columns": ["work_id"]}},
    "dm_work_7d": {"schema": "work_id BIGINT NOT NULL, category STRING, author_id BIGINT, plays_7d BIGINT, "
                             "likes_7d BIGINT, play_ms_7d BIGINT, active_days BIGINT, dt STRING",
                   "partition_by": ["dt"]},
}

# ODS -> DWD: the day's valid events; plays carry the user's region and level as merged today (a join on
# user_id against work_id-bucketed output: the one layer allowed to shuffle, it reads the plain ODS table).
DWD_PLAYS_SQL = (
    "SELECT e.event_id, e.work_id, e.user_id, e.play_ms, e.event_ts, u.region, u.level, e.dt "
    "FROM events e LEFT JOIN users u ON e.user_id = u.user_id "
    "WHERE e.event_type = 'play' AND e.work_id IS NOT NULL AND e.play_ms >= 0"
)
DWD_LIKES_SQL = ("SELECT event_id, work_id, user_id, event_ts, dt FROM events "
                 "WHERE event_type = 'like' AND work_id IS NOT NULL")
# the merged works dimension (ods_works is read merged per bucket, bucketed like dwd_works: no shuffle)
DWD_WORKS_SQL = ("SELECT work_id, author_id, COALESCE(category, 'unknown') AS category, title, duration_s "
                 "FROM works")
# DWD -> DWS: plays (2B buckets) join works (B buckets): Spark coalesces the plays' buckets to B; likes join
# on (work_id, dt), a superset of the bucket columns; the result is in dws's B buckets already.
DWS_SQL = (
    "WITH p AS ("
    " SELECT p.work_id, p.dt, COUNT(*) AS plays, COUNT(DISTINCT p.user_id) AS viewers,"
    " SUM(CASE WHEN p.level >= 5 THEN 1 ELSE 0 END) AS vip_plays, SUM(p.play_ms) AS play_ms,"
    " MAX(w.category) AS category, MAX(w.author_id) AS author_id"
    " FROM plays p LEFT JOIN works w ON p.work_id = w.work_id GROUP BY p.work_id, p.dt),"
    " l AS (SELECT work_id, dt, COUNT(*) AS likes FROM likes GROUP BY work_id, dt) "
    "SELECT p.work_id, COALESCE(p.category, 'unknown') AS category, p.author_id, p.plays, p.viewers,"
    " p.vip_plays, p.play_ms, COALESCE(l.likes, 0) AS likes, p.dt "
    "FROM p LEFT JOIN l ON p.work_id = l.work_id AND p.dt = l.dt"
)
# DWS -> DM: the last 7 days per work (a group-by on the bucket column across partitions: no shuffle)
DM_SQL = (
    "SELECT work_id, MAX_BY(category, dt) AS category, MAX_BY(author_id, dt) AS author_id,"
    " SUM(plays) AS plays_7d, SUM(likes) AS likes_7d, SUM(play_ms) AS play_ms_7d, COUNT(*) AS active_days,"
    " '{{ run_day(params, dag_run) }}' AS dt "  # only ever YYYY-MM-DD (run_day parses the date Param)
    "FROM dws GROUP BY work_id"
)
# Broadcasting a small dimension would hide the bucketed join the example shows; big tables never broadcast.
BUCKETED_JOIN_CONF = {"spark.sql.autoBroadcastJoinThreshold": "-1"}


# A day's date: the DM step reads the 6 days before it, and a day's batch becomes the upsert version YYYYMMDD.
DATE_PATTERN = r"^(19[0-9]{2}|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
FIRST_DAY, LAST_DAY = dt.date(1900, 1, 1), dt.date(2999, 12, 31)
# The `day` Param's JSON schema: empty (null or "") is the run's logical date; else a real date in range.
DAY_SCHEMA: dict[str, Any] = {
    "type": ["null", "string"],
    "if": {"type": "string", "minLength": 1},
    "then": {"format": "date", "pattern": DATE_PATTERN},
}
# The Params of the pipeline DAG (dags/lake_ods_to_dm.py; a test keeps the two in step). Airflow takes any other
# key of a run's conf in silence: a misspelt one ("dayy") would run with the default instead.
PARAM_NAMES = ("day", "events_per_day", "buckets", "backfill_days")
# The Params of the maintenance DAG (dags/lake_maintenance.py), checked the same way by its first task.
MAINTENANCE_PARAM_NAMES = ("min_commits", "layout", "target_file_bytes", "retain_hours")
# How far past today (UTC) a day may be: where it is already tomorrow, today's batch is tomorrow's date.
FUTURE_SLACK = dt.timedelta(days=1)


def run_day(params: dict[str, Any], dag_run: Any, offset: int = 0) -> str:
    """The day a run processes: the `day` Param, else (null or empty) the run's logical date (a UI trigger may
    have none: then the day it was queued for), moved by `offset` days; always YYYY-MM-DD."""
    chosen = params.get("day") if params else None
    if chosen:
        day = _date("day", chosen)
    else:
        moment = getattr(dag_run, "logical_date", None) or dag_run.run_after
        day = dt.date(moment.year, moment.month, moment.day)
    return (day + dt.timedelta(days=offset)).isoformat()


def refuse_unknown_params(params: dict[str, Any] | None, dag_run: Any, names: tuple[str, ...]) -> None:
    """Raise ValueError naming the first key of the run's Params or conf that is not one of the DAG's `names`:
    Airflow takes such a key in silence, and a misspelt one ("dayy") would run with the default instead."""
    given = [*(params or {}), *(getattr(dag_run, "conf", None) or {})]
    unknown = sorted({str(k) for k in given} - set(names))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown Param (the run's conf has {unknown}, which this DAG does not take; "
                         f"it would be ignored and the defaults used). Fix: use only {', '.join(names)}.")


def check_params(params: dict[str, Any], dag_run: Any, today: dt.date | None = None, *,
                 names: tuple[str, ...] = PARAM_NAMES) -> dict[str, Any]:
    """Check a run's Params before any task writes; what JSON Schema cannot say: the day (from the Param or
    the logical date) lies in range and not in the future, and no backfill day comes after it. A batch's
    version is its day (YYYYMMDD), so a future day would outrank every real batch up to that date, for good.
    A key that is no Param of the DAG (`names`, by default `PARAM_NAMES`: a misspelt one) is refused. Returns the
    day and the backfill days; raises ValueError naming the Param and the fix."""
    refuse_unknown_params(params, dag_run, names)
    today = today or dt.datetime.now(dt.UTC).date()
    day = _date("day", run_day(params, dag_run))
    if not FIRST_DAY <= day <= LAST_DAY:
        raise ValueError(f"day: {day.isoformat()} is outside {FIRST_DAY.isoformat()}..{LAST_DAY.isoformat()}. "
                         "Fix: give a day in that range (the logical date is used when `day` is empty).")
    if day > today + FUTURE_SLACK:
        raise ValueError(f"day: {day.isoformat()} is in the future (today is {today.isoformat()} UTC): its batch "
                         "(version YYYYMMDD) would outrank every real batch until then. Fix: process a day that "
                         "has happened.")
    backfill = []
    for i, raw in enumerate(params.get("backfill_days") or []):
        when = _date(f"backfill_days[{i}]", raw)
        if when > day:
            raise ValueError(f"backfill_days[{i}]: {when.isoformat()} is after the run's day {day.isoformat()}: its "
                             "version would outrank every later daily batch. Fix: backfill only days up to "
                             f"{day.isoformat()}, or run that day itself.")
        if when < FIRST_DAY:
            raise ValueError(f"backfill_days[{i}]: {when.isoformat()} is before {FIRST_DAY.isoformat()}. "
                             "Fix: give a later day.")
        backfill.append(when.isoformat())
    return {"day": day.isoformat(), "backfill_days": sorted(set(backfill) - {day.isoformat()})}


def _date(name: str, value: Any) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a date. Fix: give YYYY-MM-DD.") from None
