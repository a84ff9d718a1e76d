"""The short-video sample data: deterministic per day, the shapes the example pipeline relies on."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import s3fs

from airflow_lake.datagen import video
from tests.s3_server import S3Server

SIZES = video.Sizes(events=5000, works=300, users=800)


def test_a_days_data_is_the_same_every_time_and_differs_between_days() -> None:
    assert video.day_events("2024-01-01", SIZES).equals(video.day_events("2024-01-01", SIZES))
    assert not video.day_events("2024-01-01", SIZES).equals(video.day_events("2024-01-02", SIZES))
    assert video.works_batch("2024-01-01", SIZES).equals(video.works_batch("2024-01-01", SIZES))
    assert video.version_of("2024-01-02") == 20240102


def test_events_have_plays_likes_skew_and_bad_rows_for_dwd_to_drop() -> None:
    events = video.day_events("2024-01-01", SIZES)
    assert events.num_rows == 5000 and events.schema.names == ["event_id", "event_type", "work_id", "user_id",
                                                                "play_ms", "event_ts", "dt"]
    kinds = events.column("event_type").to_pylist()
    assert 0.1 < kinds.count("like") / len(kinds) < 0.3
    assert 0 < events.column("work_id").null_count < 150  # lost work ids
    plays = events.filter(pc.equal(events.column("event_type"), "play"))
    assert 0 < pc.sum(pc.less(plays.column("play_ms"), 0)).as_py() < 150  # broken play times
    counts = pc.value_counts(events.column("work_id").drop_null()).to_pylist()
    top = max(c["counts"] for c in counts)
    assert top > 10 * len(events) / SIZES.works  # a few works get most plays
    assert set(pc.unique(events.column("dt")).to_pylist()) == {"2024-01-01"}


def test_dimension_batches_repeat_keys_and_carry_null_titles() -> None:
    works = video.works_batch("2024-01-01", SIZES)
    ids = works.column("work_id").to_pylist()
    assert len(ids) > len(set(ids)) and set(ids) <= set(range(1, SIZES.works + 1))
    assert "null" in works.column("title").to_pylist()
    users = video.users_batch("2024-01-01", SIZES)
    assert set(users.column("level").to_pylist()) <= set(range(1, 8))


def test_land_day_writes_small_event_files_and_versioned_batches(tmp_path: Path) -> None:
    landed = video.land_day(tmp_path, "2024-01-01", SIZES)
    assert landed == {"events": f"{tmp_path}/events/dt=2024-01-01", "works": f"{tmp_path}/works/v=20240101",
                      "users": f"{tmp_path}/users/v=20240101"}
    assert len(list(Path(landed["events"]).glob("*.parquet"))) == video.FILES_PER_DAY
    assert pq.read_table(landed["events"]).num_rows == 5000
    only = video.land_day(tmp_path / "b", "2024-01-02", SIZES, parts=("works",))
    assert list(only) == ["works"] and not (tmp_path / "b" / "events").exists()
    with pytest.raises(ValueError):
        video.land_day(tmp_path, "../../etc", SIZES)
    with pytest.raises(ValueError, match=r"Sizes\.events"):
        video.Sizes(events=0)


def test_land_day_on_an_object_store(s3_server: S3Server, s3_root: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: the example pipeline's landing directory on S3 (`AIRFLOW_LAKE_LANDING=s3://...`, next to a lake
    on S3). pathlib folded `s3://bucket/...` into `s3:/bucket/...`: pyarrow refused it ("Missing bucket name in S3
    URI") after a local directory `s3:` had been made. Now the files are objects on the store, at the URLs
    returned, and hold what a local landing holds."""
    monkeypatch.chdir(tmp_path)  # where the old code made its local `s3:` directory
    landed = video.land_day(f"{s3_root}/landing/", "2024-01-01", SIZES)
    assert landed == {"events": f"{s3_root}/landing/events/dt=2024-01-01",
                      "works": f"{s3_root}/landing/works/v=20240101", "users": f"{s3_root}/landing/users/v=20240101"}
    assert not list(tmp_path.iterdir())  # nothing local
    local = video.land_day(tmp_path / "local", "2024-01-01", SIZES)
    fs = s3fs.S3FileSystem()
    for part, url in landed.items():
        keys = sorted(fs.ls(url))
        assert len(keys) == (video.FILES_PER_DAY if part == "events" else 1), keys
        on_store = pq.read_table(url.removeprefix("s3://"), filesystem=fs)
        assert on_store.equals(pq.read_table(local[part])), part
