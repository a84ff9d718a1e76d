"""Primary-key tables written before versioned deletes (the committed fixtures in `legacy/`, made by the release
before them: `legacy/make_fixtures.py`): their files have no row versions. They read and compact as before, and
take versioned deletes: exactly where the column stamps tell the versions (delta rows, deletes below a row's
stamps, deletes at or above every version the table applied), refused where they cannot (a base row's newest
version between its stamps and the table's highest version; a sum folded over unknown versions) — against the
pandas oracle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.compact import compact
from airflow_lake.lake.upsert.physical import UNKNOWN_OLDEST
from airflow_lake.lake.upsert.upsert import versioned_upsert
from tests.lake.upsert.oracle import merge_with_deletes
from tests.lake.upsert.test_versioned_deletes import COLUMNS, check, delete_keys, frame, raw_rows, spark_df

FIXTURES = Path(__file__).parent / "legacy"
NULL_VALUES = {"last": {}, "folded": {"tag": ["null"]}}


class Legacy:
    """A copy of a fixture table and the events applied to it (the oracle's input)."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        shutil.copytree(FIXTURES / name, tmp_path / name)
        self.table = LakeTable.open(str(tmp_path / name))
        recorded = json.loads((FIXTURES / "events.json").read_text())
        self.operators: dict[str, str] = recorded["operators"][name]
        self.null_values = NULL_VALUES[name]
        self.events: list[tuple[int, pd.DataFrame]] = [(v, frame(rows)) for v, rows in
                                                       (e for e in recorded["events"] if e is not None)]

    def expected(self) -> pd.DataFrame:
        return merge_with_deletes(self.events, "k", COLUMNS, operators=self.operators, null_values=self.null_values)

    def check(self, spark: Any) -> None:
        check(spark, self.table, self.expected())

    def delete(self, spark: Any, keys: list[int], version: int) -> None:
        delete_keys(spark, self.table, keys, version)
        self.events.append((version, frame([{"k": k, "_delete": True} for k in keys])))

    def upsert(self, spark: Any, version: int, rows: list[dict[str, Any]]) -> None:
        versioned_upsert(self.table, spark_df(spark, frame(rows)), version=version)
        self.events.append((version, frame(rows)))

    def refused(self, spark: Any, keys: list[int], version: int, match: str, upper: int = 60) -> None:
        head = self.table.commit_log.head()
        with pytest.raises(LakeSpecError, match=match) as err:
            delete_keys(spark, self.table, keys, version)
        assert err.value.field == "version" and f"at {upper} or above" in err.value.fix
        assert all(e.action == "rollback" for e in self.table.commit_log.entries(head))  # nothing committed


@pytest.mark.parametrize("name", ["last", "folded"])
def test_a_table_written_before_versioned_deletes_reads_and_compacts_as_before(
        spark: Any, tmp_path: Path, name: str) -> None:
    legacy = Legacy(name, tmp_path)
    assert "__lake_v" not in {c for f in legacy.table.snapshot().files for c in f.stats}  # the old format
    legacy.check(spark)
    compact(legacy.table, spark)
    legacy.check(spark)
    raw = raw_rows(legacy.table).set_index("k")
    assert raw.loc[7, "__lake_v0"] == 20 and raw.loc[7, "__lake_v"] == 50  # delta rows: their versions are known
    assert raw.loc[0, "__lake_v0"] == UNKNOWN_OLDEST  # a base row folded before: its oldest version stays unknown
    legacy.upsert(spark, 70, [{"k": 0, "a": "a70"}, {"k": 10, "a": "new"}])
    legacy.check(spark)


def test_versioned_deletes_on_a_table_written_before_them(spark: Any, tmp_path: Path) -> None:
    legacy = Legacy("last", tmp_path)
    legacy.delete(spark, [7], 35)  # two delta rows (20 and 50): exact, the 20's `a` goes
    legacy.delete(spark, [6], 5)  # below the base row's stamps (10): nothing of key 6 goes
    legacy.check(spark)
    got = legacy.table.read(spark).toPandas().set_index("k")
    assert pd.isna(got.loc[7, "a"]) and got.loc[7, "hi"] == 49 and got.loc[6, "a"] == "a20_6"
    # key 3's base row has stamps of 30, its newest version is unknown up to 60: a delete at 45 cannot tell
    legacy.refused(spark, [3], 45, r"key \(k=3\) has rows written before versioned deletes: their newest version "
                                   r"is at least 30 and below 60")
    legacy.refused(spark, [9], 55, r"key \(k=9\).*newest version is unknown")  # only a key: no stamp at all
    legacy.delete(spark, [3, 9, 0], 65)  # at or above every version the table applied: all of them goes
    legacy.upsert(spark, 62, [{"k": 3, "a": "late"}, {"k": 9, "a": "late"}])  # a backfill below: stays deleted
    legacy.upsert(spark, 80, [{"k": 0, "n": 8}])  # a newer version: back, with nothing older
    legacy.check(spark)
    assert sorted(legacy.table.read(spark).toPandas()["k"]) == [0, 1, 2, 4, 5, 6, 7, 8]
    compact(legacy.table, spark)
    legacy.check(spark)
    # key 2's base row now folds stamps up to 50 and is still uncertain: below 50 exact, above it not
    legacy.refused(spark, [2], 55, r"key \(k=2\).*at least 50 and below 80", upper=80)
    legacy.delete(spark, [2], 45)
    legacy.delete(spark, [2], 90)
    compact(legacy.table, spark)
    legacy.check(spark)


def test_versioned_deletes_on_a_table_with_sums_written_before_them(spark: Any, tmp_path: Path) -> None:
    legacy = Legacy("folded", tmp_path)
    legacy.delete(spark, [7], 35)  # delta rows: exact, also for the max of version 50
    # key 2's base row holds a sum of unknown versions (up to 30): a delete below 30 would split it
    legacy.refused(spark, [2], 25, r"key \(k=2\): column n folds versions up to 30 written before versioned "
                                   r"deletes")
    legacy.refused(spark, [5], 45, r"key \(k=5\).*newest version is unknown")  # a delta row of only a sum
    legacy.delete(spark, [5, 2], 70)
    legacy.upsert(spark, 66, [{"k": 5, "n": 1000}])  # late and lower: stays deleted
    legacy.upsert(spark, 75, [{"k": 2, "n": 7, "hi": 1}])
    legacy.check(spark)
    got = legacy.table.read(spark).toPandas().set_index("k")
    assert 5 not in got.index and got.loc[2, "n"] == 7 and got.loc[2, "hi"] == 1  # nothing older than 75
    compact(legacy.table, spark)
    legacy.check(spark)
