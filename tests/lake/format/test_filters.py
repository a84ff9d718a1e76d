"""Filters: validation, and skipping files by their stats and partition values (no Spark)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_lake.lake import ColumnStats, DataFile, LakeSpecError
from airflow_lake.lake.format.filters import may_match, parse_filters
from airflow_lake.lake.spec.table_spec import TableSpec
from tests.lake.lake_core_helpers import data_file, make_table

SPEC = TableSpec.from_dict({
    "schema": "id BIGINT, name STRING, d DATE, amount DECIMAL(10,2), score DOUBLE, ok BOOLEAN, "
              "ts TIMESTAMP, dt STRING, n INT",
    "partition_by": ["dt", "n"],
})


def file_with(rows: int = 10, partition: dict[str, str | None] | None = None, **stats: ColumnStats) -> DataFile:
    return DataFile(path="dt=x/n=1/part-0.parquet", partition=partition or {"dt": "x", "n": "1"}, rows=rows,
                    bytes=100, stats=stats)


def matches(data: DataFile, *filters: tuple[str, str, Any], spec: TableSpec = SPEC) -> bool:
    return may_match(data, parse_filters(list(filters), spec), spec)


# -- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "problem"), [
    (("nope", "=", 1), "unknown column"),
    ((1, "=", 1), "unknown column"),
    (("id", "like", 1), "unknown operator"),
    (("id", "!=", 1), "unknown operator"),
    (("id", "in", 1), "IN needs a list"),
    (("id", "in", "12"), "IN needs a list"),
    (("id", "between", [1]), "BETWEEN needs"),
    (("id", "between", [1, 2, 3]), "BETWEEN needs"),
    (("id", "between", "ab"), "BETWEEN needs"),
    (("id", "between", {1, 2}), "BETWEEN needs"),
    (("id", "=", "abc"), "not a valid bigint"),
    (("id", "=", 1.5), "not a valid bigint"),
    (("id", "=", True), "not a valid bigint"),
    (("id", "in", [1, "x"]), "not a valid bigint"),
    (("id", "in", [[1]]), "nested more than 2 levels deep"),
    (("id", "between", [1, "x"]), "not a valid bigint"),
    (("name", "=", 5), "not a valid string"),
    (("d", "=", "2024-02-30"), "not a valid date"),
    (("d", "=", dt.datetime(2024, 1, 1)), "not a valid date"),
    (("ok", "=", "maybe"), "not a valid boolean"),
    (("ts", ">", "tomorrow"), "not a valid timestamp"),
    (("id", "=", None), "NULL"),
    (("score", "=", float("nan")), "NaN cannot be a filter literal"),
    (("score", "<", "NaN"), "NaN cannot be a filter literal"),
    (("score", "between", [0.0, float("nan")]), "NaN cannot be a filter literal"),
    (("id", "in", [1, None]), "NULL"),
    (("id", "="), "is not (column, op, value)"),
    ("id = 1", "is not (column, op, value)"),
])
def test_bad_filters_raise_naming_the_filter(raw: Any, problem: str) -> None:
    with pytest.raises(LakeSpecError) as info:
        parse_filters([("id", ">", 0), raw], SPEC)
    assert info.value.field == "filters[1]"
    assert problem in str(info.value)


def test_filters_are_normalized() -> None:
    parsed = parse_filters([("ID", "==", "5"), ["name", "IN", ("a", "b")], ("d", "Between", ["2024-01-01",
                                                                                             dt.date(2024, 2, 1)])],
                           SPEC)
    assert [(f.column, f.op, f.values) for f in parsed] == [
        ("id", "=", (5,)), ("name", "in", ("a", "b")), ("d", "between", ("2024-01-01", "2024-02-01"))]
    assert parsed[1].value == ["a", "b"]
    assert parse_filters(None, SPEC) == [] and parse_filters([], SPEC) == []


# -- skipping --------------------------------------------------------------------------------------

INTS = file_with(id=ColumnStats(10, 20, 0))


@pytest.mark.parametrize(("flt", "expected"), [
    (("id", "=", 5), False), (("id", "=", 10), True), (("id", "=", 15), True), (("id", "=", 20), True),
    (("id", "=", 21), False),
    (("id", "in", [1, 2, 30]), False), (("id", "in", [1, 15]), True), (("id", "in", [20]), True),
    (("id", "in", []), False),
    (("id", "<", 10), False), (("id", "<", 11), True),
    (("id", "<=", 9), False), (("id", "<=", 10), True),
    (("id", ">", 20), False), (("id", ">", 19), True),
    (("id", ">=", 21), False), (("id", ">=", 20), True),
    (("id", "between", [0, 9]), False), (("id", "between", [21, 30]), False), (("id", "between", [5, 10]), True),
    (("id", "between", [20, 25]), True), (("id", "between", [12, 13]), True), (("id", "between", [0, 100]), True),
    (("id", "between", [15, 12]), True),
])
def test_may_match_on_integers(flt: tuple[str, str, Any], expected: bool) -> None:
    assert matches(INTS, flt) is expected


STRINGS = file_with(name=ColumnStats("b", "d", 0))


@pytest.mark.parametrize(("flt", "expected"), [
    (("name", "=", "a"), False), (("name", "=", "c"), True), (("name", "=", "dz"), False),
    (("name", "=", "b"), True), (("name", "in", ["a", "e"]), False), (("name", "in", ["a", "cc"]), True),
    (("name", "<", "b"), False), (("name", "<=", "b"), True), (("name", ">", "d"), False),
    (("name", ">=", "d"), True), (("name", "between", ["e", "f"]), False), (("name", "between", ["a", "b"]), True),
])
def test_may_match_on_strings(flt: tuple[str, str, Any], expected: bool) -> None:
    assert matches(STRINGS, flt) is expected


def test_truncated_string_max_never_skips_upwards() -> None:
    long_strings = file_with(name=ColumnStats("b" * 64, None, 0))
    assert matches(long_strings, ("name", ">", "zzz")) is True
    assert matches(long_strings, ("name", "=", "a")) is False  # the min still counts


DATES = file_with(d=ColumnStats("2024-01-10", "2024-01-20", 0))


@pytest.mark.parametrize(("flt", "expected"), [
    (("d", "=", "2024-01-05"), False), (("d", "=", dt.date(2024, 1, 15)), True), (("d", "=", "2024-01-20"), True),
    (("d", "in", [dt.date(2024, 2, 1), "2024-01-01"]), False), (("d", "in", ["2024-01-10"]), True),
    (("d", "<", dt.date(2024, 1, 10)), False), (("d", "<=", "2024-01-10"), True),
    (("d", ">", dt.date(2024, 1, 20)), False), (("d", ">=", "2024-01-20"), True),
    (("d", "between", ["2023-12-01", "2024-01-09"]), False), (("d", "between", ["2024-01-20", "2024-02-01"]), True),
])
def test_may_match_on_dates(flt: tuple[str, str, Any], expected: bool) -> None:
    assert matches(DATES, flt) is expected


def test_may_match_on_booleans_doubles_and_timestamps() -> None:
    data = file_with(ok=ColumnStats(True, True, 0), score=ColumnStats(0.5, 1.5, 0),
                     ts=ColumnStats(1_000_000, 2_000_000, 0))
    assert matches(data, ("ok", "=", False)) is False
    assert matches(data, ("ok", "=", "true")) is True
    assert matches(data, ("score", ">", 1.5)) is False
    assert matches(data, ("score", "between", [1, 2])) is True
    assert matches(data, ("ts", "<", "1970-01-01T00:00:01")) is False
    assert matches(data, ("ts", "<=", "1970-01-01T00:00:01")) is True
    assert matches(data, ("ts", ">", dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC))) is False


def test_partition_columns_match_on_the_partition_value() -> None:
    data = file_with(partition={"dt": "2024-01-01", "n": "7"})  # no stats at all
    assert matches(data, ("dt", "=", "2024-01-01")) is True
    assert matches(data, ("dt", "=", "2024-01-02")) is False
    assert matches(data, ("dt", "in", ["2024-01-02", "2024-01-01"])) is True
    assert matches(data, ("dt", ">", "2024-01-01")) is False
    assert matches(data, ("n", "=", 7)) is True
    assert matches(data, ("n", "=", "7")) is True
    assert matches(data, ("n", ">", 7)) is False
    assert matches(data, ("n", "between", [1, 6])) is False
    assert matches(data, ("n", "<", 10)) is True  # compared as numbers, not as text
    assert matches(data, ("dt", "=", "2024-01-01"), ("n", "=", 8)) is False  # every filter must hold


def test_typed_partition_columns() -> None:
    spec = TableSpec.from_dict({"schema": "id BIGINT, day DATE, flag BOOLEAN", "partition_by": ["day", "flag"]})
    data = DataFile(path="day=2024-03-01/flag=true/f.parquet", partition={"day": "2024-03-01", "flag": "true"},
                    rows=5, bytes=1)
    assert matches(data, ("day", "=", dt.date(2024, 3, 1)), spec=spec) is True
    assert matches(data, ("day", "<", "2024-03-01"), spec=spec) is False
    assert matches(data, ("flag", "=", False), spec=spec) is False
    assert matches(data, ("flag", "=", True), spec=spec) is True


def test_null_partitions_and_all_null_files_match_no_comparison() -> None:
    null_part = file_with(partition={"dt": None, "n": "1"})
    assert matches(null_part, ("dt", "=", "x")) is False
    assert matches(null_part, ("dt", ">=", "")) is False
    assert matches(null_part, ("n", "=", 1)) is True
    all_null = file_with(rows=10, id=ColumnStats(None, None, 10), name=ColumnStats("a", "z", 3))
    for flt in (("id", "=", 1), ("id", "<", 100), ("id", "in", [1, 2]), ("id", "between", [0, 99])):
        assert matches(all_null, flt) is False
    assert matches(all_null, ("name", "=", "m")) is True  # some nulls only: decided by min/max
    empty = file_with(rows=0, id=ColumnStats(None, None, 0))
    assert matches(empty, ("id", "=", 1)) is True


def test_files_without_stats_are_never_skipped() -> None:
    bare = file_with()
    for flt in (("id", "=", 1), ("name", "<", "a"), ("d", ">", "2099-01-01"), ("id", "in", []),
                ("score", "between", [5, 6])):
        assert matches(bare, flt) is True
    only_other = file_with(name=ColumnStats("a", "b", 0))
    assert matches(only_other, ("id", "=", 1)) is True
    half = file_with(id=ColumnStats(None, 20, 0))  # unknown min
    assert matches(half, ("id", "<", -100)) is True
    assert matches(half, ("id", ">", 20)) is False


def test_decimal_columns_are_never_skipped() -> None:
    data = file_with(amount=ColumnStats(1, 2, 0))
    assert matches(data, ("amount", "=", "100.00")) is True


def test_stats_of_an_unexpected_type_never_skip() -> None:
    data = file_with(id=ColumnStats("10", "20", 0))  # written by something else, as text
    assert matches(data, ("id", "=", 500)) is True


# -- scans -----------------------------------------------------------------------------------------


def test_scan_reports_skipped_files(table_path: str) -> None:
    table = make_table(table_path)
    ranges = [(0, 9), (10, 19), (20, 29), (30, 39)]
    txn = table.begin("commit", "write")
    files = [data_file(txn, "ab"[i % 2], rows=10, lo=lo, hi=hi) for i, (lo, hi) in enumerate(ranges)]
    bare = data_file(txn, "c", stats={})
    txn.commit(added=[*files, bare])

    def scan(*filters: tuple[str, str, Any], as_of: int | None = None) -> tuple[set[str], int]:
        result = table.scan(list(filters), as_of=as_of)
        assert result.files_total == len(result.snapshot.files)
        assert result.files_skipped == result.files_total - len(result.files)
        return {f.path for f in result.files}, result.files_skipped

    assert scan() == ({*(f.path for f in files), bare.path}, 0)
    assert scan(("id", "<", 10)) == ({files[0].path, bare.path}, 3)
    assert scan(("id", "between", [15, 25])) == ({files[1].path, files[2].path, bare.path}, 2)
    assert scan(("id", "=", 100)) == ({bare.path}, 4)
    assert scan(("id", "in", [5, 35])) == ({files[0].path, files[3].path, bare.path}, 2)
    assert scan(("dt", "=", "a")) == ({files[0].path, files[2].path}, 3)
    assert scan(("dt", "=", "b"), ("id", ">=", 30)) == ({files[3].path}, 4)
    assert scan(("id", "<", 10), as_of=0) == (set(), 0)
    result = table.scan([("id", "<", 10)])
    assert [f.describe() for f in result.filters] == ["id < 10"]
    with pytest.raises(LakeSpecError) as info:
        table.scan([("nope", "=", 1)])
    assert info.value.field == "filters[0]"
