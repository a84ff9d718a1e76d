"""A query source runs no code and reads only the lake tables it names; a path source never reads a lake table's
files. Judged on what Spark resolves, whatever the spelling: each refusal is a LakeSpecError, nothing is
committed, nothing of the query ran, and the rows of a replaced file (still on disk) are never copied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.spark.session_conf import session_conf
from tests.connect_server import ConnectServer
from tests.support import parquet_files_on_disk

SCHEMA = "id BIGINT NOT NULL, name STRING, amount BIGINT, dt STRING"
OLD = (1, "old", 10, "d1")  # overwritten: its file stays on disk, no longer live
LIVE = [(2, "live", 20, "d1"), (3, "other", 30, "d2")]
JAVA = "'java.lang.System', 'setProperty', '{key}', 'ran'"  # a call that leaves a trace if it runs


def values(rows: list[tuple[Any, ...]]) -> str:
    body = ", ".join(f"({i}L, '{n}', {a}L, '{d}')" for i, n, a, d in rows)
    return f"VALUES {body} AS v(id, name, amount, dt)"


@dataclass(frozen=True)
class Lake:
    root: Path  # holds the lake tables below
    st: str  # partitioned; partition d1 overwritten, so OLD's file is still in st/dt=d1
    dim: str  # dt -> label
    target: str  # what the refused writes must leave as it is
    other_view: str  # a temporary view of another lake table, not named in `tables`
    read_table: str  # the catalog table of that view's bucketed read
    landing: Path  # plain Parquet files, no lake table
    pk: str  # a primary-key table: key 3 upserted twice


@pytest.fixture(scope="module")
def lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    base = tmp_path_factory.mktemp("guard")
    root = base / "lake"
    st, dim, target, other = (str(root / n) for n in ("st", "dim", "target", "other"))
    LakeTable.create(st, {"schema": SCHEMA, "partition_by": ["dt"]})
    run(spark, "write", {"table": st, "source": {"query": values([OLD, LIVE[1]])}})
    run(spark, "write", {"table": st, "mode": "overwrite", "partitions": [{"dt": "d1"}],
                         "source": {"query": values([LIVE[0]])}})
    live = {f.path for f in LakeTable.open(st).snapshot().files}
    assert len(parquet_files_on_disk(st) - live) == 1  # OLD's replaced file
    LakeTable.create(dim, {"schema": "dt STRING, label STRING"})
    run(spark, "write", {"table": dim, "source": {"query": "VALUES ('d1', 'L1'), ('d2', 'L2') AS v(dt, label)"}})
    LakeTable.create(target, {"schema": SCHEMA, "partition_by": ["dt"]})
    run(spark, "write", {"table": target, "source": {"query": values([(100, "t", 1, "d1")])}})
    pk = str(root / "pk")
    LakeTable.create(pk, {"schema": SCHEMA, "primary_key": ["id"], "bucket": {"columns": ["id"], "count": 2}})
    run(spark, "versioned_upsert", {"table": pk, "version": 1, "source": {"query": values([(3, "v1", 1, "d2")])}})
    run(spark, "versioned_upsert", {"table": pk, "version": 2, "source": {"query": values([(3, "v2", 2, "d2")])}})
    LakeTable.create(other, {"schema": SCHEMA, "bucket": {"columns": ["id"], "count": 2}})
    run(spark, "write", {"table": other, "source": {"query": values([(50, "secret", 5, "d5")])}})
    before = {t.name for t in spark.catalog.listTables("default")}
    view = f"other_{uuid.uuid4().hex[:8]}"
    LakeTable.open(other).register(spark, view)
    created = {t.name for t in spark.catalog.listTables("default")} - before - {view}
    assert len(created) == 1, created
    landing = base / "landing"
    for day in ("d7", "d8"):
        (landing / day).mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array([7 if day == "d7" else 8], pa.int64()), "name": ["land"],
                                 "amount": pa.array([1], pa.int64()), "dt": [day]}), landing / day / "f.parquet")
    (base / "link_to_st").symlink_to(st)
    (base / "link_to_root").symlink_to(root)
    old_file = next(iter(parquet_files_on_disk(st) - live))
    (base / "old.parquet").symlink_to(Path(st) / old_file)
    (base / "innocent").mkdir()
    (base / "innocent" / "x.parquet").symlink_to(Path(st) / old_file)
    return Lake(root, st, dim, target, view, f"spark_catalog.default.{created.pop()}", landing, pk)


def state(path: str) -> tuple[int, list[str], set[str]]:
    table = LakeTable.open(path)
    return table.commit_log.head(), sorted(f.path for f in table.snapshot().files), parquet_files_on_disk(path)


def rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(path).read(spark).select("id", "name", "amount", "dt").collect())


def java_ran(spark: Any, key: str) -> bool:
    return bool(spark.sql(f"SELECT java_method('java.lang.System', 'getProperty', '{key}')").collect()[0][0] == "ran")


def refused(spark: Any, lake: Lake, source: dict[str, Any], *texts: str) -> str:
    """A write into `target` that must be refused: a LakeSpecError on the source, and nothing changed."""
    before, before_rows = state(lake.target), rows(spark, lake.target)
    with pytest.raises(LakeSpecError) as caught:
        run(spark, "write", {"table": lake.target, "source": source})
    message = str(caught.value)
    assert message.startswith("source."), message
    for text in texts:
        assert text in message, message
    assert state(lake.target) == before
    assert rows(spark, lake.target) == before_rows
    return message


# --- 10: code on the cluster ------------------------------------------------------------------------------------

JAVA_SPELLINGS = {
    "backquoted name": "SELECT id, `reflect`(" + JAVA + ") AS name, amount, dt FROM st",
    "comment before the paren": "SELECT id, reflect/**/(" + JAVA + ") AS name, amount, dt FROM st",
    "line comment, mixed case": "SELECT id, ReFlEcT -- a comment\n(" + JAVA + ") AS name, amount, dt FROM st",
    "IDENTIFIER": "SELECT id, IDENTIFIER('java_method')(" + JAVA + ") AS name, amount, dt FROM st",
    "IDENTIFIER computed": "SELECT id, IDENTIFIER('re' || 'flect')(" + JAVA + ") AS name, amount, dt FROM st",
    "IDENTIFIER unicode escape": r"SELECT id, IDENTIFIER('\u0072eflect')(" + JAVA + ") AS name, amount, dt FROM st",
    "qualified": "SELECT id, system.builtin.reflect(" + JAVA + ") AS name, amount, dt FROM st",
    "try_reflect": "SELECT id, `TRY_reflect`(" + JAVA + ") AS name, amount, dt FROM st",
    "subquery in a filter": "SELECT * FROM st WHERE id NOT IN (SELECT length(`java_method`(" + JAVA + ")) FROM st)",
    "CTE": "WITH c AS (SELECT id, `reflect`(" + JAVA + ") AS name, amount, dt FROM st) SELECT * FROM c",
    "lambda": "SELECT id, transform(array(name), x -> `reflect`(" + JAVA + "))[0] AS name, amount, dt FROM st",
    "LATERAL VIEW": "SELECT id, e AS name, amount, dt FROM st LATERAL VIEW explode(array(`reflect`(" + JAVA +
                    "))) x AS e",
    "TABLESAMPLE": "SELECT * FROM st TABLESAMPLE (100 PERCENT) WHERE `reflect`(" + JAVA + ") IS NULL",
    "scalar subquery": "SELECT id, (SELECT `reflect`(" + JAVA + ")) AS name, amount, dt FROM st",
    # inline rows: Spark's optimizer evaluates such projections while it plans (EXPLAIN)
    "over VALUES": "SELECT 9L AS id, `reflect`(" + JAVA + ") AS name, 1L AS amount, 'd9' AS dt FROM VALUES (1)",
    "filter over VALUES": "SELECT * FROM " + values([(9, "x", 1, "d9")]) + " WHERE `reflect`(" + JAVA +
                          ") IS NULL",
    # a literal that looks like a call does not hide a real one, nor choose the function's name
    "next to a look-alike literal": "SELECT id, concat('reflect(', `reflect`(" + JAVA + ")) AS name, amount, dt "
                                    "FROM st",
    "IDENTIFIER chosen by a literal": "SELECT id, IDENTIFIER(CASE WHEN length('reflect') = 7 THEN 'reflect' ELSE "
                                      "'concat' END)(" + JAVA + ") AS name, amount, dt FROM st",
    # a literal is printed as bare text in the plan: a fake section heading does not end a section
    "after a fake plan heading": "SELECT id, concat('== Optimized Logical Plan ==', `reflect`(" + JAVA +
                                 ")) AS name, amount, dt FROM st",
    "IDENTIFIER after a fake heading": "SELECT id, concat('== Analyzed Logical Plan ==', IDENTIFIER(CASE WHEN "
                                       "length('reflect') = 7 THEN 'reflect' ELSE 'concat' END)(" + JAVA +
                                       ")) AS name, amount, dt FROM st",
    # past the 25 arguments Spark prints of a call by default
    "26th argument": "SELECT id, concat(" + "name, " * 25 + "`reflect`(" + JAVA + ")) AS name, amount, dt FROM st",
}


@pytest.mark.parametrize("query", list(JAVA_SPELLINGS.values()), ids=list(JAVA_SPELLINGS))
def test_java_calls_are_refused_in_every_spelling_and_never_run(spark: Any, lake: Lake, query: str) -> None:
    key = f"airflow_lake.guard.{uuid.uuid4().hex}"
    refused(spark, lake, {"query": query.format(key=key), "tables": {"st": lake.st}}, "source.query:",
            "runs Java code on the cluster", "nothing was run")
    assert not java_ran(spark, key)


@pytest.mark.parametrize("spelling", ["TRANSFORM", "transform/**/"])
def test_a_script_transformation_is_refused_and_never_runs(spark: Any, lake: Lake, tmp_path: Path,
                                                          spelling: str) -> None:
    marker = tmp_path / "ran"
    query = (f"SELECT {spelling}(id, name, amount, dt) USING 'touch {marker}; cat' "
             "AS (id BIGINT, name STRING, amount BIGINT, dt STRING) FROM st")
    refused(spark, lake, {"query": query, "tables": {"st": lake.st}}, "runs an external command")
    assert not marker.exists()


@pytest.mark.parametrize("reference", ["${env:HOME}", "${system:user.name}", "${spark.app.name}"])
def test_variables_that_spark_would_substitute_are_refused(spark: Any, lake: Lake, reference: str) -> None:
    query = f"SELECT id, '{reference}' AS name, amount, dt FROM st"
    refused(spark, lake, {"query": query, "tables": {"st": lake.st}}, reference, "nothing was run")


def test_without_substitution_a_variable_is_plain_text(spark: Any, lake: Lake, table_path: str) -> None:
    LakeTable.create(table_path, {"schema": SCHEMA})
    with session_conf(spark, {"spark.sql.variable.substitute": "false"}):  # as in a job's session
        run(spark, "write", {"table": table_path, "source": {"query": "SELECT 5L AS id, '${env:HOME}' AS name, "
                                                                      "1L AS amount, 'd1' AS dt"}})
    assert rows(spark, table_path) == [(5, "${env:HOME}", 1, "d1")]


# --- 11: files and tables other than those named ----------------------------------------------------------------

FILE_SPELLINGS = {
    "quoted format": "SELECT * FROM `parquet`.`{st}/dt=d1`",
    "comment before the dot": "SELECT * FROM parquet/**/.`{st}`",
    "file URL, upper case": "SELECT * FROM PARQUET.`file://{st}/dt=d1`",
    "glob class": "SELECT * FROM parquet.`{root}/s[t]/dt=d1`",
    "glob braces": "SELECT id, name, amount, 'd1' AS dt FROM parquet.`{root}/{{st,none}}/dt=d1`",
    "dot-dot": "SELECT * FROM parquet.`{root}/dim/../st`",
    "symlink": "SELECT * FROM parquet.`{link}`",
    "IDENTIFIER": "SELECT * FROM IDENTIFIER('parquet.`{st}`')",
    "CTE": "WITH c AS (SELECT * FROM `parquet`.`{st}`) SELECT * FROM c",
    "subquery in a filter": "SELECT * FROM st WHERE id IN (SELECT id FROM `parquet`.`{st}/dt=d1`) OR id > 0",
    "scalar subquery": "SELECT id, (SELECT max(name) FROM `parquet`.`{st}/dt=d1`) AS name, amount, dt FROM st",
    "other format": "SELECT 1L AS id, CAST(content AS STRING) AS name, 1L AS amount, 'd1' AS dt "
                    "FROM binaryFile.`{st}/dt=d1`",
    "files outside any lake table": "SELECT *, 'd7' AS dt FROM parquet.`{landing}/d7`",
}


@pytest.mark.parametrize("query", list(FILE_SPELLINGS.values()), ids=list(FILE_SPELLINGS))
def test_file_queries_are_refused_in_every_spelling(spark: Any, lake: Lake, query: str) -> None:
    text = query.format(st=lake.st, root=lake.root, landing=lake.landing,
                        link=lake.root.parent / "link_to_st" / "dt=d1")
    refused(spark, lake, {"query": text, "tables": {"st": lake.st}}, "source.query:")
    assert (run_sql_on_files := spark.conf.get("spark.sql.runSQLOnFiles")) == "true", run_sql_on_files


OTHER_READS = {
    "another lake table's view": "SELECT * FROM {view}",
    "its catalog table": "SELECT id, name, amount, 'd1' AS dt FROM {table}",
    "its catalog table in a scalar subquery": "SELECT id, (SELECT max(name) FROM {table}) AS name, amount, dt "
                                              "FROM st",
    "its catalog table in a filter": "SELECT * FROM st WHERE id NOT IN (SELECT id FROM {table})",
    "a global temporary view": "SELECT * FROM global_temp.{global_view}",
}


@pytest.mark.parametrize("query", list(OTHER_READS.values()), ids=list(OTHER_READS))
def test_reads_of_other_views_and_tables_are_refused(spark: Any, lake: Lake, query: str) -> None:
    global_view = f"g_{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([OLD], SCHEMA).createOrReplaceGlobalTempView(global_view)
    text = query.format(view=lake.other_view, table=lake.read_table, global_view=global_view)
    refused(spark, lake, {"query": text, "tables": {"st": lake.st}}, "source.query:", "is not one of the lake "
            "tables given in `tables`")


PATH_SPELLINGS = {
    "glob class": ("{root}/s[t]", {}),
    "glob braces": ("{root}/{{st,none}}/data", {}),
    "glob ?": ("{root}/s?", {}),
    "glob star below": ("{root}/s*/data", {}),
    "glob star above": ("{root}/*", {}),
    "trailing slash": ("{st}/", {}),
    "double slashes": ("{root}//st//dt=d1", {}),
    "dot-dot": ("{root}/dim/../st", {}),
    "file URL": ("file://{st}", {}),
    "file: URL, one slash": ("file:{st}/dt=d1", {}),
    "file URL with localhost": ("file://localhost{st}", {}),
    "symlink to the table": ("{base}/link_to_st", {}),
    "symlink above the table": ("{base}/link_to_root/st/dt=d1", {}),
    "symlink to a replaced file": ("{base}/old.parquet", {}),
    "directory holding a symlinked replaced file": ("{base}/innocent", {}),
    "directory above the table": ("{root}", {}),
    "above, recursive lookup": ("{base}", {"recursiveFileLookup": "true"}),
    "above, glob filter": ("{root}", {"pathGlobFilter": "*.parquet", "recursiveFileLookup": "true"}),
}


@pytest.mark.parametrize(("path", "options"), list(PATH_SPELLINGS.values()), ids=list(PATH_SPELLINGS))
def test_path_sources_reading_a_lake_table_are_refused(spark: Any, lake: Lake, path: str,
                                                      options: dict[str, str]) -> None:
    text = path.format(st=lake.st, root=lake.root, base=lake.root.parent)
    refused(spark, lake, {"path": text, "options": options}, "source.path:", "lake table",
            "Read the table with a query")


# --- what still works -------------------------------------------------------------------------------------------

LEGIT = {
    "join of two views": ("SELECT s.id, d.label AS name, s.amount, s.dt FROM st s JOIN dim d ON s.dt = d.dt",
                          [(2, "L1", 20, "d1"), (3, "L2", 30, "d2")]),
    "CTE": ("WITH c AS (SELECT * FROM st WHERE amount > 25) SELECT * FROM c", [(3, "other", 30, "d2")]),
    "literals that look like code": (
        "SELECT id, 'reflect(java.lang.System) java_method( parquet.`/x` ScriptTransformation' AS name, amount, dt "
        "FROM st WHERE dt = 'd1'",
        [(2, "reflect(java.lang.System) java_method( parquet.`/x` ScriptTransformation", 20, "d1")]),
    "escaped quotes": ("SELECT id, concat('it\\'s reflect(', \"java_method(\") AS name, amount, dt FROM st "
                       "WHERE dt = 'd1'", [(2, "it's reflect(java_method(", 20, "d1")]),
    "functions": ("SELECT id, upper(concat(name, '-', CAST(date_add(DATE '2024-01-01', 1) AS STRING))) AS name, "
                  "amount, dt FROM st", [(2, "LIVE-2024-01-02", 20, "d1"), (3, "OTHER-2024-01-02", 30, "d2")]),
    "subquery in a filter": ("SELECT * FROM st WHERE dt IN (SELECT dt FROM dim WHERE label = 'L2')",
                             [(3, "other", 30, "d2")]),
    "scalar subquery": ("SELECT id, (SELECT max(label) FROM dim) AS name, amount, dt FROM st",
                        [(2, "L2", 20, "d1"), (3, "L2", 30, "d2")]),
    "lambda": ("SELECT id, transform(array(name), x -> upper(x))[0] AS name, amount, dt FROM st",
               [(2, "LIVE", 20, "d1"), (3, "OTHER", 30, "d2")]),
    "LATERAL VIEW": ("SELECT id, e AS name, amount, dt FROM st LATERAL VIEW explode(array(name)) x AS e",
                     [(2, "live", 20, "d1"), (3, "other", 30, "d2")]),
    "backquoted columns, comments": ("SELECT s.`id`, /* reflect( */ s.`name`, s.amount, s.dt -- parquet.`/x`\n"
                                     "FROM st AS s", [(2, "live", 20, "d1"), (3, "other", 30, "d2")]),
    "VALUES": (values([(7, "v", 1, "d7")]), [(7, "v", 1, "d7")]),
    "a primary-key table, merged": ("SELECT p.id, p.name, s.amount, s.dt FROM pk p JOIN st s ON p.id = s.id",
                                    [(3, "v2", 30, "d2")]),
}


@pytest.mark.parametrize(("query", "expected"), list(LEGIT.values()), ids=list(LEGIT))
def test_read_only_queries_of_named_tables_still_work(spark: Any, lake: Lake, table_path: str, query: str,
                                                       expected: list[tuple[Any, ...]]) -> None:
    LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    tables = {"st": lake.st, "dim": lake.dim, "pk": lake.pk}
    run(spark, "write", {"table": table_path, "source": {"query": query, "tables": tables}})
    assert rows(spark, table_path) == expected
    assert spark.conf.get("spark.sql.runSQLOnFiles") == "true"  # the session's own setting, back
    assert spark.conf.get("spark.sql.optimizer.excludedRules", None) is None


@pytest.mark.parametrize(("path", "options"), [("{landing}", {"recursiveFileLookup": "true"}), ("{landing}/d[78]", {}),
                                               ("{landing}/{{d7,d8}}/f.parquet", {})])
def test_path_sources_outside_lake_tables_still_work(spark: Any, lake: Lake, table_path: str, path: str,
                                                     options: dict[str, str]) -> None:
    LakeTable.create(table_path, {"schema": SCHEMA, "partition_by": ["dt"]})
    run(spark, "write", {"table": table_path, "source": {"path": path.format(landing=lake.landing),
                                                         "options": options}})
    assert rows(spark, table_path) == [(7, "land", 1, "d7"), (8, "land", 1, "d8")]


def test_upsert_queries_are_guarded_too(spark: Any, lake: Lake, table_path: str) -> None:
    LakeTable.create(table_path, {"schema": SCHEMA, "primary_key": ["id"], "bucket": {"columns": ["id"], "count": 2}})
    spec = {"table": table_path, "version": 1, "source": {"query": "SELECT * FROM st", "tables": {"st": lake.st}}}
    run(spark, "versioned_upsert", spec)
    assert rows(spark, table_path) == sorted(LIVE)
    key = f"airflow_lake.guard.{uuid.uuid4().hex}"
    bad = "SELECT id, `reflect`(" + JAVA.format(key=key) + ") AS name, amount, dt FROM st"
    with pytest.raises(LakeSpecError, match="runs Java code"):
        run(spark, "versioned_upsert", {**spec, "version": 2, "source": {"query": bad, "tables": {"st": lake.st}}})
    with pytest.raises(LakeSpecError, match="lake table"):
        run(spark, "versioned_upsert", {**spec, "version": 2, "source": {"path": f"{lake.root}/s[t]"}})
    assert not java_ran(spark, key)
    assert rows(spark, table_path) == sorted(LIVE)


# --- a job's session, and Spark Connect -------------------------------------------------------------------------

@pytest.mark.slow
def test_job_session_keeps_file_queries_and_substitution_off(lake: Lake, table_path: str) -> None:
    """In a job's own session (`python -m airflow_lake.jobs`): `${...}` is plain text; a file query exits 2."""
    LakeTable.create(table_path, {"schema": SCHEMA})
    env = {**os.environ, "AIRFLOW_LAKE_SPARK_MASTER": "local[1]"}
    ok = {"table": table_path, "source": {"query": "SELECT 5L AS id, '${env:HOME}' AS name, 1L AS amount, 'd1' AS dt"}}
    bad = {"table": table_path, "source": {"query": f"SELECT * FROM `parquet`.`{lake.st}/dt=d1`"}}
    for spec, code in ((ok, 0), (bad, 2)):
        done = subprocess.run([sys.executable, "-m", "airflow_lake.jobs", "write", "--spec", json.dumps(spec)],
                              capture_output=True, text=True, timeout=300, check=False, env=env)
        assert done.returncode == code, done.stderr[-3000:]
    assert "LakeSpecError: source.query:" in done.stderr and "Traceback" not in done.stderr
    assert LakeTable.open(table_path).to_arrow().to_pylist() == [
        {"id": 5, "name": "${env:HOME}", "amount": 1, "dt": "d1"}]


