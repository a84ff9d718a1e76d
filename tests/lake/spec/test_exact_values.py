"""`types.exact_value`: a value given as JSON or rendered text becomes its column's type only where that is exact
(the keys of a versioned delete)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.types import exact_value


@pytest.mark.parametrize(("type_name", "value", "expected"), [
    ("bigint", "42", 42), ("bigint", " -7 ", -7), ("int", 42, 42), ("tinyint", "127", 127),
    ("string", "42", "42"), ("boolean", "TRUE", True), ("boolean", False, False),
    ("date", "2024-01-02", dt.date(2024, 1, 2)),
    ("timestamp_ntz", "2024-01-02T03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("decimal(10,2)", "4.1", decimal.Decimal("4.10")), ("decimal(10,2)", "4.100", decimal.Decimal("4.10")),
    ("decimal(10,2)", 4, decimal.Decimal("4.00")),
])
def test_exact_conversions(type_name: str, value: Any, expected: Any) -> None:
    assert exact_value(type_name, value, "keys[0].k") == expected


@pytest.mark.parametrize(("type_name", "value"), [
    ("bigint", "4.0"), ("bigint", "abc"), ("bigint", "1e3"), ("bigint", "4_2"), ("bigint", 4.0), ("bigint", True),
    ("tinyint", "128"), ("bigint", str(2 ** 63)), ("string", 42), ("boolean", "yes"), ("date", "20240102"),
    ("date", "2024-02-30"), ("timestamp", 1e300), ("decimal(10,2)", "4.123"), ("decimal(10,2)", "1e3"),
    ("decimal(3,2)", "40.1"), ("decimal(10,2)", 4.5), ("decimal(10,2)", "NaN"),
])
def test_inexact_values_are_refused_naming_the_field(type_name: str, value: Any) -> None:
    with pytest.raises(LakeSpecError, match=r"^keys\[0\]\.k: .* is not .*\(the column is "):
        exact_value(type_name, value, "keys[0].k")
