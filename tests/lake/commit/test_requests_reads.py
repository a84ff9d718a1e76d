"""A request whose query reads lake tables depends on what they held (issue 33 item 9): a re-run under the same
request id after its input changed must not return the old result. An overwrite rebuilds; an append is refused
clearly; a retry whose input did not change (or changed only where its query does not read) returns the first
result, as every retry does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from tests.support import write_source

PARTITIONED = {"schema": "id BIGINT NOT NULL, dt STRING, v DOUBLE", "partition_by": ["dt"]}


def total(spark: Any, path: str) -> list[float]:
    return [r[0] for r in LakeTable.open(path).read(spark).collect()]


@pytest.fixture
def orders(spark: Any, tmp_path: Path) -> str:
    """A table of orders whose amounts sum to 15.0 on day d1."""
    path = str(tmp_path / "orders")
    LakeTable.create(path, PARTITIONED)
    run(spark, "write", {"table": path, "source": {"path": write_source(tmp_path / "d1.parquet", [1, 2, 3, 4, 5],
                                                                       "d1")}})
    return path


def test_a_rerun_of_an_overwrite_after_its_input_changed_rebuilds_and_a_plain_retry_returns_the_first_result(
        spark: Any, tmp_path: Path, orders: str) -> None:
    """The user's pipeline: revenue rebuilt from orders with `request_id="{{ ds }}-revenue"`. Before: the re-run
    after a late order returned `already_committed: true` and revenue kept 15.0 while orders summed to 115.0."""
    revenue = str(tmp_path / "revenue")
    LakeTable.create(revenue, {"schema": "total DOUBLE"})
    rebuild = {"table": revenue, "mode": "overwrite", "request_id": "2024-01-01-revenue",
               "source": {"query": "SELECT sum(v) AS total FROM o WHERE dt = 'd1'", "tables": {"o": orders}}}
    first = run(spark, "write", rebuild)
    assert total(spark, revenue) == [15.0]
    retry = run(spark, "write", rebuild)  # the input did not change: an ordinary retry
    assert retry["already_committed"] is True and retry["instant"] == first["instant"]
    run(spark, "write", {"table": orders, "source": {"path": write_source(tmp_path / "late.parquet", [100], "d1")}})

    rerun = run(spark, "write", rebuild)
    assert total(spark, revenue) == [115.0]
    assert rerun["already_committed"] is False and rerun["instant"] != first["instant"]
    again = run(spark, "write", rebuild)  # a retry of the rebuild returns the rebuild
    assert again["already_committed"] is True and again["instant"] == rerun["instant"]
    assert total(spark, revenue) == [115.0]


def test_an_append_from_lake_tables_whose_input_changed_is_refused_clearly(
        spark: Any, tmp_path: Path, orders: str) -> None:
    """Running it again would add its rows a second time; returning the first result would skip the new ones."""
    copy = str(tmp_path / "copy")
    LakeTable.create(copy, PARTITIONED)
    append = {"table": copy, "request_id": "2024-01-01-copy",
              "source": {"query": "SELECT * FROM o WHERE dt = 'd1'", "tables": {"o": orders}}}
    first = run(spark, "write", append)
    run(spark, "write", {"table": orders, "source": {"path": write_source(tmp_path / "late.parquet", [100], "d1")}})
    with pytest.raises(LakeSpecError, match=r"request_id.*'2024-01-01-copy' committed instant .* and o changed since"
                                            r".*Nothing was written.*own request id") as info:
        run(spark, "write", append)
    assert "needs no fixed request id" in str(info.value)
    assert LakeTable.open(copy).commit_log.head() == first["seq"]  # nothing written


def test_a_commit_the_querys_filters_exclude_does_not_change_the_request(
        spark: Any, tmp_path: Path, orders: str) -> None:
    """The request is what its query read: the files of d1. A new day d2 (or a clean) leaves them as they were."""
    copy = str(tmp_path / "copy")
    LakeTable.create(copy, PARTITIONED)
    append = {"table": copy, "request_id": "2024-01-01-copy",
              "source": {"query": "SELECT * FROM o", "tables": {"o": {"path": orders,
                                                                      "filters": [["dt", "=", "d1"]]}}}}
    first = run(spark, "write", append)
    run(spark, "write", {"table": orders, "source": {"path": write_source(tmp_path / "d2.parquet", [7], "d2")}})
    run(spark, "clean", {"table": orders})
    retry = run(spark, "write", append)
    assert retry["already_committed"] is True and retry["instant"] == first["instant"]
    assert sorted(r[0] for r in LakeTable.open(copy).read(spark).collect()) == [1, 2, 3, 4, 5]


def test_an_upsert_from_lake_tables_whose_input_changed_is_refused_and_an_unchanged_retry_returns_the_first(
        spark: Any, tmp_path: Path, orders: str) -> None:
    customers = str(tmp_path / "customers")
    LakeTable.create(customers, {"schema": "id BIGINT NOT NULL, v DOUBLE", "primary_key": ["id"],
                                 "bucket": {"columns": ["id"], "count": 2}})
    upsert = {"table": customers, "version": 1, "request_id": "2024-01-01-customers",
              "source": {"query": "SELECT id, v FROM o", "tables": {"o": orders}}}
    first = run(spark, "versioned_upsert", upsert)
    assert run(spark, "versioned_upsert", upsert)["already_committed"] is True
    run(spark, "write", {"table": orders, "source": {"path": write_source(tmp_path / "late.parquet", [100], "d1")}})
    with pytest.raises(LakeSpecError, match=r"'2024-01-01-customers' committed instant .* o changed since"):
        run(spark, "versioned_upsert", upsert)
    assert LakeTable.open(customers).commit_log.head() == first["seq"]


def test_a_versioned_delete_whose_keys_query_read_changed_tables_is_refused_and_an_unchanged_retry_returns_the_first(
        spark: Any, tmp_path: Path, orders: str) -> None:
    """A GDPR delete whose keys come from a query over lake tables, re-run under the same request id after more
    ids were listed: answering with the first result would leave the new ids' rows in place."""
    customers = str(tmp_path / "customers")
    LakeTable.create(customers, {"schema": "id BIGINT NOT NULL, v DOUBLE", "primary_key": ["id"],
                                 "bucket": {"columns": ["id"], "count": 2}})
    run(spark, "versioned_upsert", {"table": customers, "version": 1, "source": {
        "query": "SELECT id, v FROM o", "tables": {"o": orders}}})
    forget = {"table": customers, "version": 2, "request_id": "2024-01-01-gdpr",
              "keys": {"query": "SELECT id FROM o WHERE id < 3", "tables": {"o": orders}}}
    first = run(spark, "delete", forget)
    assert sorted(r[0] for r in LakeTable.open(customers).read(spark).collect()) == [3, 4, 5]
    retry = run(spark, "delete", forget)
    assert retry["already_committed"] is True and retry["seq"] == first["seq"]
    run(spark, "write", {"table": orders, "source": {"path": write_source(tmp_path / "late.parquet", [0], "d1")}})
    with pytest.raises(LakeSpecError, match=r"'2024-01-01-gdpr' committed instant .* o changed since"):
        run(spark, "delete", forget)
    assert LakeTable.open(customers).commit_log.head() == first["seq"]  # nothing written
