"""Sample data of a short-video platform (seed 004), for the example ODS -> DM pipeline.

Per day (deterministic by day and seed, so a rerun lands the same files):

- `events/dt=YYYY-MM-DD/part-N.parquet`: play and like events keyed by `work_id` and `user_id`, a few popular
  works getting most plays, arriving in several small files; some rows are bad (no work id, negative play
  time) for the DWD step to drop.
- `works/v=YYYYMMDD/works.parquet`: the works dimension's updates of that day, upserted with version YYYYMMDD.
  A batch holds a random part of the works (a work may repeat within it: its rows combine in file order);
  titles are sometimes the string "null" (kept out by `last_non_null`), `edits` counts the updates (summed).
  A day's batch can land late (a backfill) and still merges in version order.
- `users/v=YYYYMMDD/users.parquet`: the users dimension's updates (`level` merged with `max`).

    python -m airflow_lake.datagen.video OUT_DIR --days 2024-01-01 2024-01-02 --events 20000
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CATEGORIES = ["music", "dance", "food", "travel", "games", "pets", "sports", "comedy"]
REGIONS = ["north", "south", "east", "west", "central"]
FILES_PER_DAY = 4  # events arrive in small batches: the ODS table gets small files
PARTS = ("events", "works", "users")


@dataclass(frozen=True)
class Sizes:
    """How much data a day has: events, and the works and users they refer to."""

    events: int = 20_000
    works: int = 2_000
    users: int = 5_000

    def __post_init__(self) -> None:
        for name in ("events", "works", "users"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"Sizes.{name} must be at least 1, got {getattr(self, name)!r}.")


def version_of(day: str) -> int:
    """The upsert version of a day's dimension batch: YYYYMMDD as an integer."""
    return int(dt.date.fromisoformat(day).strftime("%Y%m%d"))


def _rng(day: str, stream: int, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, version_of(day), stream])


def day_events(day: str, sizes: Sizes = Sizes(), seed: int = 4) -> pa.Table:
    """One day of play and like events (about one like per five plays)."""
    rng = _rng(day, 0, seed)
    n = sizes.events
    # popularity: a Zipf-like draw, so a few works get most plays (skew the buckets must live with)
    work = (rng.zipf(1.3, n) - 1) % sizes.works + 1
    user = rng.integers(1, sizes.users + 1, n)
    kind = np.where(rng.random(n) < 0.2, "like", "play")
    play_ms = np.where(kind == "play", rng.integers(500, 60_000, n), 0)
    work_valid = rng.random(n) >= 0.01  # 1% of events lost their work id upstream
    play_ms = np.where(rng.random(n) < 0.01, -1, play_ms)  # and 1% carry a broken play time
    start = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
    ts = np.sort(rng.integers(0, 86_400_000_000, n)) + int(start.timestamp()) * 1_000_000
    return pa.table({
        "event_id": pa.array(version_of(day) * 100_000_000 + np.arange(n), pa.int64()),
        "event_type": pa.array(kind.tolist(), pa.string()),
        "work_id": pa.array(work, pa.int64(), mask=~work_valid),
        "user_id": pa.array(user, pa.int64()),
        "play_ms": pa.array(play_ms, pa.int64(), mask=kind != "play"),
        "event_ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "dt": pa.array([day] * n, pa.string()),
    })


def works_batch(day: str, sizes: Sizes = Sizes(), seed: int = 4) -> pa.Table:
    """The works updates of a day: about half of all works (the 1% most played every day), 5% of them twice
    (combined in file order)."""
    rng = _rng(day, 1, seed)
    hot = np.arange(sizes.works) < max(1, sizes.works // 100)  # the most played works are edited every day
    ids = np.flatnonzero((rng.random(sizes.works) < 0.5) | hot) + 1
    ids = np.concatenate([ids, rng.choice(ids, max(1, len(ids) // 20))]) if len(ids) else np.array([1])
    n = len(ids)
    titles = np.array([f"work {w} take {t}" for w, t in zip(ids, rng.integers(1, 100, n), strict=True)], object)
    titles[rng.random(n) < 0.2] = "null"  # an update without a title: keep the previous one
    return pa.table({
        "work_id": pa.array(ids, pa.int64()),
        "author_id": pa.array(ids % 97 + 1, pa.int64()),  # a work's author never changes
        "category": pa.array(np.array(CATEGORIES, object)[rng.integers(0, len(CATEGORIES), n)].tolist()),
        "title": pa.array(titles.tolist(), pa.string()),
        "duration_s": pa.array(rng.integers(5, 600, n), pa.int32()),
        "edits": pa.array(np.ones(n, np.int64)),
    })


def users_batch(day: str, sizes: Sizes = Sizes(), seed: int = 4) -> pa.Table:
    """The users updates of a day: about a third of all users."""
    rng = _rng(day, 2, seed)
    ids = np.flatnonzero(rng.random(sizes.users) < 1 / 3) + 1
    n = len(ids)
    return pa.table({
        "user_id": pa.array(ids, pa.int64()),
        "region": pa.array(np.array(REGIONS, object)[rng.integers(0, len(REGIONS), n)].tolist(), pa.string()),
        "level": pa.array(rng.integers(1, 8, n), pa.int32()),
        "followers": pa.array(rng.integers(0, 100_000, n), pa.int64()),
    })


def land_day(directory: str | Path, day: str, sizes: Sizes = Sizes(), seed: int = 4,
             parts: tuple[str, ...] = PARTS) -> dict[str, str]:
    """Write a day's events, works and users batches (those in `parts`) under `directory`, a local path or an
    object-store URL (`s3://bucket/landing`: written through the store's fsspec library, as tables are); returns
    their directories by part, spelt as `directory` is."""
    day = dt.date.fromisoformat(day).isoformat()  # a day, nothing else: it becomes a path
    root = str(directory).rstrip("/") or "/"
    write = _writer(root)
    out = {}
    if "events" in parts:
        events = f"{root}/events/dt={day}"
        table = day_events(day, sizes, seed)
        step = -(-table.num_rows // FILES_PER_DAY)
        for i in range(FILES_PER_DAY):
            write(table.slice(i * step, step), f"{events}/part-{i}.parquet")
        out["events"] = events
    for name, make in (("works", works_batch), ("users", users_batch)):
        if name not in parts:
            continue
        target = f"{root}/{name}/v={version_of(day)}"
        write(make(day, sizes, seed), f"{target}/{name}.parquet")
        out[name] = target
    return out


def _writer(root: str) -> Callable[[pa.Table, str], None]:
    """How to write a Parquet file under `root`: on local disk (directories made), or under a URL through its
    fsspec file system (`stores.open_fs`, as tables are opened; pathlib would fold `s3://b` into a local
    directory `s3:/b`)."""
    from airflow_lake.lake.format import stores

    if not stores.scheme_of(root):
        def write_local(table: pa.Table, path: str) -> None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path)
        return write_local
    fs, base = stores.open_fs(root)

    def write_store(table: pa.Table, path: str) -> None:
        with fs.open(base + path[len(root):], "wb") as out:  # one object, written once
            pq.write_table(table, out)
    return write_store


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--days", nargs="+", required=True, help="days as YYYY-MM-DD")
    parser.add_argument("--events", type=int, default=Sizes.events)
    parser.add_argument("--works", type=int, default=Sizes.works)
    parser.add_argument("--users", type=int, default=Sizes.users)
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args(argv)
    sizes = Sizes(args.events, args.works, args.users)
    for day in args.days:
        print(day, land_day(args.directory, day, sizes, args.seed))


if __name__ == "__main__":
    main()