CONNECT_CLIENT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from airflow_lake.jobs import run
    from airflow_lake.lake import LakeSpecError, LakeTable

    url, st, target, key = sys.argv[1:5]
    spark = SparkSession.builder.remote(url).getOrCreate()
    out = {}
    queries = {
        "java": "SELECT id, `reflect`('java.lang.System', 'setProperty', '%s', 'ran') AS name, amount, dt "
                "FROM st" % key,
        "java_values": "SELECT 1L AS id, IDENTIFIER('java_method')('java.lang.System', 'setProperty', '%s', "
                       "'ran') AS name, 1L AS amount, 'd1' AS dt FROM VALUES (1)" % key,
        "file": "SELECT * FROM parquet/**/.`%s/dt=d1`" % st,
        "legit": "SELECT id, 'reflect(' AS name, amount, dt FROM st",
    }
    for name, query in queries.items():
        try:
            out[name] = run(spark, "write", {"table": target, "source": {"query": query, "tables": {"st": st}}})[
                "rows_added"]
        except LakeSpecError as err:
            out[name] = str(err)
    try:
        run(spark, "write", {"table": target, "source": {"path": st.rsplit("/", 1)[0] + "/s[t]"}})
    except LakeSpecError as err:
        out["path"] = str(err)
    out["ran"] = spark.sql("SELECT java_method('java.lang.System', 'getProperty', '%s')" % key).collect()[0][0]
    out["run_sql_on_files"] = spark.conf.get("spark.sql.runSQLOnFiles")
    out["excluded_rules"] = spark.conf.get("spark.sql.optimizer.excludedRules", None)
    from airflow_lake.jobs.session import DEFAULT_CONF  # as the hook sets up a job's Connect session
    for name, value in DEFAULT_CONF.items():
        spark.conf.set(name, value)
    out["job_literal"] = run(spark, "write", {"table": target, "source": {
        "query": "SELECT 6L AS id, '${env:HOME}' AS name, 1L AS amount, 'd6' AS dt"}})["rows_added"]
    try:
        run(spark, "write", {"table": target, "source": {"query": queries["file"], "tables": {"st": st}}})
    except LakeSpecError as err:
        out["job_file"] = str(err)
    out["job_run_sql_on_files"] = spark.conf.get("spark.sql.runSQLOnFiles")
    out["rows"] = sorted(tuple(r) for r in LakeTable.open(target).read(spark).collect())
    print("RESULT " + json.dumps(out))
""")


@pytest.mark.slow
def test_the_guard_over_spark_connect(lake: Lake, connect_server: ConnectServer, tmp_path: Path) -> None:
    target = str(tmp_path / "target")
    LakeTable.create(target, {"schema": SCHEMA, "partition_by": ["dt"]})
    script = tmp_path / "client.py"
    script.write_text(CONNECT_CLIENT)
    key = f"airflow_lake.guard.{uuid.uuid4().hex}"
    done = subprocess.run([sys.executable, str(script), connect_server.url, lake.st, target, key], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert "runs Java code on the cluster" in out["java"] and "runs Java code" in out["java_values"]
    assert "reads files directly" in out["file"] or "inside the lake table" in out["file"]
    assert "lake table" in out["path"]
    assert out["legit"] == 2
    assert out["ran"] != "ran"
    assert out["run_sql_on_files"] == "true" and out["excluded_rules"] is None
    assert out["job_literal"] == 1 and "source.query:" in out["job_file"]
    assert out["job_run_sql_on_files"] == "false"
    assert out["rows"] == [[2, "reflect(", 20, "d1"], [3, "reflect(", 30, "d2"], [6, "${env:HOME}", 1, "d6"]]
