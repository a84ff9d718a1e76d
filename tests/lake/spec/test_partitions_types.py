"""Partition values and directory names, type names and literal coercion (no Spark)."""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any

import pytest

from airflow_lake.lake import LakeSpecError
from airflow_lake.lake.spec.partitions import (
    NULL_PARTITION,
    check_partition_value,
    escape,
    parse_partition_dir,
    partition_dir,
    partition_text,
)
from airflow_lake.lake.spec.types import coerce_literal, normalize_type, stats_value

BAD_VALUES = ["../x", "a/b", "..", "\x00", ".", "", "a\\b", "x/../y", "..hidden", "a..b", "tab\there", "new\nline",
              "/abs"]


@pytest.mark.parametrize("value", BAD_VALUES)
def test_check_partition_value_rejects_path_tricks(value: str) -> None:
    with pytest.raises(LakeSpecError) as info:
        check_partition_value("dt", value)
    assert info.value.field == "partition.dt"


@pytest.mark.parametrize("value", BAD_VALUES)
def test_partition_dir_rejects_path_tricks(value: str) -> None:
    with pytest.raises(LakeSpecError) as info:
        partition_dir(["dt", "country"], {"dt": "2024-01-01", "country": value})
    assert info.value.field == "partition.country"


def test_the_directory_name_of_null_is_no_value() -> None:
    with pytest.raises(LakeSpecError) as info:
        check_partition_value("dt", NULL_PARTITION, "partitions[0]")
    assert info.value.field == "partitions[0].dt" and "Give null" in str(info.value)
    check_partition_value("dt", None)  # NULL itself is fine
    check_partition_value("dt", NULL_PARTITION.lower())  # Spark and our reader match the exact text only
    assert parse_partition_dir(f"dt={NULL_PARTITION.lower()}") == {"dt": NULL_PARTITION.lower()}


def test_check_partition_value_uses_given_field() -> None:
    with pytest.raises(LakeSpecError) as info:
        check_partition_value("dt", "../x", "partitions[2]")
    assert info.value.field == "partitions[2].dt"


@pytest.mark.parametrize("value", [None, "2024-01-01", "a b", "ü-ñ", "x.y", "10:30", "a=b", "100%", 7, True])
def test_ordinary_values_are_accepted(value: Any) -> None:
    check_partition_value("dt", value)


@pytest.mark.parametrize("value", [
    "2024-01-01 10:30:00", "a=b", "100%", "%41", "a:b=c%d", "#?*", "'\"", "[x]{y}^", "\x7f", "a b+c", "ü:ß",
    "%", "=", ":", "%25",
])
def test_escaping_round_trips(value: str) -> None:
    rel = partition_dir(["dt", "country"], {"dt": value, "country": "NL"})
    segment = rel.split("/")[0]
    assert segment.count("=") == 1  # '=' in a value is escaped
    escaped = segment.split("=", 1)[1]
    assert ":" not in escaped
    assert re.fullmatch(r"(?:[^%]|%[0-9A-F]{2})*", escaped)  # every '%' starts an escape
    assert parse_partition_dir(rel) == {"dt": value, "country": "NL"}
    assert parse_partition_dir(f"{rel}/part-0001.parquet") == {"dt": value, "country": "NL"}


def test_escape_matches_spark_for_special_characters() -> None:
    assert escape("a:b") == "a%3Ab"
    assert escape("a=b") == "a%3Db"
    assert escape("100%") == "100%25"
    assert escape("2024-01-01 10:00") == "2024-01-01 10%3A00"
    assert partition_dir(["dt"], {"dt": "a=b:c%"}) == "dt=a%3Db%3Ac%25"


def test_null_partition_round_trips() -> None:
    rel = partition_dir(["dt", "country"], {"dt": None, "country": "NL"})
    assert rel == f"dt={NULL_PARTITION}/country=NL"
    assert parse_partition_dir(rel) == {"dt": None, "country": "NL"}
    assert partition_dir(["dt"], {}) == f"dt={NULL_PARTITION}"


