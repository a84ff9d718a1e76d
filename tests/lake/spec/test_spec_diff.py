"""spec_diff: every field of a table spec, as a user reads the difference; same_spec ignores physical names."""

from __future__ import annotations

from typing import Any

from airflow_lake.lake.spec.evolution import apply_changes, parse_changes
from airflow_lake.lake.spec.spec_diff import describe, same_spec, spec_diff
from airflow_lake.lake.spec.table_spec import TableSpec

BASE: dict[str, Any] = {"schema": "id BIGINT NOT NULL, name STRING, amount INT, dt STRING", "partition_by": ["dt"],
                        "bucket": {"columns": ["id"], "count": 8}}


def texts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [str(d) for d in spec_diff(TableSpec.from_dict(old), TableSpec.from_dict(new))]


def test_equal_specs_have_no_difference() -> None:
    spec = TableSpec.from_dict(BASE)
    assert spec_diff(spec, TableSpec.from_dict(dict(BASE))) == [] and describe([]) == "no difference"


def test_columns_added_removed_retyped_nullability_and_order() -> None:
    new = {**BASE, "schema": "id BIGINT, dt STRING, amount BIGINT, note STRING"}
    assert texts(BASE, new) == ["columns: removed `name` string", "columns: added `note` string",
                                "columns: `id` NOT NULL -> nullable", "columns: `amount` type int -> bigint",
                                "columns: order id, amount, dt -> id, dt, amount"]


def test_a_rename_by_alter_table_is_recognised_by_the_physical_name() -> None:
    spec = TableSpec.from_dict(BASE)
    altered = apply_changes(spec, parse_changes([{"rename": "name", "to": "label"}, {"drop": "amount"},
                                                 {"add": "amount", "type": "DOUBLE"}]))
    assert [str(d) for d in spec_diff(spec, altered)] == [  # (dropped and added again: at the end now)
        "columns: renamed `name` -> `label`", "columns: `amount` type int -> double",
        "columns: order id, label, amount, dt -> id, label, dt, amount"]
    # the user's own spelling of the altered table (no physical names) is the same table
    given = TableSpec.from_dict({**BASE, "schema": "id BIGINT NOT NULL, label STRING, dt STRING, amount DOUBLE"})
    assert same_spec(given, altered) and spec_diff(given, altered) == []
    assert given != altered  # (they differ only where the data lives in the files)


def test_layout_fields_and_properties() -> None:
    new = {"schema": BASE["schema"], "partition_by": [], "primary_key": ["id"],
           "bucket": {"columns": ["id"], "count": 16, "sort_columns": ["id"]}, "version_column": "amount",
           "merge_operators": {"name": "last_non_null"}, "null_values": {"name": ["null"]},
           "properties": {"clean.retain.hours": "24", "user.owner": "sales"}}
    old = {**BASE, "properties": {"user.owner": "ops", "checkpoint.interval": "50"}}
    assert texts(old, new) == [
        "partition_by: [dt] -> []", "bucket.count: 8 -> 16", "bucket.sort_columns: [] -> [id]",
        "primary_key: [] -> [id]", "version_column: none -> amount", "merge_operators.name: unset -> last_non_null",
        "null_values.name: unset -> ['null']", "properties.checkpoint.interval: 50 -> unset",
        "properties.clean.retain.hours: unset -> 24", "properties.user.owner: ops -> sales"]


def test_bucketing_turned_on_off_and_per_partition() -> None:
    plain = {k: v for k, v in BASE.items() if k != "bucket"}
    assert texts(plain, BASE) == ["bucket: none (plain files) -> 8 buckets on id"]
    later = {**BASE, "bucket": {"columns": ["name"], "count": 8, "hash": "murmur3",
                                "from_partition": {"dt": "2024-03-01"},
                                "partition_counts": [{"partition": {"dt": "2024-03-02"}, "count": 32}]}}
    assert texts(BASE, later) == ["bucket.columns: [id] -> [name]",
                                  "bucket.from_partition: none -> dt=2024-03-01",
                                  "bucket.partition_counts.dt=2024-03-02: unset -> 32"]
    assert texts(later, plain) == ["bucket: 8 buckets on name from partition dt=2024-03-01 -> none (plain files)"]
