"""Bad specs and bad data: a clear error naming the problem and the fix, and nothing committed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeError, LakeSchemaError, LakeSpecError, LakeTable, LakeTableExists, LakeTableNotFound
from airflow_lake.lake.format.instants import pending
from tests.support import parquet_files_on_disk, write_source

SCHEMA = "id BIGINT NOT NULL, dt STRING, v DOUBLE"


@pytest.fixture
def table(spark: Any, table_path: str, tmp_path: Path) -> LakeTable:
    LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    source = write_source(tmp_path / "ok.parquet", range(3), "d1")
    run(spark, "write", {"table": table_path, "source": {"path": source}})
    return LakeTable.open(table_path)


def snapshot_of_everything(table: LakeTable) -> tuple[list[str], set[str], list[str]]:
    """Live files, data files on disk, pending instants."""
    fresh = LakeTable.open(table.url)
    live = sorted(f.path for f in fresh.snapshot().files)
    return live, parquet_files_on_disk(table.url), [p.id for p in pending(fresh.storage)]


def source_file(tmp_path: Path, name: str, **columns: pa.Array) -> str:
    path = tmp_path / name
    pq.write_table(pa.table(columns), path)
    return str(path)


def bad_cases(table: LakeTable, tmp: Path) -> list[tuple[str, str, dict[str, Any], type[Exception], str]]:
    """(case id, operation, spec, error type, text the message must contain)."""
    t = table.url
    good = write_source(tmp / "good.parquet", [7], "d2")
    return [
        ("unknown operation", "compact_everything", {"table": t}, LakeSpecError, "unknown operation"),
        ("missing table path", "write", {"source": {"path": good}}, LakeSpecError, "needs `table`"),
        ("misspelt field", "write", {"table": t, "source": {"path": good}, "mdoe": "append"}, LakeSpecError,
         "mdoe"),
        ("no such table", "write", {"table": str(tmp / "nope"), "source": {"path": good}}, LakeTableNotFound,
         "create it first"),
        ("bad mode", "write", {"table": t, "source": {"path": good}, "mode": "merge"}, LakeSpecError,
         "Use one of append, overwrite"),
        ("path and query", "write", {"table": t, "source": {"path": good, "query": "SELECT 1"}}, LakeSpecError,
         "exactly one of"),
        ("bad format", "write", {"table": t, "source": {"path": good, "format": "xlsx"}}, LakeSpecError,
         "unknown format"),
        ("bad view name", "write", {"table": t, "source": {"query": "SELECT 1", "tables": {"a b": t}}},
         LakeSpecError, "not a valid view name"),
        ("schema mismatch: type", "write",
         {"table": t, "source": {"path": source_file(tmp, "s1.parquet", id=pa.array(["x"]), dt=pa.array(["d"]),
                                                     v=pa.array([1.0]))}},
         LakeSchemaError, "CAST(id AS BIGINT)"),
        ("schema mismatch: unknown column", "write",
         {"table": t, "source": {"path": source_file(tmp, "s2.parquet", id=pa.array([1]), dt=pa.array(["d"]),
                                                     v=pa.array([1.0]), colour=pa.array(["red"]))}},
         LakeSchemaError, "['colour']"),
        ("schema mismatch: missing NOT NULL column", "write",  # (a missing nullable column reads NULL)
         {"table": t, "source": {"path": source_file(tmp, "s3.parquet", v=pa.array([1.0]), dt=pa.array(["d"]))}},
         LakeSchemaError, "lacks column(s) ['id']"),
        ("null in NOT NULL column", "write",
         {"table": t, "source": {"path": source_file(tmp, "s4.parquet", id=pa.array([None, 2], pa.int64()),
                                                     dt=pa.array(["d", "d"]), v=pa.array([1.0, 2.0]))}},
         LakeSchemaError, "NOT NULL"),
        ("../ in a partition value (spec)", "write",
         {"table": t, "source": {"path": good}, "mode": "overwrite", "partitions": [{"dt": "../../etc"}]},
         LakeSpecError, "outside the table"),
        ("../ in a partition value (data)", "write",
         {"table": t, "source": {"path": write_source(tmp / "evil.parquet", [1, 2], ["ok", "../../escape"])}},
         Exception, "outside the table"),
        ("partition key that is not a partition column", "write",
         {"table": t, "source": {"path": good}, "mode": "overwrite", "partitions": [{"day": "d2"}]},
         LakeSpecError, "not a partition column"),
        ("partitions with append", "write", {"table": t, "source": {"path": good}, "partitions": [{"dt": "d2"}]},
         LakeSpecError, "overwrite only"),
        ("rows outside the overwritten partitions", "write",
         {"table": t, "source": {"path": good}, "mode": "overwrite", "partitions": [{"dt": "d1"}]},
         Exception, "not among the partitions being overwritten"),
        ("unknown partition column on create", "create_table",
         {"table": str(tmp / "new1"), "schema": SCHEMA, "partition_by": ["day"]}, LakeSpecError, "unknown column"),
        ("bad bucket count", "create_table",
         {"table": str(tmp / "new2"), "schema": SCHEMA, "bucket": {"columns": ["id"], "count": 0}}, LakeSpecError,
         "bucket count"),
        ("bucket count as text", "create_table",
         {"table": str(tmp / "new3"), "schema": SCHEMA, "bucket": {"columns": ["id"], "count": "8"}}, LakeSpecError,
         "bucket count"),
        ("bad column type", "create_table", {"table": str(tmp / "new4"), "schema": "id BIGNUM"}, LakeSpecError,
         "unsupported column type"),
        ("existing table, other spec", "create_table",
         {"table": t, "schema": "id BIGINT", "if_exists": "ignore"}, LakeTableExists, "different spec"),
        ("rollback of a completed instant", "rollback_pending",
         {"table": t, "instants": [table.commit_log.read(1).instant]}, LakeError, "is completed"),
        ("rollback of a bad id", "rollback_pending", {"table": t, "instants": ["yesterday"]}, LakeSpecError,
         "not an instant id"),
        ("negative retention", "clean", {"table": t, "retain_hours": -1}, LakeSpecError, "retain_hours"),
        # strict at every depth (issue 6): nested typos and wrong types, empty choices, non-finite numbers
        ("nested typo: bucket.sort_by", "create_table",
         {"table": str(tmp / "new5"), "schema": SCHEMA, "bucket": {"columns": ["id"], "count": 4, "sort_by": ["id"]}},
         LakeSpecError, "bucket.sort_by: unknown field"),
        ("nullable as text", "create_table",
         {"table": str(tmp / "new6"), "columns": [{"name": "id", "type": "bigint", "nullable": "false"}]},
         LakeSpecError, "columns[0].nullable: expected true or false"),
        ("nested typo: nulable", "create_table",
         {"table": str(tmp / "new7"), "columns": [{"name": "id", "type": "bigint", "nulable": False}]},
         LakeSpecError, "columns[0].nulable: unknown field"),
        ("empty bucket", "create_table", {"table": str(tmp / "new8"), "schema": SCHEMA, "bucket": {}},
         LakeSpecError, "bucket.columns: a bucket spec needs at least one column"),
        ("partition column listed twice by case", "create_table",
         {"table": str(tmp / "new9"), "schema": "id BIGINT, dt STRING", "partition_by": ["dt", "DT"]},
         LakeSpecError, "partition_by: column 'DT' is listed twice"),
        ("NaN retention property", "create_table",
         {"table": str(tmp / "new10"), "schema": SCHEMA, "properties": {"clean.retain.hours": "nan"}},
         LakeSpecError, "properties.clean.retain.hours: 'nan' is not a finite"),
        ("infinite heartbeat property", "create_table",
         {"table": str(tmp / "new11"), "schema": SCHEMA, "properties": {"heartbeat.interval.seconds": "inf"}},
         LakeSpecError, "properties.heartbeat.interval.seconds: 'inf' is not a finite"),
        ("unknown property", "create_table",
         {"table": str(tmp / "new12"), "schema": SCHEMA, "properties": {"clean.retention": "24"}},
         LakeSpecError, "properties.clean.retention: unknown table property"),
        ("backquoted name with a space", "create_table", {"table": str(tmp / "new13"), "schema": "`my col` BIGINT"},
         LakeSpecError, "backquoted names may not contain spaces"),
        ("map column", "create_table", {"table": str(tmp / "new14"), "schema": "id BIGINT, m MAP<STRING, INT>"},
         LakeSpecError, "schema[1].type: complex column type"),
        ("empty if_exists", "create_table", {"table": str(tmp / "new15"), "schema": SCHEMA, "if_exists": ""},
         LakeSpecError, "if_exists: '' is not allowed"),
        ("empty table path", "create_table", {"table": "   ", "schema": SCHEMA}, LakeSpecError, "table: "),
        ("NUL in table path", "create_table", {"table": str(tmp / "new\x0016"), "schema": SCHEMA},
         LakeSpecError, "table: "),
        ("empty mode", "write", {"table": t, "source": {"path": good}, "mode": ""}, LakeSpecError,
         "mode: '' is not allowed"),
        ("mode of the wrong type", "write", {"table": t, "source": {"path": good}, "mode": 1}, LakeSpecError,
         "mode: 1 is not allowed"),
        ("empty request id", "write", {"table": t, "source": {"path": good}, "request_id": ""}, LakeSpecError,
         "request_id: '' is empty"),
        ("NaN retention", "clean", {"table": t, "retain_hours": float("nan")}, LakeSpecError,
         "retain_hours: nan is not a finite number"),
        ("infinite orphan age", "remove_orphan_files", {"table": t, "older_than_hours": float("inf")}, LakeSpecError,
         "older_than_hours: inf is not a finite number"),
        ("dry_run as text", "remove_orphan_files", {"table": t, "dry_run": "false"}, LakeSpecError,
         "dry_run: expected true or false"),
    ]


def test_bad_input_fails_clearly_and_commits_nothing(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    cases = bad_cases(table, tmp_path)
    assert len(cases) >= 10
    before = snapshot_of_everything(table)
    head = table.commit_log.head()
    for name, operation, spec, error, text in cases:
        with pytest.raises(error) as info:
            run(spark, operation, spec)
        message = str(info.value)
        assert text in message, f"{name}: {message}"
        assert snapshot_of_everything(table)[:2] == before[:2], f"{name} changed the table"
        assert snapshot_of_everything(table)[2] == [], f"{name} left a pending instant"
    # errors found while writing abort the instant: the log only gains rollback records of those attempts
    new_entries = LakeTable.open(table.url).entries_since(head)
    assert {e.action for e in new_entries} <= {"rollback"}
    assert len(new_entries) == 3  # the NOT NULL, the '../' and the outside-partition rows
    for i in range(1, 17):
        assert not (tmp_path / f"new{i}").exists()
    # the table still reads as before, and a good write still works
    assert sorted(r["id"] for r in LakeTable.open(table.url).read(spark).collect()) == [0, 1, 2]
    run(spark, "write", {"table": table.url, "source": {"path": write_source(tmp_path / "g.parquet", [9], "d3")}})
    assert LakeTable.open(table.url).snapshot().rows == 4


def test_command_line_rejects_a_bad_spec_before_spark_starts(table: LakeTable) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_lake.jobs", "write", "--spec", f'{{"table": "{table.url}", "mode": "upsert"}}'],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "LakeSpecError" in result.stderr and "source" in result.stderr
    assert "SparkContext" not in result.stderr  # rejected before any Spark start
    bad_json = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "write", "--spec", "{not json"],
                              capture_output=True, text=True, timeout=60, check=False)
    assert bad_json.returncode == 2 and "--spec" in bad_json.stderr


def test_command_line_rejects_nested_typos_and_nan_with_one_line(tmp_path: Path) -> None:
    target = tmp_path / "t"
    for operation, spec, text in [
        ("write", f'{{"table": "{target}\\u0000x", "source": {{"path": "{target}"}}}}', "NUL"),
        ("create_table", f'{{"table": "{target}", "schema": "id BIGINT", '
                         '"bucket": {"columns": ["id"], "count": 4, "sort_by": ["id"]}}', "bucket.sort_by"),
        ("clean", f'{{"table": "{target}", "retain_hours": NaN}}', "retain_hours"),
    ]:
        result = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", operation, "--spec", spec],
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 2, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("airflow-lake: LakeSpecError: ") and text in last, result.stderr
        assert "Traceback" not in result.stderr and "SparkContext" not in result.stderr  # before Spark starts
        assert not target.exists()


def test_partition_names_resolve_case_insensitively_and_dates_must_be_iso(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    run(spark, "create_table", {"table": path, "schema": "id BIGINT NOT NULL, DT STRING, v DOUBLE",
                                "partition_by": ["dt"]})
    assert LakeTable.open(path).spec.partition_columns == ("DT",)
    source = write_source(tmp_path / "s.parquet", [1, 2], "d1")  # columns id, dt
    run(spark, "write", {"table": path, "source": {"path": source}})
    table = LakeTable.open(path)
    assert sorted(r["id"] for r in table.read(spark).collect()) == [1, 2]
    assert {f.partition["DT"] for f in table.snapshot().files} == {"d1"}

    dated = str(tmp_path / "dated")
    run(spark, "create_table", {"table": dated, "schema": "id BIGINT, dt DATE, v DOUBLE", "partition_by": ["dt"]})
    with pytest.raises(LakeSpecError) as info:
        run(spark, "write", {"table": dated, "source": {"path": source}, "mode": "overwrite",
                             "partitions": [{"dt": "20240101"}]})
    assert str(info.value).startswith("partitions[0].dt: value '20240101' is not a valid date.")
    assert LakeTable.open(dated).commit_log.head() == 0 and parquet_files_on_disk(dated) == set()


# -- issue 20: an empty list selects nothing, never everything; unclear inputs fail clearly -----------------------

PK_SCHEMA = {"schema": "k BIGINT NOT NULL, dt STRING, v BIGINT", "partition_by": ["dt"], "primary_key": ["k"],
             "bucket": {"columns": ["k"], "count": 2}}


def pk_source(path: Path, keys: range, dt: str) -> str:
    pq.write_table(pa.table({"k": pa.array(list(keys), pa.int64()), "dt": [dt] * len(keys),
                             "v": pa.array(list(keys), pa.int64())}), path)
    return str(path)


def test_an_empty_list_selects_nothing_and_starts_no_spark(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    """`partitions: []` (an upstream task that found no partitions) never means the whole table: every
    operation that selects partitions or instants commits nothing, reports `noop`, and needs no Spark."""
    t = table.url
    run(spark, "write", {"table": t, "source": {"path": write_source(tmp_path / "d2.parquet", [5, 6], "d2")}})
    plan = run(None, "schedule_clustering", {"table": t, "min_commits": 0, "sort_columns": ["id"]})
    assert plan["plan_id"] is not None  # a pending plan
    keyed = LakeTable.create(str(tmp_path / "pk"), PK_SCHEMA)
    for version in (1, 2):  # two upserts: compaction has work in partition d1
        batch = pk_source(tmp_path / f"pk{version}.parquet", range(6), "d1")
        run(spark, "versioned_upsert", {"table": keyed.url, "version": version, "source": {"path": batch}})
    before = {path: snapshot_of_everything(LakeTable.open(path)) for path in (t, keyed.url)}
    heads = {path: LakeTable.open(path).commit_log.head() for path in (t, keyed.url)}
    source = write_source(tmp_path / "new.parquet", [100], "d1")
    cases = [
        ("write", {"table": t, "source": {"path": source}, "mode": "overwrite", "partitions": []}),
        ("bucket_rewrite", {"table": t, "partitions": [], "bucket": {"columns": ["id"], "count": 4}}),
        ("schedule_clustering", {"table": t, "partitions": [], "min_commits": 0}),
        ("rollback_pending", {"table": t, "instants": []}),
        ("compact_upserts", {"table": keyed.url, "partitions": []}),
    ]
    for operation, spec in cases:
        metrics = run(None, operation, {**spec, "request_id": f"r-{operation}"})  # None: no Spark is needed
        assert metrics["noop"] is True and metrics["already_committed"] is False, (operation, metrics)
        field = "instants" if operation == "rollback_pending" else "partitions"
        assert metrics["reason"] == f"`{field}` is an empty list: nothing selected, nothing to do", metrics
        assert metrics["table"] == LakeTable.open(spec["table"]).url and metrics["request_id"] == f"r-{operation}"
    assert run(None, "schedule_clustering", {"table": t, "partitions": []})["plan_id"] is None
    for path in (t, keyed.url):
        fresh = LakeTable.open(path)
        assert fresh.commit_log.head() == heads[path], path  # nothing committed
        assert snapshot_of_everything(fresh)[:2] == before[path][:2]
    assert sorted(r["id"] for r in LakeTable.open(t).read(spark).collect()) == [0, 1, 2, 5, 6]
    assert LakeTable.open(t).spec.bucket is None  # no bucket spec stored either
    assert len(before[t][2]) == 1 and snapshot_of_everything(LakeTable.open(t))[2] == before[t][2]  # plan kept

    # what the operation would refuse about the table, it still refuses; and filters: [] reads everything
    refused = [
        ("write", {"table": t, "source": {"path": source}, "mode": "append", "partitions": []}, "overwrite only"),
        ("write", {"table": keyed.url, "source": {"path": source}, "mode": "overwrite", "partitions": []},
         "has a primary key"),
        ("compact_upserts", {"table": t, "partitions": []}, "has no primary key"),
        ("schedule_clustering", {"table": t, "partitions": [], "layout": "SPIRAL"}, "layout"),
        ("write", {"table": str(tmp_path / "pk-unpartitioned"), "source": {"path": source}, "mode": "overwrite",
                   "partitions": []}, "no lake table"),
        ("write", {"table": t, "source": {"query": "SELECT * FROM s", "tables": {"s": {"path": t, "filters": []}}},
                   "mode": "overwrite", "partitions": "dynamic"}, "source.tables.s.filters: the filter list is empty"),
        ("versioned_upsert", {"table": keyed.url, "version": 3,
                              "source": {"query": "SELECT * FROM s", "tables": {"s": {"path": t, "filters": []}}}},
         "source.tables.s.filters: the filter list is empty"),
    ]
    for operation, spec, text in refused:
        with pytest.raises(LakeError) as info:
            run(None, operation, spec)
        assert text in str(info.value), (operation, str(info.value))
    plain = LakeTable.create(str(tmp_path / "plain"), {"schema": "id BIGINT, v DOUBLE"})
    with pytest.raises(LakeSpecError, match="partitions: the table is not partitioned"):
        run(None, "write", {"table": plain.url, "source": {"path": source}, "mode": "overwrite", "partitions": []})


def test_command_line_runs_an_empty_overwrite_as_a_noop_without_spark(table: LakeTable, tmp_path: Path) -> None:
    spec = f'{{"table": "{table.url}", "source": {{"path": "{tmp_path}/none.parquet"}}, "mode": "overwrite", ' \
           '"partitions": []}'
    result = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "write", "--spec", spec],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert '"noop": true' in result.stdout.strip().splitlines()[-1]
    assert "SparkContext" not in result.stderr + result.stdout  # no Spark started for nothing
    assert LakeTable.open(table.url).commit_log.head() == table.commit_log.head()


def unclear_cases(tmp: Path, table: LakeTable) -> list[tuple[str, str, str, str]]:
    """(operation, spec as JSON text, field the error names, its fix): inputs that gave a traceback, an
    OverflowError or a silent choice."""
    t, new = table.url, tmp / "new"
    huge = "9" * 401
    return [
        ("versioned_upsert", f'{{"table": "{t}", "source": {{"path": "{tmp}/x"}}, "version": "--5"}}',
         "version: '--5' is not a whole number", "Give e.g. 7"),
        ("versioned_upsert", f'{{"table": "{t}", "source": {{"path": "{tmp}/x"}}, "version": "\\u00b2"}}',
         "version: '²' is not a whole number", "Give e.g. 7"),
        ("schedule_clustering", f'{{"table": "{t}", "min_commits": {huge}}}', "min_commits: 999999999999... "
         "(401 digits) is too large", "Give `min_commits` as a number below"),
        ("remove_orphan_files", f'{{"table": "{t}", "older_than_hours": {huge}}}', "older_than_hours: 999999999999... "
         "(401 digits) is too large", "Give `older_than_hours` as a number below"),
        ("create_table", f'{{"table": "{new}", "schema": "id BIGINT", '
                         '"properties": {"heartbeat.timeout.seconds": "5"}}',
         "properties.heartbeat.timeout.seconds: a heartbeat timeout of 5 s is shorter than 2 heartbeat intervals "
         "of 10 s", "Set heartbeat.timeout.seconds to at least 2 x heartbeat.interval.seconds"),
        ("create_table", f'{{"table": "{new}", "schema": "id BIGINT", "properties": '
                         '{"heartbeat.interval.seconds": "100"}}',
         "properties.heartbeat.interval.seconds: a heartbeat timeout of 120 s is shorter", "at least 2 x"),
        ("write", f'{{"table": "{t}", "mode": "append", "source": {{"path": "{tmp}/x"}}, "mode": "overwrite"}}',
         "mode: the key is given twice in the JSON spec", "Give `mode` once."),
        ("write", f'{{"table": "{t}", "source": {{"path": "{tmp}/x", "format": "csv", "format": "json"}}}}',
         "source.format: the key is given twice", "Give `source.format` once."),
    ]


def test_unclear_inputs_fail_naming_the_field_and_the_fix_with_exit_2(table: LakeTable, tmp_path: Path) -> None:
    head = table.commit_log.head()
    for operation, spec, text, fix in unclear_cases(tmp_path, table):
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(spec, encoding="utf-8")
        for argument in (spec, f"@{spec_file}"):
            result = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", operation, "--spec", argument],
                                    capture_output=True, text=True, timeout=120, check=False)
            last = result.stderr.strip().splitlines()[-1]
            assert result.returncode == 2, (operation, text, result.stderr[-2000:])
            assert last.startswith("airflow-lake: LakeSpecError: ") and text in last and fix in last, last
            assert "Traceback" not in result.stderr and "SparkContext" not in result.stderr
    assert LakeTable.open(table.url).commit_log.head() == head and not (tmp_path / "new").exists()


def test_unclear_inputs_in_process_name_the_field(spark: Any, table: LakeTable, tmp_path: Path) -> None:
    from airflow_lake.lake.spec.strict import loads_spec

    for operation, spec, text, _ in unclear_cases(tmp_path, table):
        with pytest.raises(LakeSpecError) as info:
            run(spark, operation, loads_spec(spec))
        assert text in str(info.value)
    # a timeout of exactly two beats is fine, and so are the defaults and the test settings
    ok = LakeTable.create(str(tmp_path / "ok"), {"schema": "id BIGINT", "properties": {
        "heartbeat.interval.seconds": "30", "heartbeat.timeout.seconds": "60"}})
    assert ok.spec.float_property("heartbeat.timeout.seconds") == 60.0
