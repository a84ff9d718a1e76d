"""Table spec validation, DDL parsing and the JSON round trip (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import BucketSpec, Column, LakeSpecError, LakeTable, LakeTableExists, LakeTableNotFound
from airflow_lake.lake.spec.table_spec import DEFAULT_PROPERTIES, TableSpec, parse_ddl

BASE = "id BIGINT, name STRING, amount DOUBLE, v BIGINT, dt STRING"


def spec_error(raw: Any) -> LakeSpecError:
    with pytest.raises(LakeSpecError) as info:
        TableSpec.from_dict(raw)
    return info.value


# -- DDL -------------------------------------------------------------------------------------------


def test_ddl_parses_types_nullability_and_decimals() -> None:
    cols = parse_ddl("id BIGINT NOT NULL, amount DECIMAL(10,2), price decimal ( 12 , 4 ) not null, "
                     "`dt` STRING, n LONG, i INTEGER, s VARCHAR(20), d DATE, ts TIMESTAMP, flag BOOLEAN, "
                     "x DECIMAL")
    assert cols == (
        Column("id", "bigint", False),
        Column("amount", "decimal(10,2)", True),
        Column("price", "decimal(12,4)", False),
        Column("dt", "string", True),
        Column("n", "bigint", True),
        Column("i", "int", True),
        Column("s", "string", True),
        Column("d", "date", True),
        Column("ts", "timestamp", True),
        Column("flag", "boolean", True),
        Column("x", "decimal(10,0)", True),
    )


@pytest.mark.parametrize(("ddl", "field"), [
    ("id BIGINTEGER", "schema[0].type"),
    ("id BIGINT, amount DECIMAL(40,2)", "schema[1].type"),
    ("id BIGINT, amount DECIMAL(5,6)", "schema[1].type"),
    ("id BIGINT, amount DECIMAL(0,0)", "schema[1].type"),
    ("id BIGINT, name", "schema[1]"),
    ("id BIGINT,", "schema[1]"),
    ("1id BIGINT", "schema[0].name"),
    ("id-x BIGINT", "schema[0].name"),
    ("id BIGINT NOT", "schema[0].type"),
    ("id ARRAY<INT>", "schema[0].type"),
])
def test_ddl_errors_name_the_column(ddl: str, field: str) -> None:
    err = spec_error({"schema": ddl})
    assert err.field == field
    assert str(err).startswith(f"{field}: ")
    assert "Fix:" in str(err)


def test_spec_error_is_a_value_error_with_problem_and_fix() -> None:
    err = spec_error({"schema": "id BIGINT", "partition_by": ["dt"]})
    assert isinstance(err, ValueError)
    assert err.field == "partition_by[0]"
    assert "'dt'" in err.problem
    assert "id" in err.fix


# -- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "field"), [
    # unknown columns in every place a column is named
    ({"schema": BASE, "partition_by": ["nope"]}, "partition_by[0]"),
    ({"schema": BASE, "partition_by": ["dt", "nope"]}, "partition_by[1]"),
    ({"schema": BASE, "bucket": {"columns": ["nope"], "count": 8}}, "bucket.columns[0]"),
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": 8, "sort_columns": ["nope"]}},
     "bucket.sort_columns[0]"),
    ({"schema": BASE, "primary_key": ["id", "nope"]}, "primary_key[1]"),
    ({"schema": BASE, "primary_key": ["id"], "version_column": "nope"}, "version_column"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": {"nope": "sum"}}, "merge_operators.nope"),
    # types and names
    ({"columns": [{"name": "id", "type": "uuid"}]}, "columns[0].type"),
    ({"columns": [{"name": "id", "type": "bigint"}, {"name": "x"}]}, "columns[1]"),
    ({"columns": [{"name": "id", "type": "bigint"}, "x"]}, "columns[1]"),
    ({"columns": [{"name": "bad name", "type": "bigint"}]}, "columns[0].name"),
    ({"schema": "id BIGINT, name STRING, ID STRING"}, "columns[2].name"),
    ({"schema": "id BIGINT, name STRING, name BIGINT"}, "columns[2].name"),
    ({"columns": []}, "columns"),
    ({}, "columns"),
    ({"schema": ""}, "columns"),
    # bucket counts
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": 0}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": -1}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": 100001}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": "8"}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": True}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": 8.0}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": ["id"]}}, "bucket.count"),
    ({"schema": BASE, "bucket": {"columns": [], "count": 8}}, "bucket.columns"),
    ({"schema": BASE, "bucket": [1]}, "bucket"),
    ({"schema": BASE, "partition_by": ["dt"], "bucket": {"columns": ["dt"], "count": 4}}, "bucket.columns[0]"),
    # partitioning
    ({"schema": BASE, "partition_by": ["amount"]}, "partition_by[0]"),
    ({"schema": "id BIGINT, ts TIMESTAMP", "partition_by": ["ts"]}, "partition_by[0]"),
    ({"schema": "id BIGINT, p DECIMAL(10,2)", "partition_by": ["p"]}, "partition_by[0]"),
    ({"schema": BASE, "partition_by": ["dt", "dt"]}, "partition_by"),
    ({"schema": "dt STRING", "partition_by": ["dt"]}, "partition_by"),
    ({"schema": BASE, "partition_by": 5}, "partition_by"),
    # keys and merging
    ({"schema": BASE, "version_column": "v"}, "version_column"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": {"amount": "avg"}}, "merge_operators.amount"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": {"id": "sum"}}, "merge_operators.id"),
    ({"schema": BASE, "merge_operators": {"amount": "sum"}}, "merge_operators"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": ["amount"]}, "merge_operators"),
    # properties and the spec object itself
    ({"schema": BASE, "properties": {"heartbeat.timeout.seconds": "0"}}, "properties.heartbeat.timeout.seconds"),
    ({"schema": BASE, "properties": {"checkpoint.interval": "-5"}}, "properties.checkpoint.interval"),
    ({"schema": BASE, "properties": {"clean.retain.hours": "abc"}}, "properties.clean.retain.hours"),
    ({"schema": BASE, "properties": ["x"]}, "properties"),
    ({"schema": BASE, "partitions": ["dt"]}, "partitions"),
    ({"schema": BASE, "columns": [{"name": "id", "type": "bigint"}]}, "schema"),
])
def test_bad_specs_raise_naming_the_field(raw: dict[str, Any], field: str) -> None:
    err = spec_error(raw)
    assert err.field == field, str(err)
    assert str(err).startswith(f"{field}: ")


def test_spec_that_is_not_a_mapping() -> None:
    assert spec_error(["id BIGINT"]).field == "table spec"


def test_constructor_validates_too() -> None:
    cols = (Column("id", "bigint"), Column("dt", "string"))
    with pytest.raises(LakeSpecError) as info:
        TableSpec(cols, bucket=BucketSpec(("id",), 0))
    assert info.value.field == "bucket.count"
    with pytest.raises(LakeSpecError) as info:
        TableSpec(cols, partition_columns=("nope",))
    assert info.value.field == "partition_by[0]"


def test_valid_spec_lookups_and_defaults() -> None:
    spec = TableSpec.from_dict({"schema": BASE, "partition_by": "dt", "primary_key": "id",
                                "bucket": {"columns": ["id"], "count": 4},
                                "properties": {"checkpoint.interval": 5, "user.custom.key": "x"}})
    assert spec.column_names == ["id", "name", "amount", "v", "dt"]
    assert spec.data_columns == ["id", "name", "amount", "v"]
    assert spec.partition_columns == ("dt",)
    assert spec.primary_key == ("id",)
    assert spec.column("AMOUNT") == Column("amount", "double")
    assert spec.has_column("Name") and not spec.has_column("nope")
    with pytest.raises(KeyError):
        spec.column("nope")
    assert spec.property("checkpoint.interval") == "5"
    assert spec.float_property("heartbeat.timeout.seconds") == float(DEFAULT_PROPERTIES["heartbeat.timeout.seconds"])
    assert spec.properties["user.custom.key"] == "x"


@pytest.mark.parametrize("ptype", ["STRING", "DATE", "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT"])
def test_partition_column_types_allowed(ptype: str) -> None:
    spec = TableSpec.from_dict({"schema": f"id BIGINT, p {ptype}", "partition_by": ["p"]})
    assert spec.partition_columns == ("p",)


# -- round trip ------------------------------------------------------------------------------------

FULL = {
    "schema": "id BIGINT NOT NULL, name STRING, amount DECIMAL(10,2), hits BIGINT, v BIGINT, dt DATE",
    "partition_by": ["dt"],
    "bucket": {"columns": ["id"], "count": 16, "sort_columns": ["id", "name"]},
    "primary_key": ["id"],
    "version_column": "v",
    "merge_operators": {"hits": "sum", "name": "last_non_null"},
    "properties": {"checkpoint.interval": "5", "clean.retain.hours": "1"},
}


def test_to_dict_from_dict_round_trip() -> None:
    spec = TableSpec.from_dict(FULL)
    raw = spec.to_dict()
    assert raw["columns"][0] == {"name": "id", "type": "bigint", "nullable": False}
    assert raw["columns"][2]["type"] == "decimal(10,2)"
    assert raw["bucket"] == {"columns": ["id"], "count": 16, "sort_columns": ["id", "name"]}
    again = TableSpec.from_dict(json.loads(json.dumps(raw)))
    assert again == spec
    assert again.to_dict() == raw
    plain = TableSpec.from_dict({"schema": "id BIGINT"})
    assert TableSpec.from_dict(plain.to_dict()) == plain
    assert plain.to_dict()["bucket"] is None


def test_spec_is_stored_with_the_table(table_path: str) -> None:
    spec = TableSpec.from_dict(FULL)
    LakeTable.create(table_path, FULL)
    table = LakeTable.open(table_path)
    assert table.spec == spec
    assert table.snapshot().spec == spec
    assert table.commit_log.read(0).metadata["spec"] == spec.to_dict()


def test_invalid_spec_writes_nothing(table_path: str) -> None:
    with pytest.raises(LakeSpecError):
        LakeTable.create(table_path, {"schema": BASE, "partition_by": ["nope"]})
    assert not LakeTable.exists(table_path)
    with pytest.raises(LakeTableNotFound):
        LakeTable.open(table_path)


def test_create_twice_and_exist_ok(table_path: str) -> None:
    LakeTable.create(table_path, FULL)
    with pytest.raises(LakeTableExists):
        LakeTable.create(table_path, FULL)
    assert LakeTable.create(table_path, FULL, exist_ok=True).spec == TableSpec.from_dict(FULL)
    with pytest.raises(LakeTableExists):
        LakeTable.create(table_path, {"schema": "id BIGINT"}, exist_ok=True)
    assert LakeTable(table_path).commit_log.head() == 0


# -- strict at every depth (issue 6) ---------------------------------------------------------------


@pytest.mark.parametrize(("raw", "field", "text"), [
    # unknown keys and wrong types inside nested objects
    ({"schema": BASE, "bucket": {"columns": ["id"], "count": 8, "sort_by": ["id"]}}, "bucket.sort_by",
     "unknown field"),
    ({"schema": BASE, "bucket": {}}, "bucket.columns", "at least one column"),
    ({"schema": BASE, "bucket": {"columns": [1], "count": 8}}, "bucket.columns[0]", "expected a non-empty string"),
    ({"columns": [{"name": "id", "type": "bigint", "nullable": "false"}]}, "columns[0].nullable",
     "expected true or false"),
    ({"columns": [{"name": "id", "type": "bigint"}, {"name": "v", "type": "double", "nulable": False}]},
     "columns[1].nulable", "unknown field"),
    ({"columns": [{"name": "id", "type": 5}]}, "columns[0].type", "expected a type name"),
    ({"columns": {"name": "id", "type": "bigint"}}, "columns", "expected a list"),
    ({"schema": BASE, "partition_by": [None]}, "partition_by[0]", "non-empty string"),
    ({"schema": BASE, "primary_key": ["id"], "version_column": 5}, "version_column", "expected a string"),
    ({"schema": BASE, "primary_key": ["id"], "version_column": ""}, "version_column", "is empty"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": {"amount": 1}}, "merge_operators.amount",
     "non-empty string"),
    # names listed twice, in any case
    ({"schema": BASE, "partition_by": ["dt", "DT"]}, "partition_by", "listed twice"),
    ({"schema": "id BIGINT, dt STRING", "partition_by": ["dt", "DT"]}, "partition_by", "listed twice"),
    ({"schema": BASE, "primary_key": ["id", "ID"]}, "primary_key", "listed twice"),
    ({"schema": BASE, "bucket": {"columns": ["id", "Id"], "count": 4}}, "bucket.columns", "listed twice"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": {"amount": "sum", "AMOUNT": "max"}},
     "merge_operators.AMOUNT", "listed twice"),
    ({"schema": BASE, "primary_key": ["id"], "merge_operators": {"ID": "sum"}}, "merge_operators.ID",
     "primary-key column"),
    ({"schema": BASE, "partition_by": ["DT"], "bucket": {"columns": ["dt"], "count": 4}}, "bucket.columns[0]",
     "partition column"),
    # properties: known names only (or user.*), finite positive numbers
    ({"schema": BASE, "properties": {"clean.retain.hours": "nan"}}, "properties.clean.retain.hours", "finite"),
    ({"schema": BASE, "properties": {"heartbeat.interval.seconds": "inf"}},
     "properties.heartbeat.interval.seconds", "finite"),
    ({"schema": BASE, "properties": {"clean.retain.hours": float("nan")}}, "properties.clean.retain.hours",
     "number or non-empty string"),
    ({"schema": BASE, "properties": {"clean.retian.hours": "24"}}, "properties.clean.retian.hours",
     "unknown table property"),
    ({"schema": BASE, "properties": {"user.": "x"}}, "properties.user.", "unknown table property"),
    ({"schema": BASE, "properties": {"user.owner": None}}, "properties.user.owner", "non-empty string"),
    ({"schema": BASE, "properties": {"checkpoint.interval": True}}, "properties.checkpoint.interval",
     "non-empty string"),
    # schema strings: the real problem is named
    ({"schema": "`my col` BIGINT, v BIGINT"}, "schema[0].name", "backquoted names may not contain spaces"),
    ({"schema": "id BIGINT, m MAP<STRING, INT>"}, "schema[1].type", "complex column type"),
    ({"schema": "id BIGINT, s STRUCT<a: INT, b: STRING>, v INT"}, "schema[1].type", "complex column type"),
])
def test_nested_fields_are_strict(raw: dict[str, Any], field: str, text: str) -> None:
    err = spec_error(raw)
    assert err.field == field, str(err)
    assert str(err).startswith(f"{field}: ") and text in str(err), str(err)
    assert "Fix:" in str(err)


def test_unknown_property_error_lists_the_known_ones() -> None:
    err = spec_error({"schema": BASE, "properties": {"retain": "1"}})
    assert all(name in err.fix for name in DEFAULT_PROPERTIES) and "'user.'" in err.fix


def test_user_properties_and_numbers_are_kept_as_text() -> None:
    spec = TableSpec.from_dict({"schema": BASE, "properties": {"user.owner": "team-a", "checkpoint.interval": 5}})
    assert spec.properties == {"user.owner": "team-a", "checkpoint.interval": "5"}


def test_column_names_resolve_to_the_schema_spelling() -> None:
    spec = TableSpec.from_dict({
        "schema": "Id BIGINT NOT NULL, name STRING, amount DOUBLE, v BIGINT, dt STRING",
        "partition_by": ["DT"], "bucket": {"columns": ["ID"], "count": 4, "sort_columns": ["NAME"]},
        "primary_key": ["id"], "version_column": "V", "merge_operators": {"Amount": "sum"}})
    assert spec.partition_columns == ("dt",)
    assert spec.bucket == BucketSpec(("Id",), 4, ("name",))
    assert spec.primary_key == ("Id",)
    assert spec.version_column == "v"
    assert dict(spec.merge_operators) == {"amount": "sum"}
    assert spec.data_columns == ["Id", "name", "amount", "v"]
    assert TableSpec.from_dict(spec.to_dict()) == spec
    # the constructor resolves too
    assert TableSpec((Column("dt", "string"), Column("x", "int")), partition_columns=("DT",)).partition_columns \
        == ("dt",)


def test_nullable_false_is_kept() -> None:
    spec = TableSpec.from_dict({"columns": [{"name": "id", "type": "bigint", "nullable": False},
                                            {"name": "v", "type": "double"}]})
    assert spec.columns == (Column("id", "bigint", False), Column("v", "double", True))


@pytest.mark.parametrize("value", ["20240101", "2024-1-1", "2024-01-01T00:00", 20240101,
                                   "\uff12\uff10\uff12\uff14-\uff10\uff11-\uff10\uff11"])
def test_date_literals_must_be_iso(value: Any) -> None:
    from airflow_lake.lake.spec.types import coerce_literal

    with pytest.raises(LakeSpecError) as info:
        coerce_literal("date", value, "partitions[0].dt")
    assert info.value.field == "partitions[0].dt" and "2024-01-01" in info.value.fix
    assert coerce_literal("date", "2024-01-01", "x") == "2024-01-01"


@pytest.mark.parametrize("path", [None, "", "   ", "a\x00b", 5, b"/tmp/x"])
def test_table_path_must_be_a_real_path(path: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LakeSpecError) as info:
        LakeTable.create(path, {"schema": "id BIGINT"})
    assert info.value.field == "table" and str(info.value).startswith("table: ")
    assert list(tmp_path.iterdir()) == []


def test_table_path_may_be_path_like(tmp_path: Any) -> None:
    table = LakeTable.create(tmp_path / "t", {"schema": "id BIGINT"})  # type: ignore[arg-type]
    assert table.url == str(tmp_path / "t")


@pytest.mark.parametrize("limit", ["3", -1, 2.0, True])
def test_timeline_limit_must_be_a_whole_number(limit: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT"})
    with pytest.raises(LakeSpecError) as info:
        table.timeline(limit=limit)
    assert info.value.field == "limit" and repr(limit) in str(info.value)
    assert [i.action for i in table.timeline(limit=1)] == ["create"]


def test_a_table_created_before_strict_properties_still_opens(table_path: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """Earlier versions accepted any property name (and `inf`): such a stored spec still reads."""
    from airflow_lake.lake.format import paths

    table = LakeTable.create(table_path, {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                          "properties": {"user.owner": "me"}})
    entry = Path(table.storage.path(paths.log_file(0)))
    entry.write_text(entry.read_text().replace('"user.owner":"me"',
                                               '"custom.key":"x","heartbeat.interval.seconds":"inf"'))
    reopened = LakeTable.open(table_path)
    assert reopened.spec.partition_columns == ("dt",)
    assert reopened.spec.float_property("heartbeat.interval.seconds") == 10.0  # the default applies
    assert "custom.key" in caplog.text and reopened.snapshot().seq == 0


def test_partition_keys_of_a_write_resolve_case_insensitively() -> None:
    from airflow_lake.lake.spec.partitions import normalize_partitions

    spec = TableSpec.from_dict({"schema": "id BIGINT, dt STRING", "partition_by": ["dt"]})
    assert normalize_partitions(spec, [{"DT": "2024-01-01"}]) == [{"dt": "2024-01-01"}]
    with pytest.raises(LakeSpecError, match=r"partitions\[0\]: partition column 'dt' is given twice"):
        normalize_partitions(spec, [{"DT": "a", "dt": "b"}])
    with pytest.raises(LakeSpecError, match="is not a partition column"):
        normalize_partitions(spec, [{1: "a"}])


def test_as_of_takes_ascii_digits_only(table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT"})
    assert table.resolve("0") == 0
    with pytest.raises(LakeSpecError, match="as_of"):
        table.resolve("²")
    with pytest.raises(LakeSpecError, match="as_of"):
        table.resolve("²" * 17)


@pytest.mark.parametrize(("extra", "message"), [
    ({"partition_count": []}, "bucket.partition_count: unknown field"),
    ({"partition_counts": [{"partition": {"dt": "a"}, "count": 16, "cnt": 1}]},
     "bucket.partition_counts[0].cnt: unknown"),
    ({"partition_counts": "x"}, "bucket.partition_counts: expected a list"),
    ({"partition_counts": [{"partition": "a", "count": 16}]},
     "bucket.partition_counts[0].partition: 'a' is not an object"),
    ({"partition_counts": [{"partition": {"dt": "a"}, "count": "16"}]},
     "bucket.partition_counts[0].count: '16' is not"),
    ({"partition_counts": [{"partition": {"dt": "a"}, "count": 16}, {"partition": {"DT": "a"}, "count": 32}]},
     "bucket.partition_counts[1]: partition {'dt': 'a'} is listed twice"),
    ({"from_partition": "2024"}, "bucket.from_partition: '2024' is not an object"),
    ({"from_partition": {"day": "a"}}, "bucket.from_partition: 'day' is not a partition column"),
    ({"from_partition": {"dt": None}}, "bucket.from_partition: a null value cannot start"),
    ({"from_partition": {"dt": "b"}, "partition_counts": [{"partition": {"dt": "a"}, "count": 16}]},
     "is before `from_partition` and stays plain"),
    ({"hash": "hive"}, "bucket.hash: unknown bucket hash 'hive'"),
    ({"hash": 3}, "bucket.hash: expected a string"),
])
def test_nested_bucket_fields_are_strict(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(LakeSpecError) as err:
        TableSpec.from_dict({"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                             "bucket": {"columns": ["id"], "count": 8, **extra}})
    assert message in str(err.value) and "Fix:" in str(err.value)


def test_per_partition_bucket_fields_round_trip() -> None:
    raw = {"columns": ["id"], "count": 8, "sort_columns": [], "from_partition": {"dt": "b"},
           "partition_counts": [{"partition": {"dt": "c"}, "count": 32}]}
    spec = TableSpec.from_dict({"schema": "id BIGINT, dt STRING", "partition_by": ["dt"], "bucket": raw})
    assert spec.to_dict()["bucket"] == raw and TableSpec.from_dict(spec.to_dict()) == spec
    assert spec.bucket is not None and spec.bucket.counts == [8, 32]


@pytest.mark.parametrize(("properties", "field", "shown"), [
    ({"heartbeat.timeout.seconds": "5"}, "properties.heartbeat.timeout.seconds", "5 s"),  # below the interval
    ({"heartbeat.timeout.seconds": "19.9"}, "properties.heartbeat.timeout.seconds", "19.9 s"),  # one missed beat
    ({"heartbeat.interval.seconds": "61"}, "properties.heartbeat.interval.seconds", "120 s"),
    ({"heartbeat.interval.seconds": "2", "heartbeat.timeout.seconds": "1"}, "properties.heartbeat.timeout.seconds",
     "1 s"),
])
def test_a_heartbeat_timeout_must_cover_two_beats(properties: dict[str, str], field: str, shown: str,
                                                   table_path: str) -> None:
    """A timeout below the interval let any other process roll back a live writer (issue 20)."""
    err = spec_error({"schema": BASE, "properties": properties})
    assert err.field == field and f"a heartbeat timeout of {shown} is shorter than 2 heartbeat intervals" in str(err)
    assert "Set heartbeat.timeout.seconds to at least 2 x heartbeat.interval.seconds" in str(err)
    with pytest.raises(LakeSpecError):
        LakeTable.create(table_path, {"schema": BASE, "properties": properties})
    assert not LakeTable.exists(table_path)
    ok = TableSpec.from_dict({"schema": BASE, "properties": {"heartbeat.interval.seconds": "0.5",
                                                             "heartbeat.timeout.seconds": "1"}})
    assert ok.float_property("heartbeat.timeout.seconds") == 1.0


def test_a_stored_heartbeat_pair_that_would_fail_today_falls_back_to_the_defaults(
        table_path: str, caplog: pytest.LogCaptureFixture) -> None:
    """A table created before the check still opens; its writers use the defaults (10 s / 120 s), which agree."""
    from airflow_lake.lake.format import paths

    table = LakeTable.create(table_path, {"schema": "id BIGINT", "properties": {"user.owner": "me"}})
    entry = Path(table.storage.path(paths.log_file(0)))
    entry.write_text(entry.read_text().replace(
        '"user.owner":"me"', '"user.owner":"me","heartbeat.interval.seconds":"30","heartbeat.timeout.seconds":"5"'))
    reopened = LakeTable.open(table_path)
    assert reopened.spec.float_property("heartbeat.interval.seconds") == 10.0
    assert reopened.spec.float_property("heartbeat.timeout.seconds") == 120.0
    assert reopened.spec.properties == {"user.owner": "me"} and "heartbeat" in caplog.text


def test_duplicate_keys_in_a_json_spec_are_named() -> None:
    from airflow_lake.lake.spec.strict import loads_spec

    assert loads_spec('{"a": {"b": [1, {"c": 2}]}}') == {"a": {"b": [1, {"c": 2}]}}
    for text, field in [('{"a": 1, "a": 2}', "a"), ('{"x": {"b": [1, {"c": 2, "c": 3}]}}', "x.b[1].c"),
                        ('[{"k": 1}, {"k": 1, "k": 1}]', "[1].k")]:
        with pytest.raises(LakeSpecError) as info:
            loads_spec(text)
        assert info.value.field == field and "given twice" in str(info.value), text
