"""schedule_clustering on the timeline (no Spark): the commit threshold, pending plans, retries, rollback."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from airflow_lake.jobs.runner import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.clustering.plan import EXECUTE_OPERATION
from airflow_lake.lake.clustering.timeline import commits_since, pending_plans
from airflow_lake.lake.errors import LakeCommitConflict, LakeSnapshotNotFound, LakeSpecError
from airflow_lake.lake.format import instants
from airflow_lake.lake.format.log import COMPLETES
from tests.lake.lake_core_helpers import append, data_file, make_table

MB = 1024 * 1024


def schedule(path: str, **spec: Any) -> dict[str, Any]:
    return run(None, "schedule_clustering", {"table": path, **spec})


def fake_execute(table: LakeTable, plan_id: str) -> None:
    """Complete a plan the way execute_clustering does, with synthetic output (no Spark)."""
    plan = next(p for p in pending_plans(table) if p.id == plan_id).plan
    assert plan is not None
    txn = table.begin("replace", EXECUTE_OPERATION, metadata={COMPLETES: plan_id})
    txn.commit(added=[data_file(txn, "a", size=MB)], removed=plan.files)
    instants.remove_pending(table.storage, plan_id)


def test_plans_only_after_min_commits_since_the_last_clustering(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(3):
        append(table, "a", size=MB)
    first = schedule(table_path)
    assert first["plan_id"] is None and first["scheduled"] is False
    assert "3 commit(s)" in first["reason"] and "min_commits=4" in first["reason"]
    assert instants.pending(table.storage) == []  # nothing stored
    append(table, "a", size=MB)
    second = schedule(table_path)
    assert second["scheduled"] and second["commits_since_last_clustering"] == 4
    assert second["input_files"] == 4 and second["groups"] == 1 and second["output_files"] == 1
    fake_execute(table, second["plan_id"])
    assert table.is_finished(second["plan_id"])  # the plan's id resolves to the commit that completed it
    assert commits_since(table).count == 0
    assert schedule(table_path)["reason"].startswith("0 commit(s)")
    for _ in range(2):
        append(table, "a", size=MB)
    assert schedule(table_path, min_commits=2)["scheduled"]


def test_commit_counts_since_an_instant_or_the_start_and_by_action(table_path: str) -> None:
    table = make_table(table_path)
    entries = [append(table, "a")[0] for _ in range(5)]
    assert commits_since(table, "start").count == 5
    since = commits_since(table, entries[1].instant)
    assert since.count == 3 and since.instants == tuple(e.instant for e in entries[2:])
    assert commits_since(table, "start", actions=["create"]).count == 1  # only data writes count by default
    with pytest.raises(LakeSnapshotNotFound):
        commits_since(table, "20200101000000000")


def test_files_under_a_pending_plan_are_not_planned_again(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", size=MB)
    first = schedule(table_path)
    for _ in range(2):
        append(table, "a", size=MB)
    second = schedule(table_path, min_commits=0)
    plans = {p.id: p.plan for p in pending_plans(table)}
    assert set(plans) == {first["plan_id"], second["plan_id"]}
    a, b = (plans[first["plan_id"]], plans[second["plan_id"]])
    assert a is not None and b is not None
    assert not set(a.files) & set(b.files) and len(b.files) == 2
    assert second["files_under_pending_plans"] == 4
    assert schedule(table_path, min_commits=0)["plan_id"] is None  # every small file is under a plan


def test_a_retry_returns_the_plan_its_first_try_stored(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", size=MB)
    first = schedule(table_path, request_id="dag/plan/run1/-1")
    again = schedule(table_path, request_id="dag/plan/run1/-1")
    assert again["plan_id"] == first["plan_id"] and again["already_scheduled"]
    assert len(pending_plans(table)) == 1


def test_plans_survive_recovery_and_a_rolled_back_plan_frees_its_files(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", size=MB)
    plan_id = schedule(table_path)["plan_id"]
    table.rollback_pending()  # rolls back dead writers; a plan waiting to run is not one
    assert [p.id for p in pending_plans(table)] == [plan_id]
    table.rollback_pending([plan_id])
    assert pending_plans(table) == [] and plan_id in table.state().rolled_back
    assert schedule(table_path, min_commits=0)["input_files"] == 4


def test_a_plan_records_its_layout_and_strategy(table_path: str) -> None:
    make_table(table_path, schema="id BIGINT, v DOUBLE, s STRING, dt STRING")
    table = LakeTable.open(table_path)
    for _ in range(4):
        append(table, "a", size=MB)
    out = schedule(table_path, layout="HILBERT", sort_columns=["V", "s"], curve="DIRECT", max_groups=7)
    plan = pending_plans(table)[0].plan
    assert plan is not None
    assert plan.layout.columns == ("v", "s")  # spelled as the table spells them
    assert plan.layout.kind == "HILBERT" and plan.layout.curve == "DIRECT"
    assert plan.strategy["max_groups"] == 7
    assert out["layout"] == "HILBERT(v, s; DIRECT)"


@pytest.mark.parametrize(("spec", "field"), [
    ({"sort_columns": ["nope"]}, "sort_columns"),
    ({"layout": "ZORDER"}, "sort_columns"),
    ({"layout": "ZORDER", "sort_columns": ["dt", "id"]}, "sort_columns"),
    ({"layout": "ZORDER", "sort_columns": ["id", "ID"]}, "sort_columns"),
    ({"layout": "zcurve", "sort_columns": ["id"]}, "layout"),
    ({"layout": "ZORDER", "sort_columns": ["id", "b"], "curve": "DIRECT"}, "sort_columns"),  # binary
    ({"curve": "RANDOM"}, "curve"),
    ({"sample_ranges": 1}, "sample_ranges"),
    ({"sample_ranges": 10**9}, "sample_ranges"),
    ({"min_commitz": 1}, "min_commitz"),
])
def test_bad_layouts_and_fields_fail_before_anything_is_stored(table_path: str, spec: dict[str, Any],
                                                               field: str) -> None:
    table = make_table(table_path, schema="id BIGINT, b BINARY, dt STRING")
    for _ in range(4):
        append(table, "a", size=MB)
    with pytest.raises(LakeSpecError) as err:
        schedule(table_path, **spec)
    assert err.value.field == field
    assert instants.pending(table.storage) == []


def test_a_curve_on_buckets_sorted_by_other_columns_is_refused(table_path: str) -> None:
    make_table(table_path, schema="id BIGINT, v BIGINT, dt STRING",
               bucket={"columns": ["id"], "count": 4, "sort_columns": ["id"]})
    with pytest.raises(LakeSpecError, match="buckets are sorted by"):
        schedule(table_path, layout="ZORDER", sort_columns=["id", "v"])
    with pytest.raises(LakeSpecError, match="not \\['v'\\]"):
        schedule(table_path, layout="LINEAR", sort_columns=["v"])


def test_a_held_schedule_lock_makes_a_second_scheduler_wait_then_give_up(table_path: str, monkeypatch: Any
                                                                         ) -> None:
    from airflow_lake.lake.clustering import schedule as schedule_module

    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", size=MB)
    monkeypatch.setattr(schedule_module, "LOCK_WAIT_SECONDS", 0.3)
    assert table.storage.create_json(schedule_module.LOCK, {"at": 0})
    with pytest.raises(LakeCommitConflict, match="holds"):
        schedule(table_path)
    monkeypatch.setattr(schedule_module, "LOCK_STALE_SECONDS", 0.0)  # the holder died long ago
    assert schedule(table_path)["scheduled"]
    assert not table.storage.exists(schedule_module.LOCK)


def test_a_live_schedule_lock_whose_stamp_looks_old_is_watched_not_broken(table_path: str, monkeypatch: Any
                                                                            ) -> None:
    """A lock stamped an hour before this process's clock (the store's clock, or this one, is off): the second
    scheduler watches it rather than breaking it at once, and gets it when the live holder lets go."""
    from airflow_lake.lake.clustering import schedule as schedule_module

    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", size=MB)
    monkeypatch.setattr(schedule_module, "LOCK_WAIT_SECONDS", 0.1)
    assert table.storage.create_json(schedule_module.LOCK, {"at": 0})
    old = time.time() - 3600
    os.utime(table.storage.path(schedule_module.LOCK), (old, old))
    still_held: list[bool] = []
    looked = threading.Event()
    storage_type = type(table.storage)
    for name in ("touched", "mtime"):  # (how the scheduler looks at the lock: now, and before)
        original = getattr(storage_type, name)

        def spy(storage: Any, rel: str, _original: Any = original) -> Any:
            if rel == schedule_module.LOCK:
                looked.set()
            return _original(storage, rel)

        monkeypatch.setattr(storage_type, name, spy)

    def release() -> None:  # the holder finishes, a while after the scheduler first looked: is its lock its own?
        looked.wait(timeout=60)
        time.sleep(0.3)
        try:
            still_held.append(table.storage.read_json(schedule_module.LOCK) == {"at": 0})
        except FileNotFoundError:
            still_held.append(False)
        if still_held[-1]:
            table.storage.delete(schedule_module.LOCK)

    holder = threading.Thread(target=release)
    holder.start()
    assert schedule(table_path)["scheduled"]
    holder.join()
    assert still_held == [True]  # (broken at once by its stamp before, while its holder still worked)


def test_a_tiny_target_file_size_is_refused_and_no_group_plans_more_files_than_rows(table_path: str) -> None:
    table = make_table(table_path)
    for _ in range(4):
        append(table, "a", rows=10, size=MB)  # 40 rows in 4 MiB
    with pytest.raises(LakeSpecError) as err:
        schedule(table_path, target_file_max_bytes=1)  # planned 5,449 files for 40 rows
    assert err.value.field == "target_file_max_bytes" and "at least 1024" in str(err.value)
    assert instants.pending(table.storage) == []
    out = schedule(table_path, target_file_max_bytes=1024)  # 4 MiB / 1 KiB = 4,096 files, but 40 rows
    assert out["output_files"] == 40


def test_a_backtracking_partition_regex_is_matched_in_bounded_time(table_path: str) -> None:
    import time

    table = make_table(table_path)
    append(table, "a" * 30)  # Python's re needs ~2^30 steps to reject "dt=aaa...a" for "dt=(a|a)*c"
    for _ in range(3):
        append(table, "aaac")
    started = time.monotonic()
    out = schedule(table_path, partition_regex="dt=(a|a)*c")
    assert time.monotonic() - started < 5  # was over a minute, in the Airflow process
    assert out["partitions_chosen"] == 1 and out["input_files"] == 3


@pytest.mark.parametrize("pattern", [r"dt=(a)\1", "dt=(?=a).*", "dt=(?!b).*", "(?<=x)dt=a", "dt=(?>a*)",
                                     "dt=a*+", "(?:a{100}){1000}"])
def test_a_partition_regex_that_needs_backtracking_is_refused(table_path: str, pattern: str) -> None:
    table = make_table(table_path)
    for _ in range(4):
        append(table, "a")
    with pytest.raises(LakeSpecError) as err:
        schedule(table_path, partition_regex=pattern)
    assert err.value.field == "partition_regex" and "Fix:" in str(err.value)
    assert instants.pending(table.storage) == []