def test_parse_partition_dir_ignores_plain_segments() -> None:
    assert parse_partition_dir("part-00000.parquet") == {}
    assert parse_partition_dir("dt=2024-01-01/country=NL/part-1_00003.parquet") == {
        "dt": "2024-01-01", "country": "NL"}


@pytest.mark.parametrize(("type_name", "value", "text"), [
    ("boolean", True, "true"), ("boolean", False, "false"), ("boolean", "TRUE", "true"), ("boolean", "false", "false"),
    ("int", 7, "7"), ("bigint", "12", "12"), ("tinyint", -3, "-3"),
    ("date", dt.date(2024, 1, 2), "2024-01-02"), ("date", "2024-01-02", "2024-01-02"),
    ("string", "x", "x"), ("string", None, None),
])
def test_partition_text(type_name: str, value: Any, text: str | None) -> None:
    assert partition_text(type_name, value) == text


# -- types -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "canonical"), [
    ("BIGINT", "bigint"), ("long", "bigint"), ("Integer", "int"), ("short", "smallint"), ("byte", "tinyint"),
    ("real", "float"), ("bool", "boolean"), ("varchar", "string"), ("VARCHAR(10)", "string"), ("char(3)", "string"),
    ("timestamp_ltz", "timestamp"), ("timestamp_ntz", "timestamp_ntz"), ("decimal", "decimal(10,0)"),
    ("DECIMAL( 38 , 0 )", "decimal(38,0)"), ("  double  ", "double"), ("binary", "binary"), ("date", "date"),
])
def test_normalize_type(name: str, canonical: str) -> None:
    assert normalize_type(name) == canonical


@pytest.mark.parametrize("name", ["uuid", "decimal(39,1)", "decimal(3,4)", "map<string,int>", "", "int64"])
def test_normalize_type_rejects(name: str) -> None:
    with pytest.raises(LakeSpecError) as info:
        normalize_type(name, "columns[3].type")
    assert info.value.field == "columns[3].type"


@pytest.mark.parametrize(("type_name", "value", "expected"), [
    ("bigint", 5, 5), ("bigint", "5", 5), ("bigint", 5.0, 5), ("int", -1, -1),
    ("double", 1, 1.0), ("double", "2.5", 2.5),
    ("boolean", "True", True), ("boolean", False, False),
    ("string", "abc", "abc"),
    ("date", "2024-01-02", "2024-01-02"), ("date", dt.date(2024, 1, 2), "2024-01-02"),
    ("timestamp", "1970-01-01T00:00:01", 1_000_000),
    ("timestamp", dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC), 2_000_000),
    ("decimal(10,2)", "1.50", decimal.Decimal("1.50")),
    ("string", None, None),
])
def test_coerce_literal(type_name: str, value: Any, expected: Any) -> None:
    assert coerce_literal(type_name, value, "filters[0]") == expected


@pytest.mark.parametrize(("type_name", "value"), [
    ("bigint", "abc"), ("bigint", 1.5), ("bigint", True), ("int", [1]),
    ("double", "x"), ("boolean", "yes"), ("string", 5), ("date", "2024-13-01"), ("date", "yesterday"),
    ("timestamp", "noon"), ("decimal(10,2)", "1,5"), ("binary", b"x"),
])
def test_coerce_literal_rejects(type_name: str, value: Any) -> None:
    with pytest.raises(LakeSpecError) as info:
        coerce_literal(type_name, value, "filters[4]")
    assert info.value.field == "filters[4]"


def test_stats_value() -> None:
    assert stats_value("bigint", 3) == 3
    assert stats_value("double", float("nan")) is None
    assert stats_value("double", 1.5) == 1.5
    assert stats_value("date", dt.date(2024, 5, 6)) == "2024-05-06"
    assert stats_value("timestamp", dt.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000
    assert stats_value("binary", b"x") is None
    assert stats_value("string", None) is None
