"""Schema evolution as pure spec transforms (no Spark): physical names, retired names, protected columns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.evolution import Protected, apply_changes, parse_changes
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import widening_problem


def spec(**extra: Any) -> TableSpec:
    return TableSpec.from_dict({"schema": "id INT, name STRING, amount FLOAT, dt STRING", "partition_by": ["dt"],
                                **extra})


def alter(base: TableSpec, *changes: dict[str, Any], **kwargs: Any) -> TableSpec:
    return apply_changes(base, parse_changes(list(changes)), **kwargs)


def pk_spec() -> TableSpec:
    return TableSpec.from_dict({"schema": "k INT, v INT, n BIGINT, tag STRING, ver BIGINT", "primary_key": ["k"],
                                "bucket": {"columns": ["k"], "count": 4}, "version_column": "ver",
                                "merge_operators": {"n": "sum", "tag": "last_non_null"},
                                "null_values": {"tag": ["null"]}})


def test_specs_never_altered_keep_their_json_byte_for_byte() -> None:
    raw: dict[str, Any] = {"columns": [{"name": "id", "type": "int", "nullable": True}], "partition_by": [],
                           "bucket": None,
           "primary_key": [], "version_column": None, "merge_operators": {}, "properties": {}}
    assert json.dumps(TableSpec.from_dict(raw).to_dict()) == json.dumps(raw)


def test_add_anywhere_then_rename_drop_and_re_add_under_fresh_physical_names() -> None:
    out = alter(spec(), {"add": "c2", "type": "bigint", "after": "id"}, {"add": "c0", "type": "string", "first": True},
                {"rename": "name", "to": "label"}, {"drop": "amount"}, {"add": "amount", "type": "double"},
                {"add": "name", "type": "int"})
    assert out.column_names == ["c0", "id", "c2", "label", "dt", "amount", "name"]
    assert out.physical_names == {"c0": "c0", "id": "id", "c2": "c2", "label": "name", "dt": "dt",
                                  "amount": "amount__2", "name": "name__2"}
    assert out.retired_physical == ("amount",)
    again = TableSpec.from_dict(out.to_dict())  # the JSON form round-trips, physical names and retired ones
    assert again == out and again.to_dict()["columns"][3] == {"name": "label", "type": "string", "nullable": True,
                                                              "physical": "name"}
    assert widening_problem("int", "bigint") is None


def test_a_physical_name_can_never_be_taken_again() -> None:
    dropped = alter(spec(), {"drop": "name"})
    with pytest.raises(LakeSpecError, match="physical name of a dropped column"):
        TableSpec.from_dict({**dropped.to_dict(), "columns": [*dropped.to_dict()["columns"],
                                                             {"name": "x", "type": "int", "physical": "NAME"}]})
    twice = alter(dropped, {"add": "name", "type": "int"}, {"drop": "name"}, {"add": "name", "type": "int"})
    assert twice.physical_of("name") == "name__3" and twice.retired_physical == ("name", "name__2")


def test_rename_follows_into_key_version_merge_operators_null_values_and_sort_columns() -> None:
    out = alter(pk_spec(), {"rename": "tag", "to": "label"}, {"rename": "ver", "to": "version"},
                {"rename": "n", "to": "total"})
    assert out.merge_operators == {"total": "sum", "label": "last_non_null"}
    assert out.null_values == {"label": ("null",)} and out.version_column == "version"
    assert out.physical_of("label") == "tag"
    sorted_spec = TableSpec.from_dict({"schema": "k BIGINT, s INT, v INT", "bucket": {"columns": ["k"], "count": 2,
                                                                                      "sort_columns": ["s"]}})
    assert alter(sorted_spec, {"rename": "s", "to": "t"}).bucket.sort_columns == ("t",)  # type: ignore[union-attr]


def test_widening_rules() -> None:
    allowed = [("tinyint", "smallint"), ("smallint", "bigint"), ("int", "bigint"), ("int", "double"),
               ("float", "double"), ("decimal(5,2)", "decimal(8,3)"), ("decimal(10,2)", "decimal(20,2)"),
               ("int", "decimal(12,2)"), ("date", "timestamp_ntz")]
    for old, new in allowed:
        assert widening_problem(old, new) is None, (old, new)
    for old, new in [("bigint", "int"), ("int", "int"), ("double", "float"), ("decimal(5,2)", "decimal(5,3)"),
                     ("decimal(10,4)", "decimal(11,2)"), ("int", "decimal(10,2)"), ("string", "int"),
                     ("int", "string"), ("bigint", "double")]:
        assert widening_problem(old, new) is not None, (old, new)
    with pytest.raises(LakeSpecError, match="timestamp_ntz") as err:
        alter(TableSpec.from_dict({"schema": "d DATE, x INT"}), {"widen": "d", "type": "timestamp"})
    assert err.value.field == "changes[0].type"
    out = alter(spec(), {"widen": "id", "type": "bigint"}, {"widen": "amount", "type": "double"})
    assert [out.column(c).type for c in ("id", "amount")] == ["bigint", "double"]


@pytest.mark.parametrize(("change", "message"), [
    ({"drop": "dt"}, "'dt' cannot be dropped: it is a partition column"),
    ({"rename": "dt", "to": "day"}, "'dt' is a partition column: the table's directories are named dt=<value>"),
    ({"widen": "dt", "type": "bigint"}, "string does not widen to bigint"),
    ({"drop": "k"}, "'k' cannot be dropped: it is a bucket column"),
    ({"rename": "k", "to": "key"}, "'k' is a bucket column"),
    ({"widen": "k", "type": "bigint"}, "'k' is a bucket column: a row's bucket is the hash of its value"),
    ({"drop": "ver"}, "'ver' cannot be dropped: it is the version column"),
    ({"widen": "ver", "type": "double"}, "int does not widen|bigint does not widen"),
    ({"drop": "nope"}, "unknown column 'nope'"),
    ({"add": "K", "type": "int"}, "already has a column 'k'"),
    ({"add": "x", "type": "int", "nullable": False}, "cannot be NOT NULL"),
    ({"add": "x", "type": "array<int>"}, "complex column type"),
    ({"add": "x", "type": "int", "after": "nope"}, "unknown column 'nope'"),
    ({"rename": "v", "to": "N"}, "already has a column 'n'"),
    ({"rename": "v", "to": "v"}, "already has that name"),
    ({"unset_properties": ["clean.retain.hours"]}, "is not set on the table"),
    ({"set_properties": {"clean.retain.hourz": "1"}}, "unknown table property"),
    ({"set_properties": {"clean.retain.hours": "0"}}, "not a finite positive number"),
    ({"drop": "v", "rename": "n", "to": "m"}, "names 2 changes"),
    ({"truncate": "v"}, "names no change"),
])
def test_bad_changes_are_refused_naming_the_change_and_why(change: dict[str, Any], message: str) -> None:
    base = TableSpec.from_dict({**pk_spec().to_dict(), "schema": None, "partition_by": ["dt"],
                                "columns": [*pk_spec().to_dict()["columns"],
                                            {"name": "dt", "type": "string", "nullable": True}]})
    with pytest.raises(LakeSpecError, match=message) as err:
        alter(base, {"add": "fine", "type": "int"}, change)
    assert err.value.field.startswith("changes[1]"), err.value.field


def test_key_and_sort_columns_protected_and_protected_columns_from_the_tables_history() -> None:
    with pytest.raises(LakeSpecError, match="primary-key column"):
        alter(TableSpec.from_dict({"schema": "k BIGINT, j INT, v INT", "primary_key": ["k", "j"],
                                   "bucket": {"columns": ["k"], "count": 2}}), {"drop": "j"})
    sorted_spec = TableSpec.from_dict({"schema": "k BIGINT, s INT, v INT",
                                       "bucket": {"columns": ["k"], "count": 2, "sort_columns": ["s"]}})
    with pytest.raises(LakeSpecError, match="bucket sort column"):
        alter(sorted_spec, {"drop": "s"})
    why = {"v": "pending clustering plan 1 sorts by it"}
    for change in ({"drop": "v"}, {"rename": "v", "to": "w"}, {"widen": "v", "type": "bigint"}):
        with pytest.raises(LakeSpecError, match="pending clustering plan 1 sorts by it"):
            alter(sorted_spec, change, protected=why)
    assert alter(sorted_spec, {"add": "z", "type": "int"}, protected=why).has_column("z")
    only = {"v": Protected("a plan sorts by it", frozenset({"drop", "rename"}))}
    assert alter(sorted_spec, {"widen": "v", "type": "bigint"}, protected=only).column("v").type == "bigint"


def test_empty_or_malformed_change_lists_are_refused() -> None:
    bad: list[Any] = [[], None, "add c", {"add": "c"}]
    for raw in bad:
        with pytest.raises(LakeSpecError, match="changes"):
            parse_changes(raw)
    with pytest.raises(LakeSpecError, match="changes"):
        apply_changes(spec(), [])


def test_a_partition_column_keeps_its_name_in_the_files() -> None:
    with pytest.raises(LakeSpecError, match="partition directories are named by the column"):
        TableSpec.from_dict({"columns": [{"name": "dt", "type": "string", "physical": "day"},
                                         {"name": "x", "type": "int"}], "partition_by": ["dt"]})


def test_properties_set_and_unset_in_one_list() -> None:
    out = alter(spec(), {"set_properties": {"clean.retain.hours": 24, "user.owner": "me"}},
                {"unset_properties": "user.owner"})
    assert dict(out.properties) == {"clean.retain.hours": "24"}
    with pytest.raises(LakeSpecError, match="heartbeat"):
        alter(spec(), {"set_properties": {"heartbeat.timeout.seconds": "5"}})
