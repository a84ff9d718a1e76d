"""Clustering plans from crafted file sizes: partition selection, group filling, output counts, limits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from airflow_lake.lake.clustering import planner
from airflow_lake.lake.clustering.strategy import PlanStrategy
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.spec.strict import SpecReader
from airflow_lake.lake.spec.table_spec import TableSpec

MB = 1024 * 1024
SPEC = TableSpec.from_dict({"schema": "x BIGINT, dt DATE", "partition_by": ["dt"]})
DAYS = [f"2024-01-{d:02d}" for d in range(1, 31)]


def strategy(**raw: Any) -> PlanStrategy:
    """A strategy read from JSON as the operation reads it (so the checks run too)."""
    reader = SpecReader(raw, "schedule_clustering")
    out = PlanStrategy.read(reader, SPEC)
    reader.done()
    return out


def f(name: str, size_mb: float, day: str = "2024-01-01", bucket: int | None = None,
      bucketing: str | None = None) -> DataFile:
    """A file of `size_mb` MiB in partition dt=`day`."""
    return DataFile(path=f"dt={day}/{name}.parquet", partition={"dt": day}, rows=10, bytes=int(size_mb * MB),
                    bucket=bucket, bucketing=bucketing)


def names(groups: list[Any]) -> list[list[str]]:
    return [[p.rsplit("/", 1)[1].removesuffix(".parquet") for p in g.files] for g in groups]


def parts(values: list[str]) -> list[Mapping[str, str | None]]:
    return [{"dt": v} for v in values]


# -- partition selection ---------------------------------------------------------------------------------
def test_filter_none_takes_every_partition_newest_first() -> None:
    chosen = planner.select_partitions(SPEC, parts(["2024-01-02", "2024-01-10", "2024-01-01"]), strategy())
    assert [p["dt"] for p in chosen] == ["2024-01-10", "2024-01-02", "2024-01-01"]


def test_recent_days_skips_from_latest_then_keeps_lookback() -> None:
    existing = parts(DAYS[:10])
    chosen = planner.select_partitions(SPEC, existing, strategy(filter_mode="RECENT_DAYS", lookback_partitions=3,
                                                                skip_from_latest=2))
    assert [p["dt"] for p in chosen] == ["2024-01-08", "2024-01-07", "2024-01-06"]
    default = planner.select_partitions(SPEC, existing, strategy(filter_mode="RECENT_DAYS"))
    assert [p["dt"] for p in default] == ["2024-01-10", "2024-01-09"]  # Hudi's lookback 2, skip 0


def test_selected_partitions_is_inclusive_and_typed() -> None:
    chosen = planner.select_partitions(SPEC, parts(DAYS[:10]), strategy(
        filter_mode="SELECTED_PARTITIONS", begin_partition={"dt": "2024-01-03"}, end_partition={"dt": "2024-01-05"}))
    assert sorted(p["dt"] for p in chosen) == ["2024-01-03", "2024-01-04", "2024-01-05"]
    open_end = planner.select_partitions(SPEC, parts(DAYS[:10]), strategy(
        filter_mode="SELECTED_PARTITIONS", begin_partition={"dt": "2024-01-09"}))
    assert sorted(p["dt"] for p in open_end) == ["2024-01-09", "2024-01-10"]


def test_day_rolling_takes_partitions_whose_index_mod_24_is_the_hour() -> None:
    existing = parts(DAYS)  # 30 partitions: indexes 0..29
    for hour, expected in ((0, ["2024-01-01", "2024-01-25"]), (5, ["2024-01-06", "2024-01-30"]),
                           (23, ["2024-01-24"])):
        chosen = planner.select_partitions(SPEC, existing, strategy(filter_mode="DAY_ROLLING", hour=hour))
        assert sorted(p["dt"] for p in chosen) == expected
    covered = [p["dt"] for h in range(24) for p in planner.select_partitions(
        SPEC, existing, strategy(filter_mode="DAY_ROLLING", hour=h))]
    assert sorted(covered) == DAYS  # a day of hourly runs covers every partition once


def test_explicit_list_wins_over_regex_and_mode() -> None:
    chosen = planner.select_partitions(SPEC, parts(DAYS[:5]), strategy(
        partitions=[{"dt": "2024-01-02"}, {"dt": "2024-02-01"}], partition_regex="nothing", filter_mode="RECENT_DAYS"))
    assert [p["dt"] for p in chosen] == ["2024-01-02"]  # the absent one is left out


def test_regex_is_a_full_match_on_the_partition_path() -> None:
    chosen = planner.select_partitions(SPEC, parts(["2024-01-01", "2024-01-11", "2024-02-01"]),
                                       strategy(partition_regex=r"dt=2024-01-.1"))
    assert sorted(p["dt"] for p in chosen) == ["2024-01-01", "2024-01-11"]
    assert planner.select_partitions(SPEC, parts(["2024-01-01"]), strategy(partition_regex="2024")) == []


@pytest.mark.parametrize(("raw", "field"), [
    ({"filter_mode": "recent"}, "filter_mode"),
    ({"filter_mode": "SELECTED_PARTITIONS"}, "filter_mode"),
    ({"filter_mode": "DAY_ROLLING"}, "hour"),
    ({"filter_mode": "DAY_ROLLING", "hour": 24}, "hour"),
    ({"begin_partition": {"dt": "2024-01-01"}}, "begin_partition"),
    ({"partition_regex": "(unclosed"}, "partition_regex"),
    ({"partitions": [{"dt": "not a date"}]}, "partitions[0].dt"),
    ({"partitions": [{"dt": "../escape"}]}, "partitions[0].dt"),
    ({"max_groups": 0}, "max_groups"),
    ({"max_groups": 2.5}, "max_groups"),
    ({"target_file_max_bytes": "1GB"}, "target_file_max_bytes"),
    ({"min_commits": -1}, "min_commits"),
    ({"single_group_clustering": "yes"}, "single_group_clustering"),
])
def test_bad_strategy_fields_are_refused_with_their_name(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(LakeSpecError) as err:
        strategy(**raw)
    assert err.value.field == field


# -- groups ----------------------------------------------------------------------------------------------
def test_small_files_fill_groups_largest_first_up_to_max_bytes() -> None:
    files = [f("a", 100), f("b", 90), f("c", 80), f("d", 50), f("e", 10), f("big", 400)]
    groups = planner.build_groups(SPEC, files, parts(["2024-01-01"]), strategy(
        small_file_limit_bytes=300 * MB, max_bytes_per_group=200 * MB, target_file_max_bytes=100 * MB))
    assert names(groups) == [["a", "b"], ["c", "d", "e"]]  # 400 MB is not small; 100+90 <= 200 < 100+90+80
    assert [g.bytes for g in groups] == [190 * MB, 140 * MB]
    assert [g.output_files for g in groups] == [2, 2]  # ceil(190 / 100), ceil(140 / 100)
    assert [g.rows for g in groups] == [20, 30]


def test_output_file_count_is_ceil_of_bytes_over_target() -> None:
    assert planner.output_files(1, 1024) == 1
    assert planner.output_files(1024, 1024) == 1
    assert planner.output_files(1025, 1024) == 2
    assert planner.output_files(0, 1024) == 1


def test_max_groups_stops_planning_across_partitions() -> None:
    files = [f(f"{d}-{i}", 10, d) for d in DAYS[:4] for i in range(4)]
    groups = planner.build_groups(SPEC, files, planner.select_partitions(SPEC, parts(DAYS[:4]), strategy()),
                                  strategy(max_bytes_per_group=20 * MB, max_groups=3))
    assert len(groups) == 3
    assert {g.partition["dt"] for g in groups} == {"2024-01-04", "2024-01-03"}  # newest partitions first


def test_a_last_group_of_one_file_is_dropped_unless_single_group_or_sorted() -> None:
    files = [f("a", 100), f("b", 100), f("c", 100)]
    settings = {"max_bytes_per_group": 200 * MB}
    plain = planner.build_groups(SPEC, files, parts(["2024-01-01"]), strategy(**settings))
    assert names(plain) == [["a", "b"]]  # "c" alone gains nothing from a rewrite
    single = planner.build_groups(SPEC, files, parts(["2024-01-01"]),
                                  strategy(**settings, single_group_clustering=True))
    assert names(single) == [["a", "b"], ["c"]]
    sorted_ = planner.build_groups(SPEC, files, parts(["2024-01-01"]), strategy(**settings), sorts=True)
    assert names(sorted_) == [["a", "b"], ["c"]]  # sorting one file helps
    again = planner.build_groups(SPEC, files, parts(["2024-01-01"]), strategy(**settings), sorts=True,
                                 made_by_clustering=lambda d: d.path.endswith("c.parquet"))
    assert names(again) == [["a", "b"]]  # ... but not a file a clustering already wrote
    lone = planner.build_groups(SPEC, [f("only", 5)], parts(["2024-01-01"]), strategy())
    assert lone == []


def test_files_under_a_pending_plan_are_never_planned_twice() -> None:
    files = [f("a", 10), f("b", 10), f("c", 10)]
    groups = planner.build_groups(SPEC, files, parts(["2024-01-01"]), strategy(),
                                  excluded=frozenset({"dt=2024-01-01/a.parquet"}))
    assert names(groups) == [["b", "c"]]


def test_bucketed_partitions_group_whole_buckets_with_two_or_more_files() -> None:
    spec = TableSpec.from_dict({"schema": "x BIGINT, dt DATE", "partition_by": ["dt"],
                                "bucket": {"columns": ["x"], "count": 4}})
    key = "murmur3:4:x"
    files = [f("b0a", 10, bucket=0, bucketing=key), f("b0b", 20, bucket=0, bucketing=key),
             f("b1a", 400, bucket=1, bucketing=key), f("b1b", 5, bucket=1, bucketing=key),
             f("b2", 10, bucket=2, bucketing=key),  # one file: nothing to merge
             f("b3a", 500, bucket=3, bucketing=key), f("b3b", 500, bucket=3, bucketing=key),  # no small file
             f("old", 1, bucket=0, bucketing="murmur3:8:x"), f("old2", 1, bucket=0, bucketing="murmur3:8:x")]
    groups = planner.build_groups(spec, files, parts(["2024-01-01"]), strategy(max_bytes_per_group=1000 * MB))
    assert names(groups) == [["b0a", "b0b", "b1a", "b1b"]]  # bucket 1 whole, its big file too
    assert groups[0].buckets == (0, 1) and groups[0].output_files == 2
    split = planner.build_groups(spec, files, parts(["2024-01-01"]), strategy(max_bytes_per_group=100 * MB))
    assert [g.buckets for g in split] == [(1,), (0,)]  # a bucket is never split over groups


def test_partitions_before_from_partition_are_grouped_as_plain_files() -> None:
    spec = TableSpec.from_dict({"schema": "x BIGINT, dt DATE", "partition_by": ["dt"],
                                "bucket": {"columns": ["x"], "count": 4, "from_partition": {"dt": "2024-01-02"}}})
    assert spec.bucket_count_for({"dt": "2024-01-01"}) is None
    assert spec.bucket_count_for({"dt": "2024-01-02"}) == 4
    groups = planner.build_groups(spec, [f("a", 1), f("b", 1)], parts(["2024-01-01"]), strategy())
    assert names(groups) == [["a", "b"]] and groups[0].buckets == ()


def test_a_group_never_becomes_more_files_than_it_has_rows() -> None:
    assert planner.output_files(10 * MB, 1024, rows=40) == 40
    assert planner.output_files(10 * MB, 1024, rows=0) == 1
    files = [f("a", 1), f("b", 1)]  # 10 rows each
    groups = planner.build_groups(SPEC, files, parts(["2024-01-01"]), strategy(target_file_max_bytes=1024))
    assert [g.output_files for g in groups] == [20]
