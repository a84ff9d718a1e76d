"""`LakeTable` methods renamed in issue 21 (docs/api.md, "Names"): `vacuum` and `rollback` still work and warn
(no Spark)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.maintenance import orphans
from tests.lake.lake_core_helpers import backdate, make_table


def test_table_vacuum_is_remove_orphan_files_and_warns(table_path: str) -> None:
    table = make_table(table_path)
    debris = Path(table.storage.path("dt=a/part-20200101000000000-x.parquet"))
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"debris")
    os.utime(debris, (time.time() - 7200, time.time() - 7200))

    with pytest.warns(DeprecationWarning, match=r"LakeTable.vacuum is deprecated: use LakeTable.remove_orphan_files"):
        result = table.vacuum(1, force=True)

    assert isinstance(result, orphans.OrphanFilesResult) and orphans.VacuumResult is orphans.OrphanFilesResult
    assert result.orphans == ("dt=a/part-20200101000000000-x.parquet",) and not debris.exists()
    assert result.entry is not None and result.entry.operation == "remove_orphan_files"


def test_table_rollback_is_rollback_pending_and_warns(table_path: str) -> None:
    table = make_table(table_path)
    dead = table.begin("commit", "write")
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)

    with pytest.warns(DeprecationWarning, match=r"LakeTable.rollback is deprecated: use LakeTable.rollback_pending"):
        entry = table.rollback([dead.instant])

    assert entry is not None and entry.rolled_back == (dead.instant,)
    assert (entry.action, entry.operation) == ("rollback", "rollback_pending")
    assert dead.instant in LakeTable.open(table_path).state().rolled_back
