"""Every widening alter_table allows, on real files: old files keep their Parquet type and Spark 4's readers
(vectorized and not) read them as the new type; filters on the widened column skip files right."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.table import LakeTable

D = decimal.Decimal
# old type, new type, a value of the old type, a value only the new type holds, the old value read as the new type
PAIRS = [
    ("tinyint", "smallint", 5, 3000, 5),
    ("tinyint", "bigint", 5, 2**40, 5),
    ("smallint", "int", 300, 2**20, 300),
    ("int", "bigint", 7, 2**40, 7),
    ("int", "double", 7, 1e10 + 0.25, 7.0),
    ("float", "double", 1.5, 1e300, 1.5),
    ("decimal(5,2)", "decimal(8,3)", D("123.45"), D("12345.678"), D("123.450")),
    ("decimal(10,2)", "decimal(20,2)", D("123.45"), D("123456789012345678.12"), D("123.45")),
    ("int", "decimal(12,2)", 7, D("1234567890.12"), D("7.00")),
    ("date", "timestamp_ntz", dt.date(2024, 3, 1), dt.datetime(2024, 3, 5, 12, 30), dt.datetime(2024, 3, 1)),
]


@pytest.mark.parametrize(("old", "new", "old_value", "new_value", "read_back"), PAIRS,
                         ids=[f"{p[0]}->{p[1]}" for p in PAIRS])
def test_old_files_read_as_the_wider_type(spark: Any, tmp_path: Any, old: str, new: str,  # noqa: PLR0917
                                         old_value: Any, new_value: Any, read_back: Any) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": f"k INT, c {old}"})
    table.write(spark.createDataFrame([(1, old_value)], f"k INT, c {old}"))
    entry = table.alter_table([{"widen": "c", "type": new}])
    assert (entry.action, entry.added, entry.removed) == ("alter", (), ())
    table.write(spark.createDataFrame([(2, new_value)], f"k INT, c {new}"))
    for vectorized in ("true", "false"):
        with session_conf(spark, {"spark.sql.parquet.enableVectorizedReader": vectorized}):
            rows = sorted((r.k, r.c) for r in table.read(spark).collect())
        assert rows == [(1, read_back), (2, new_value)], vectorized
        assert dict(zip(table.read(spark).columns, [t for _, t in table.read(spark).dtypes], strict=True))["c"] == \
            new.replace("timestamp_ntz", "timestamp_ntz")
    assert sorted(table.to_arrow().to_pydict()["c"], key=str) == sorted([read_back, new_value], key=str)
    # a filter on the widened column: the old file's stats (of the old type) still decide right
    if not new.startswith("decimal"):
        scan = table.scan([["c", "=", new_value.isoformat() if isinstance(new_value, dt.datetime) else new_value]])
        assert (len(scan.files), [r.k for r in table.read(spark, filters=[["c", "=", scan.filters[0].value]])
                                   .collect()]) == (1, [2])
        low = read_back.isoformat() if isinstance(read_back, dt.datetime) else read_back
        assert [r.k for r in table.read(spark, filters=[["c", "<=", low]]).collect()] == [1]


def test_date_to_timestamp_is_refused_with_the_way_that_works(spark: Any, tmp_path: Any) -> None:
    table = LakeTable.create(str(tmp_path / "t"), {"schema": "k INT, d DATE"})
    table.write(spark.createDataFrame([(1, dt.date(2024, 3, 1))], "k INT, d DATE"))
    with pytest.raises(LakeSpecError, match=r"cannot read the DATE values .* as TIMESTAMP.*timestamp_ntz"):
        table.alter_table([{"widen": "d", "type": "timestamp"}])
    assert table.commit_log.head() == 1  # nothing committed
    # what Spark itself does with such a file: it refuses to read a DATE as TIMESTAMP (so would every read)
    path = table.storage.path(table.snapshot().files[0].path)
    with pytest.raises(Exception, match=r"(?i)parquet|convert|schema"):
        spark.read.schema("d TIMESTAMP").parquet(path).collect()
