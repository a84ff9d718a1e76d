"""An independent computation (pandas) of the example pipeline's DWS and DM tables from the generated inputs.

It follows the runs in order, as the DAG does: each run upserts its dimension batches (the day's and any
backfill days'), merges every batch so far in version order, then builds the day's DWD/DWS rows and the
7-day DM rows from the DWS days built so far.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import pandas as pd

from airflow_lake.datagen import video


def merged_works(days: Sequence[str], sizes: video.Sizes) -> pd.DataFrame:
    """The works dimension over the batches of `days`, in version order, rows in file order."""
    frames = [video.works_batch(d, sizes).to_pandas().assign(_v=video.version_of(d)) for d in days]
    rows = pd.concat(frames, ignore_index=True).reset_index(names="_row").sort_values(["_v", "_row"])
    out = {}
    for work_id, group in rows.groupby("work_id", sort=True):
        titles = [t for t in group["title"] if t != "null"]
        last = group.iloc[-1]
        out[work_id] = {"author_id": last["author_id"], "category": last["category"],
                        # last_non_null: the last title that is not "null"; with none, the last one
                        "title": titles[-1] if titles else last["title"], "duration_s": last["duration_s"],
                        "edits": int(group["edits"].sum())}
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("work_id").reset_index()


def merged_users(days: Sequence[str], sizes: video.Sizes) -> pd.DataFrame:
    """The users dimension over the batches of `days`: level the highest, the rest the last."""
    frames = [video.users_batch(d, sizes).to_pandas().assign(_v=video.version_of(d)) for d in days]
    rows = pd.concat(frames, ignore_index=True).reset_index(names="_row").sort_values(["_v", "_row"])
    last = rows.groupby("user_id").last()[["region", "followers"]]
    return last.join(rows.groupby("user_id")["level"].max()).reset_index()


def dws_day(day: str, sizes: video.Sizes, works: pd.DataFrame, users: pd.DataFrame) -> pd.DataFrame:
    """The day's per-work aggregates, as `build_dws_work_daily` computes them."""
    events = video.day_events(day, sizes).to_pandas()
    plays = events[(events.event_type == "play") & events.work_id.notna() & (events.play_ms >= 0)]
    plays = plays.merge(users[["user_id", "level"]], on="user_id", how="left")
    likes = events[(events.event_type == "like") & events.work_id.notna()]
    agg = plays.assign(vip=(plays.level >= 5).astype("int64")).groupby("work_id").agg(
        plays=("event_id", "size"), viewers=("user_id", "nunique"), vip_plays=("vip", "sum"),
        play_ms=("play_ms", "sum")).reset_index()
    agg = agg.merge(likes.groupby("work_id").size().rename("likes").reset_index(), on="work_id", how="left")
    agg = agg.merge(works[["work_id", "category", "author_id"]], on="work_id", how="left")
    agg["likes"] = agg["likes"].fillna(0).astype("int64")
    agg["category"] = agg["category"].fillna("unknown")
    agg["work_id"] = agg["work_id"].astype("int64")
    agg["dt"] = day
    return agg


def pipeline(runs: Sequence[tuple[str, Sequence[str]]], sizes: video.Sizes,
             events: Mapping[str, int] | None = None) -> dict[str, pd.DataFrame]:
    """DWS and DM tables after `runs` (day, backfill days) in order: {"dws_work_daily": ..., "dm_work_7d": ...}.
    `events` overrides the events per day of some days (a run triggered with another `events_per_day`)."""
    batches: list[str] = []
    dws: dict[str, pd.DataFrame] = {}
    dm: dict[str, pd.DataFrame] = {}
    for day, backfill in runs:
        batches = sorted({*batches, day, *backfill})
        works, users = merged_works(batches, sizes), merged_users(batches, sizes)
        day_sizes = video.Sizes((events or {}).get(day, sizes.events), sizes.works, sizes.users)
        dws[day] = dws_day(day, day_sizes, works, users)
        start = (dt.date.fromisoformat(day) - dt.timedelta(days=6)).isoformat()
        window = pd.concat([f for d, f in dws.items() if start <= d <= day]).sort_values("dt")
        grouped = window.groupby("work_id")
        dm[day] = pd.DataFrame({
            "category": grouped["category"].last(), "author_id": grouped["author_id"].last(),
            "plays_7d": grouped["plays"].sum(), "likes_7d": grouped["likes"].sum(),
            "play_ms_7d": grouped["play_ms"].sum(), "active_days": grouped.size(),
        }).reset_index().assign(dt=day)
    return {"dws_work_daily": pd.concat(dws.values(), ignore_index=True),
            "dm_work_7d": pd.concat(dm.values(), ignore_index=True)}
