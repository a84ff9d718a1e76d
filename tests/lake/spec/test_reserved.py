"""Reserved column names (`spec.reserved`): refused in every way a column arrives — create, alter add and rename,
schema evolution of a write and of an upsert — case-insensitively, before anything is committed; the table stays
readable, upsertable and deletable (issue 33, item 8: an added `__lake_d` made a primary-key table unreadable, an
added `_metadata` broke every delete)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.evolution import add_columns, apply_changes, parse_changes
from airflow_lake.lake.spec.reserved import reserved_problem
from airflow_lake.lake.spec.table_spec import Column, TableSpec
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.upsert.upsert import versioned_upsert

RESERVED = ["__lake_d", "__LAKE_D", "__lake_v__x", "__Lake_anything_later", "_airflow_lake_corrupt_record",
            "_metadata", "_METADATA", "_Metadata", "_tmp_metadata_row_index", "_corrupt_record"]
ALLOWED = ["lake_d", "_lake_d", "__lakehouse", "metadata", "_metadata_x", "_meta", "corrupt_record"]
PK = {"schema": "k BIGINT NOT NULL, v STRING", "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 2}}


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_names_case_insensitively(name: str) -> None:
    assert reserved_problem(name) is not None


@pytest.mark.parametrize("name", ALLOWED)
def test_other_names_are_free(name: str) -> None:
    assert reserved_problem(name) is None


@pytest.mark.parametrize("name", ["__lake_d", "_Metadata"])
def test_spec_changes_refuse_reserved_names(name: str) -> None:
    spec = TableSpec.from_dict(PK)
    for changes in ([{"add": name, "type": "string"}], [{"rename": "v", "to": name}]):
        with pytest.raises(LakeSpecError, match=f"column name '{name}' is reserved"):
            apply_changes(spec, parse_changes(changes))
    with pytest.raises(LakeSpecError, match=r"schema_evolution.add: column name .* is reserved"):
        add_columns(spec, [Column(name, "string")])


@pytest.mark.parametrize("name", ["__lake_d", "_metadata"])
def test_create_refuses_a_reserved_name_and_writes_nothing(tmp_path: Any, name: str) -> None:
    path = tmp_path / "t"
    with pytest.raises(LakeSpecError, match=r"columns\[1\]: column name .* is reserved"):
        LakeTable.create(str(path), {"schema": f"k BIGINT, {name} STRING"})
    assert not LakeTable.exists(str(path)) and not (path / "_lake").exists()


def test_alter_adding_lake_d_to_a_primary_key_table_is_refused_and_the_table_still_works(
        spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, PK)
    versioned_upsert(table, spark.createDataFrame([(1, "a"), (2, "b")], "k BIGINT, v STRING"), version=1)
    head = table.commit_log.head()
    for change in ({"add": "__lake_d", "type": "bigint"}, {"add": "__LAKE_D", "type": "bigint"},
                   {"rename": "v", "to": "__lake_seq"}):
        with pytest.raises(LakeSpecError, match="is reserved"):
            table.alter_table([change])
    assert table.commit_log.head() == head  # nothing committed
    versioned_upsert(table, spark.createDataFrame([(2, "c")], "k BIGINT, v STRING"), version=2)
    assert sorted(tuple(r) for r in table.read(spark).collect()) == [(1, "a"), (2, "c")]


def test_alter_adding_metadata_is_refused_and_deletes_keep_working(spark: Any, table_path: str) -> None:
    table = LakeTable.create(table_path, {"schema": "id BIGINT, v STRING"})
    table.write(spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, v STRING"))
    with pytest.raises(LakeSpecError, match="'_metadata' is reserved: it is the name of a hidden column"):
        table.alter_table([{"add": "_metadata", "type": "string"}])
    assert table.delete(spark, where="id = 1") is not None
    assert [tuple(r) for r in table.read(spark).collect()] == [(2, "b")]


def test_schema_evolution_of_writes_and_upserts_refuses_reserved_source_columns(spark: Any, tmp_path: Any) -> None:
    plain = LakeTable.create(str(tmp_path / "plain"), {"schema": "id BIGINT"})
    with pytest.raises(LakeSpecError, match="'_METADATA' is reserved"):
        plain.write(spark.createDataFrame([(1, "x")], "id BIGINT, _METADATA STRING"), schema_evolution="add_columns")
    keyed = LakeTable.create(str(tmp_path / "keyed"), PK)
    with pytest.raises(LakeSpecError, match="'__lake_d' is reserved"):
        versioned_upsert(keyed, spark.createDataFrame([(1, "a", 5)], "k BIGINT, v STRING, __lake_d BIGINT"),
                         version=1, schema_evolution="add_columns")
    assert plain.commit_log.head() == 0 and keyed.commit_log.head() == 0
