"""The Iceberg publishing properties: validated when the spec is built (nothing committed on a bad one), and a
table configured for Iceberg without pyiceberg, or with a catalog pyiceberg does not know, says what to do."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.errors import LakeError, LakeSpecError
from tests.lake.lake_core_helpers import append, make_table
from tests.lake.publish import iceberg_readers as readers


@pytest.mark.parametrize(("properties", "message"), [
    ({"publish.iceberg.catalog": "lake", "publish.iceberg.table": "orders"},
     r"properties.publish.iceberg.table: 'orders' is not a valid Iceberg table identifier.*'namespace.table'"),
    ({"publish.iceberg.catalog": "lake", "publish.iceberg.table": "db.my-table"},
     r"'db.my-table' is not a valid Iceberg table identifier"),
    ({"publish.iceberg.catalog": "my lake", "publish.iceberg.table": "db.t"},
     r"properties.publish.iceberg.catalog: 'my lake' is not a valid pyiceberg catalog name"),
    ({"publish.iceberg.catalog": "lake"},
     r"properties.publish.iceberg.table\)?: publishing to Iceberg needs both the catalog and the table"),
    ({"publish.iceberg.table": "db.t"},
     r"properties.publish.iceberg.catalog\)?: publishing to Iceberg needs both"),
])
def test_bad_iceberg_properties_are_refused_before_anything_is_written(tmp_path: Path, properties: dict[str, str],
                                                                       message: str) -> None:
    with pytest.raises(LakeSpecError, match=message):
        LakeTable.create(str(tmp_path / "t"), {"schema": "id BIGINT", "properties": properties})
    assert not LakeTable.exists(str(tmp_path / "t"))
    table = make_table(str(tmp_path / "u"))
    head = table.commit_log.head()
    with pytest.raises(LakeSpecError, match=message):
        table.alter_table([{"set_properties": properties}])
    assert table.commit_log.head() == head


def test_without_pyiceberg_publish_names_the_extra_and_commits_warn(tmp_path: Path, monkeypatch: Any,
                                                                    caplog: Any) -> None:
    readers.configure(monkeypatch, tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "pyiceberg" else real(name, *args))
    with caplog.at_level(logging.WARNING):
        table = make_table(str(tmp_path / "t"), readers.properties())
        append(table, "a")  # the commit lands; publishing it warns
    assert table.commit_log.head() == 1
    assert "pip install 'airflow-lake[iceberg]'" in caplog.text
    with pytest.raises(LakeError, match=r"pyiceberg is not installed. Fix: pip install 'airflow-lake\[iceberg\]'"):
        table.publish()
    # the Delta log is published all the same
    assert (Path(table.url) / "_delta_log" / f"{1:020d}.json").exists()


def test_a_catalog_pyiceberg_does_not_know_is_named_with_the_fix(tmp_path: Path, monkeypatch: Any) -> None:
    readers.configure(monkeypatch, tmp_path)
    table = make_table(str(tmp_path / "t"), readers.properties(catalog="nowhere"))
    with pytest.raises(LakeError, match=r"no pyiceberg catalog 'nowhere' is configured.*"
                                        r"PYICEBERG_CATALOG__NOWHERE__URI"):
        table.publish()
