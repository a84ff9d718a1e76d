"""LakeHook with real spark-submit on local Spark (connection spark_default = local[2], set in conftest)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.datagen import bdci
from airflow_lake.exceptions import LakeJobError
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.hooks.submit import LakeSubmitHook
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.format.instants import ROLLED_BACK, pending
from tests.lake.upsert.oracle import as_strings, bdci_expected
from tests.support import FAST_HEARTBEAT, parquet_files_on_disk, table_ids, write_source

pytestmark = pytest.mark.slow


def test_submit_returns_the_metrics_stored_in_the_instant(spark: Any, table_path: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    submitted: list[list[str]] = []
    real_submit = LakeSubmitHook.submit

    def spy(self: LakeSubmitHook, *args: Any, **kwargs: Any) -> Any:
        submitted.append(list(self._application_args or []))
        return real_submit(self, *args, **kwargs)

    monkeypatch.setattr(LakeSubmitHook, "submit", spy)
    hook = LakeHook()
    created = hook.submit("create_table", {"table": table_path, "schema": "id BIGINT, dt STRING, v DOUBLE",
                                           "partition_by": ["dt"]})
    assert created["created"] is True and created["seq"] == 0
    assert hook._submit_hook is None  # metadata-only operation: ran in-process, no spark-submit
    source = write_source(tmp_path / "a.parquet", range(20), ["a", "b"] * 10)
    metrics = hook.submit("write", {"table": table_path, "source": {"path": source}, "request_id": "r-1"})
    entry = LakeTable.open(table_path).find_request("r-1")
    assert entry is not None
    assert metrics["instant"] == entry.instant and metrics["rows_added"] == 20 == entry.metrics["rows_added"]
    assert metrics["files_added"] == 2 and metrics["already_committed"] is False
    assert table_ids(spark, table_path) == list(range(20))
    assert len(submitted) == 1
    retry = hook.submit("write", {"table": table_path, "source": {"path": source}, "request_id": "r-1"})
    # answered from the log in this process: no spark-submit, the result the job gives a retry
    assert len(submitted) == 1 and retry == {**metrics, "already_committed": True}
    assert table_ids(spark, table_path) == list(range(20))  # an Airflow retry gives the same table
    # a try that did not commit (rolled back) runs again through spark-submit
    begin(LakeTable.open(table_path), "commit", "write", request_id="r-2").abort()
    again = hook.submit("write", {"table": table_path, "source": {"path": source}, "request_id": "r-2"})
    assert len(submitted) == 2 and again["already_committed"] is False and again["instant"] != metrics["instant"]
    assert table_ids(spark, table_path) == sorted([*range(20), *range(20)])


def test_a_failed_job_raises_with_the_tail_of_the_spark_output(table_path: str, tmp_path: Path) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    with pytest.raises(LakeJobError) as info:
        LakeHook().submit("write", {"table": table_path, "source": {"path": str(tmp_path / "missing.parquet")}})
    message = str(info.value)
    assert "Last spark-submit output" in message
    assert "missing.parquet" in message  # Spark's own error names the path
    assert LakeTable.open(table_path).commit_log.head() == 0 and pending(LakeTable.open(table_path).storage) == []


def test_a_bad_spec_fails_before_spark_submit(table_path: str) -> None:
    hook = LakeHook()
    with pytest.raises(LakeSpecError, match="mode"):
        hook.submit("write", {"table": table_path, "source": {"path": "/x"}, "mode": "upsert"})
    assert hook._submit_hook is None  # no SparkSubmitHook was built, so no spark-submit ran


def test_on_kill_stops_the_job_and_rolls_back_its_instant(spark: Any, table_path: str, tmp_path: Path) -> None:
    LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING, v DOUBLE", "partition_by": ["dt"],
                                  "properties": FAST_HEARTBEAT})
    flag = tmp_path / "reached"
    hook = LakeHook(env_vars={"AIRFLOW_LAKE_FAULT_POINT": "before_commit", "AIRFLOW_LAKE_FAULT_FLAG": str(flag)})
    source = write_source(tmp_path / "a.parquet", range(30), ["a", "b", "c"] * 10)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            hook.submit("write", {"table": table_path, "source": {"path": source}, "request_id": "killed"})
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + 180
    while not flag.exists():
        assert thread.is_alive() and time.monotonic() < deadline, errors
        time.sleep(0.2)
    assert parquet_files_on_disk(table_path)  # data files written, not committed
    hook.on_kill()
    thread.join(timeout=60)
    assert not thread.is_alive() and isinstance(errors[0], LakeJobError)
    table = LakeTable.open(table_path)
    # rolled back at once, without waiting for the heartbeat to go stale
    assert pending(table.storage) == []
    assert parquet_files_on_disk(table_path) == set()
    assert [i.state for i in table.timeline() if i.request_id == "killed"] == [ROLLED_BACK]
    assert table.snapshot().rows == 0


def test_a_small_upsert_of_parquet_files_runs_in_the_task_without_spark(spark: Any, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    submitted: list[str] = []
    real_submit = LakeSubmitHook.submit
    monkeypatch.setattr(LakeSubmitHook, "submit", lambda self, *a, **k: (submitted.append("x"),
                                                                         real_submit(self, *a, **k))[1])
    paths = bdci.generate(tmp_path / "src", 50, keys=60)
    table = str(tmp_path / "t")
    LakeTable.create(table, bdci.table_spec(4))
    hook = LakeHook()
    first = hook.submit("versioned_upsert", {"table": table, "source": {"path": str(paths[2])}, "version": 2,
                                             "request_id": "u-2"})
    assert submitted == [] and hook._submit_hook is None  # no spark-submit, no JVM
    assert first["spark"] is False and first["rows"] == 50 and first["already_committed"] is False
    assert first["versions"] == [2] and first["files_added"] >= 1
    retry = hook.submit("versioned_upsert", {"table": table, "source": {"path": str(paths[2])}, "version": 2,
                                             "request_id": "u-2"})
    assert retry == {**first, "already_committed": True}
    # the limit at 1 byte: the same kind of upsert goes to spark-submit, and the table merges both
    on_spark = LakeHook(in_process_max_bytes=1).submit("versioned_upsert", {
        "table": table, "source": {"path": str(paths[1])}, "version": 1})
    assert submitted == ["x"] and "spark" not in on_spark and on_spark["rows"] == 50
    merged = LakeTable.open(table).read(spark).toPandas()
    expected = bdci_expected(paths, versions=[1, 2])
    assert as_strings(merged, columns=list(expected.columns[1:])).equals(expected)


def test_spark_submit_gets_our_jvm_code_beside_the_users_jars(tmp_path: Path) -> None:
    from airflow_lake.jvm import curve_jar

    ours = curve_jar()
    assert ours is not None  # (the set-up builds it)
    plain = LakeHook().build_submit_hook("execute_clustering", str(tmp_path / "spec.json"), "t")
    assert plain._jars == str(ours) and "spark.jars" not in plain._conf
    own = LakeHook(spark_conf={"spark.jars": "/opt/jars/a.jar"}).build_submit_hook(
        "execute_clustering", str(tmp_path / "spec.json"), "t")  # --jars would replace the setting: appended
    assert own._jars is None and own._conf["spark.jars"] == f"/opt/jars/a.jar,{ours}"
    assert "--jars" in plain._build_spark_submit_command("app.py")
