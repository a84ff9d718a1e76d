"""Upserts and compaction under real spark-submit: many at once on one table, and SIGKILL mid-way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.datagen import bdci
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.instants import COMPLETED, ROLLED_BACK, pending
from tests.lake.upsert.oracle import as_strings, bdci_expected
from tests.support import start_submit, submit_and_kill

pytestmark = pytest.mark.slow


def check(spark: Any, path: str, batches: list[Path], versions: list[int]) -> None:
    expected = bdci_expected(batches, versions)
    got = as_strings(LakeTable.open(path).read(spark).toPandas(), columns=list(expected.columns[1:]))
    pd.testing.assert_frame_equal(got, expected)


def upsert_spec(path: str, batches: list[Path], version: int) -> dict[str, Any]:
    return {"table": path, "source": {"path": str(batches[version])}, "version": version,
            "request_id": f"dag/upsert/run/{version}"}


def test_four_spark_submit_upserts_and_a_compaction_at_once_lose_nothing(spark: Any, table_path: str,
                                                                           tmp_path: Path) -> None:
    batches = bdci.generate(tmp_path / "src", 800, keys=1000)
    LakeTable.create(table_path, bdci.table_spec(4))
    for version in (0, 1, 2):  # deltas for the compaction to fold
        run(spark, "versioned_upsert", upsert_spec(table_path, batches, version))
    procs = [start_submit("versioned_upsert", upsert_spec(table_path, batches, v), log=tmp_path / f"u{v}.log")
             for v in (6, 3, 5, 4)]
    procs.append(start_submit("compact_upserts", {"table": table_path, "request_id": "dag/compact/run/-1"},
                              log=tmp_path / "compact.log"))
    codes = [p.wait(timeout=600) for p in procs]
    assert codes == [0] * 5, [(tmp_path / n).read_text()[-3000:] for n in ("u6.log", "compact.log")]
    table = LakeTable.open(table_path)
    upserts = [e for e in table.commit_log.entries(-1) if e.action == "upsert"]
    assert sorted(v for e in upserts for v in e.metadata["versions"]) == list(range(7))
    assert [e.operation for e in table.commit_log.entries(-1) if e.action == "replace"] == ["compact_upserts"]
    check(spark, table_path, batches, list(range(7)))


@pytest.mark.parametrize("operation", ["versioned_upsert", "compact_upserts"])
def test_sigkill_during_an_upsert_or_a_compaction_leaves_the_table_as_before(
        spark: Any, table_path: str, tmp_path: Path, operation: str) -> None:
    batches = bdci.generate(tmp_path / "src", 500, keys=600)
    LakeTable.create(table_path, bdci.table_spec(2))
    for version in (0, 1):
        run(spark, "versioned_upsert", upsert_spec(table_path, batches, version))
    before = {f.path for f in LakeTable.open(table_path).snapshot().files}
    spec = upsert_spec(table_path, batches, 2) if operation == "versioned_upsert" else \
        {"table": table_path, "request_id": "dag/compact/run/-1"}
    submit_and_kill(operation, spec, "before_commit", table_path, tmp_path)
    table = LakeTable.open(table_path)
    assert {f.path for f in table.snapshot().files} == before
    check(spark, table_path, batches, [0, 1])  # readable, exactly as before
    out = run(spark, operation, spec)  # the Airflow retry: the dead attempt is rolled back first
    assert out["already_committed"] is False
    check(spark, table_path, batches, [0, 1, 2] if operation == "versioned_upsert" else [0, 1])
    table = LakeTable.open(table_path)
    assert [i.state for i in table.timeline() if i.operation == operation][-2:] == [ROLLED_BACK, COMPLETED]
    assert pending(table.storage) == []
