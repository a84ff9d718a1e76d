"""Sources fail loudly: a query is read-only, CSV headers and JSON keys must match, malformed values fail the
write, a lake table's directory is not a file source; each refusal names the field and commits nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSchemaError, LakeSpecError, LakeTable
from tests.support import parquet_files_on_disk

SCHEMA = "id BIGINT NOT NULL, name STRING, amount BIGINT, dt STRING"
ROWS = [(1, "a", 10, "d1"), (2, "b", 20, "d1")]


@pytest.fixture
def table(spark: Any, table_path: str, tmp_path: Path) -> LakeTable:
    LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    run(spark, "write", {"table": table_path, "source": {"path": csv(tmp_path / "seed", "id,name,amount,dt", ROWS),
                                                            "format": "csv"}})
    return LakeTable.open(table_path)


def csv(directory: Path, header: str | None, rows: list[tuple[Any, ...]], name: str = "part.csv") -> str:
    directory.mkdir(parents=True, exist_ok=True)
    lines = ([header] if header is not None else []) + [",".join(str(v) for v in row) for row in rows]
    (directory / name).write_text("\n".join(lines) + "\n")
    return str(directory)


def jsonl(directory: Path, records: list[dict[str, Any]]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "part.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(directory)


def state(table: LakeTable) -> tuple[list[int], list[str], set[str], set[str]]:
    """Log entries other than rollbacks (an aborted write records one), live files, data files on disk, and
    directories outside _lake."""
    fresh = LakeTable.open(table.url)
    root = Path(table.url)
    dirs = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and "_lake" not in p.parts}
    log = fresh.commit_log
    entries = [e.seq for e in (log.read(seq) for seq in range(log.head() + 1)) if e.action != "rollback"]
    return entries, sorted(f.path for f in fresh.snapshot().files), parquet_files_on_disk(table.url), dirs


def rows(spark: Any, table: LakeTable) -> list[tuple[Any, ...]]:
    df = LakeTable.open(table.url).read(spark)
    return sorted(tuple(r) for r in df.select("id", "name", "amount", "dt").collect())


def refused(spark: Any, table: LakeTable, source: dict[str, Any], error: type[Exception], *texts: str) -> str:
    """Run a write that must fail; check the message, that nothing changed, and that the table still works."""
    before = state(table)
    with pytest.raises(error) as caught:
        run(spark, "write", {"table": table.url, "source": source})
    message = str(caught.value)
    for text in texts:
        assert text in message, message
    assert state(table) == before
    assert rows(spark, table) == ROWS
    return message


def still_writes(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "more", "dt,amount,name,id", [("d2", 30, "c", 3)])
    run(spark, "write", {"table": table.url, "source": {"path": source, "format": "csv"}})
    assert rows(spark, table) == [*ROWS, (3, "c", 30, "d2")]


# --- queries are read-only -------------------------------------------------------------------------------------

def test_insert_overwrite_directory_into_another_table_is_refused(spark: Any, table: LakeTable, tmp_path: Path
                                                                   ) -> None:
    other = str(tmp_path / "other")
    LakeTable.create(other, {"schema": "id BIGINT"})
    LakeTable.open(other).write(spark.createDataFrame([(5,)], "id BIGINT"))
    other_before = sorted(p.name for p in Path(other).rglob("*"))
    query = f"INSERT OVERWRITE DIRECTORY '{other}' USING parquet SELECT 1L AS id"
    refused(spark, table, {"query": query}, LakeSpecError, "source.query:", "not a read-only query",
            "Give a SELECT")
    assert sorted(p.name for p in Path(other).rglob("*")) == other_before
    assert sorted(r.id for r in LakeTable.open(other).read(spark).collect()) == [5]
    still_writes(spark, table, tmp_path)


@pytest.mark.parametrize("query", [
    "INSERT INTO t SELECT * FROM t",
    "CREATE TABLE zz (a INT) USING parquet",
    "CREATE TEMPORARY FUNCTION evil AS 'com.example.Evil' USING JAR '/tmp/evil.jar'",
    "DROP TABLE IF EXISTS t",
    "ALTER TABLE t ADD COLUMNS (b INT)",
    "CACHE TABLE c AS SELECT * FROM t",
    "SET spark.sql.shuffle.partitions=3",
    "SELECT * FROM t; DROP TABLE t",
    "SELECT * FROM t) AS x; DROP VIEW t; SELECT * FROM (SELECT 1",
    "EXPLAIN SELECT * FROM t",
])
def test_commands_are_refused_before_anything_runs(spark: Any, table: LakeTable, query: str) -> None:
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    refused(spark, table, {"query": query, "tables": {"t": table.url}}, LakeSpecError, "source.query:",
            "not a read-only query")
    assert spark.conf.get("spark.sql.shuffle.partitions") == partitions


@pytest.mark.parametrize("query", [
    "SELECT id, reflect('java.lang.System', 'getProperty', 'user.home') AS name, amount, dt FROM t",
    "SELECT id, name, amount, dt FROM t WHERE java_method('java.lang.Math', 'abs', -1) = 1",
    "SELECT id, name, amount, dt FROM t WHERE TRY_REFLECT ('java.lang.Math', 'abs', -1) IS NOT NULL",
])
def test_queries_calling_java_are_refused(spark: Any, table: LakeTable, query: str) -> None:
    refused(spark, table, {"query": query, "tables": {"t": table.url}}, LakeSpecError, "source.query:",
            "runs Java code on the cluster")


def test_a_script_transform_is_refused_and_never_runs(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    """SELECT TRANSFORM (...) USING 'command' starts a process on the cluster: planned, refused, never run."""
    marker = tmp_path / "ran"
    query = (f"SELECT TRANSFORM(id, name, amount, dt) USING 'touch {marker}; cat' "
             "AS (id BIGINT, name STRING, amount BIGINT, dt STRING) FROM t")
    refused(spark, table, {"query": query, "tables": {"t": table.url}}, LakeSpecError, "source.query:",
            "runs an external command")
    assert not marker.exists()


@pytest.mark.parametrize("query", [
    "WITH c AS (SELECT * FROM t) SELECT id + 10 AS id, name, amount, dt FROM c",
    "SELECT id + 10 AS id, name, amount, dt FROM t ORDER BY id LIMIT 5 -- a trailing comment",
    "FROM t SELECT id + 10 AS id, name, amount, dt",
    "VALUES (11L, 'a', 10L, 'd1'), (12L, 'b', 20L, 'd1') AS v(id, name, amount, dt)",
])
def test_queries_still_work(spark: Any, table: LakeTable, query: str) -> None:
    run(spark, "write", {"table": table.url, "source": {"query": query, "tables": {"t": table.url}}})
    assert rows(spark, table) == [*ROWS, (11, "a", 10, "d1"), (12, "b", 20, "d1")]


def test_unknown_view_is_a_spec_error(spark: Any, table: LakeTable) -> None:
    refused(spark, table, {"query": "SELECT * FROM nope"}, LakeSpecError, "source.query:", "cannot be resolved")


@pytest.mark.slow
def test_command_line_refuses_the_insert_with_exit_2_and_one_line(spark: Any, table: LakeTable, tmp_path: Path
                                                                  ) -> None:
    other = str(tmp_path / "other")
    LakeTable.create(other, {"schema": "id BIGINT"})
    LakeTable.open(other).write(spark.createDataFrame([(5,)], "id BIGINT"))
    before = state(table)
    query = f"INSERT OVERWRITE DIRECTORY '{other}' USING parquet SELECT 1L AS id"
    spec = {"table": table.url, "source": {"query": query}}
    done = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "write", "--spec", json.dumps(spec)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "AIRFLOW_LAKE_SPARK_MASTER": "local[1]"})
    assert done.returncode == 2, done.stderr[-3000:]
    assert "airflow-lake: LakeSpecError: source.query: this is not a read-only query" in done.stderr
    assert "Traceback" not in done.stderr
    assert state(table) == before
    assert sorted(r.id for r in LakeTable.open(other).read(spark).collect()) == [5]


# --- CSV --------------------------------------------------------------------------------------------------------

def test_csv_header_in_another_order_is_matched_by_name(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    still_writes(spark, table, tmp_path)  # its header is dt,amount,name,id


def test_csv_header_with_wrong_names_is_refused(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", "id,nme,amount,dt", [(3, "c", 30, "d2")])
    refused(spark, table, {"path": source, "format": "csv"}, LakeSchemaError, "the CSV header has column(s) ['nme']")
    no_id = csv(tmp_path / "no_id", "name,amount,dt", [("c", 30, "d2")])  # (a missing nullable column reads NULL)
    refused(spark, table, {"path": no_id, "format": "csv"}, LakeSchemaError, "the CSV header lacks column(s) "
            "['id']; add them to the files")
    still_writes(spark, table, tmp_path)


def test_csv_without_header_row_is_not_taken_by_position(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", None, [(3, "c", 30, "d2")])
    refused(spark, table, {"path": source, "format": "csv"}, LakeSchemaError, "CSV header")


def test_csv_header_false_takes_table_order(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    short = csv(tmp_path / "short", None, [(4, "d", "d2")])
    refused(spark, table, {"path": short, "format": "csv", "options": {"header": "false"}}, LakeSchemaError,
            "3 fields but the table has 4 columns")
    source = csv(tmp_path / "s", None, [(3, "c", 30, "d2")])
    run(spark, "write", {"table": table.url, "source": {"path": source, "format": "csv",
                                                        "options": {"header": "false"}}})
    assert rows(spark, table) == [*ROWS, (3, "c", 30, "d2")]


def test_csv_second_file_with_another_header_order_is_refused(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    directory = tmp_path / "s"
    csv(directory, "id,name,amount,dt", [(3, "c", 30, "d2")], name="a.csv")
    csv(directory, "name,id,amount,dt", [("d", 4, 40, "d2")], name="b.csv")
    message = refused(spark, table, {"path": str(directory), "format": "csv"}, LakeSchemaError,
                      "b.csv has the header [name, id, amount, dt]", "nothing was committed")
    assert "\n" not in message
    still_writes(spark, table, tmp_path)


def test_csv_malformed_value_fails_the_write(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", "id,name,amount,dt", [(3, "c", 30, "d2"), (4, "d", "notanumber", "d2")])
    refused(spark, table, {"path": source, "format": "csv"}, LakeSchemaError, "4,d,notanumber,d2", "amount",
            "nothing was committed", "PERMISSIVE")
    assert not (Path(table.url) / "dt=d2").exists()
    still_writes(spark, table, tmp_path)


def test_csv_malformed_value_relaxed_explicitly(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", "id,name,amount,dt", [(3, "c", 30, "d2"), (4, "d", "notanumber", "d2")])
    run(spark, "write", {"table": table.url, "source": {"path": source, "format": "csv",
                                                        "options": {"mode": "PERMISSIVE"}}})
    assert rows(spark, table) == [*ROWS, (3, "c", 30, "d2"), (4, "d", None, "d2")]
    run(spark, "write", {"table": table.url, "source": {"path": source, "format": "csv",
                                                        "options": {"mode": "DROPMALFORMED"}}})
    assert len(rows(spark, table)) == 5


def test_csv_header_names_are_not_trimmed_in_silence(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", "id, name,amount,dt", [(3, "c", 30, "d2")])
    refused(spark, table, {"path": source, "format": "csv"}, LakeSchemaError, "has column(s) [' name']")


def test_csv_duplicate_columns_by_case(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", "id,ID,name,amount,dt", [(3, 3, "c", 30, "d2")])
    refused(spark, table, {"path": source, "format": "csv"}, LakeSchemaError, "'id' and 'ID'", "differ only by case")


def test_failfast_mode_gives_the_clear_error(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = csv(tmp_path / "s", "id,name,amount,dt", [(4, "d", "x", "d2")])
    refused(spark, table, {"path": source, "format": "csv", "options": {"mode": "FAILFAST"}}, LakeSchemaError,
            "does not parse")
    refused(spark, table, {"path": source, "format": "csv", "options": {"mode": "LENIENT"}}, LakeSpecError,
            "source.options.mode")


# --- JSON -------------------------------------------------------------------------------------------------------

def test_json_misspelt_key_is_refused(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = jsonl(tmp_path / "s", [{"id": 3, "name": "c", "amount": 30, "dt": "d2"},
                                     {"id": 4, "name": "d", "amont": 40, "dt": "d2"}])
    refused(spark, table, {"path": source, "format": "json"}, LakeSchemaError, "['amont']")
    still_writes(spark, table, tmp_path)


@pytest.mark.parametrize("bad", [{"amount": "forty"}, {"amount": 2.5}, {"id": "4"}])
def test_json_type_error_fails_the_write(spark: Any, table: LakeTable, tmp_path: Path, bad: dict[str, Any]) -> None:
    record = {"id": 4, "name": "d", "amount": 40, "dt": "d2", **bad}
    source = jsonl(tmp_path / "s", [{"id": 3, "name": "c", "amount": 30, "dt": "d2"}, record])
    message = refused(spark, table, {"path": source, "format": "json"}, LakeSchemaError, "JSON record",
                      "does not parse")
    assert "NOT NULL" not in message
    assert not (Path(table.url) / "dt=d2").exists()


def test_json_keys_in_any_order_and_case(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = jsonl(tmp_path / "s", [{"DT": "d2", "Amount": 30, "id": 3, "name": "c"}])
    run(spark, "write", {"table": table.url, "source": {"path": source, "format": "json"}})
    assert rows(spark, table) == [*ROWS, (3, "c", 30, "d2")]


# --- paths ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("inside", ["", "dt=d1", "dt=d1/", "file://"])
def test_lake_table_directory_is_not_a_file_source(spark: Any, table: LakeTable, inside: str) -> None:
    path = "file://" + table.url if inside == "file://" else str(Path(table.url) / inside) if inside else table.url
    with pytest.raises(LakeSpecError) as caught:
        run(spark, "write", {"table": table.url, "source": {"path": path}})
    message = str(caught.value)
    assert message.startswith("source.path:"), message
    assert "'query': 'SELECT * FROM t'" in message and table.url in message
    assert rows(spark, table) == ROWS


def test_query_reading_a_lake_table_directory_as_files_is_refused(spark: Any, table: LakeTable) -> None:
    query = f"SELECT * FROM parquet.`{table.url}/dt=d1`"
    message = refused(spark, table, {"query": query}, LakeSpecError, "source.query:", "inside the lake table")
    assert "'tables': {'t': " in message


def test_query_reading_other_files_directly_is_refused(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    """Files have their own source (`path`, with its checks); a query reads only the lake tables it names."""
    source = csv(tmp_path / "s", "id,name,amount,dt", [(3, "c", 30, "d2")])
    query = ("SELECT CAST(_c0 AS BIGINT) AS id, _c1 AS name, CAST(_c2 AS BIGINT) AS amount, _c3 AS dt "
             f"FROM csv.`{source}` WHERE _c0 <> 'id'")
    refused(spark, table, {"query": query}, LakeSpecError, "source.query:", "reads files directly",
            "`path` source")
    run(spark, "write", {"table": table.url, "source": {"path": source, "format": "csv"}})
    assert rows(spark, table) == [*ROWS, (3, "c", 30, "d2")]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_empty_source_directory(spark: Any, table: LakeTable, tmp_path: Path, fmt: str) -> None:
    (tmp_path / "empty").mkdir()
    refused(spark, table, {"path": str(tmp_path / "empty"), "format": fmt}, LakeSpecError, "source.path:",
            "no " + fmt)


def test_missing_source_path(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    refused(spark, table, {"path": str(tmp_path / "nope")}, LakeSpecError, "source.path:", "does not exist")


def test_parquet_duplicate_columns_by_case(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    path = tmp_path / "dup.parquet"
    pq.write_table(pa.table({"id": [3], "ID": [3], "name": ["c"], "amount": [30], "dt": ["d2"]}), path)
    refused(spark, table, {"path": str(path)}, LakeSchemaError, "two columns named `id`", "differ only by case")


def test_json_duplicate_keys_by_case(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    source = jsonl(tmp_path / "s", [{"id": 3, "ID": 3, "name": "c", "amount": 30, "dt": "d2"}])
    refused(spark, table, {"path": source, "format": "json"}, LakeSchemaError, "differ only by case")
