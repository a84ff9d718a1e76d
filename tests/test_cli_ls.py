"""`airflow-lake ls ROOT` on a root of real tables made with Spark through the job runner: one line per table with
its kind, rows (merged keys for a primary-key table: exact when compacted, an upper bound with deltas), files,
size, last commit and health, checked against each table's snapshot; `timeline` shows upsert versions; `files`
shows a table bucketed from a partition on without a stray "-" row."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.cli_format import fmt_bytes, fmt_time
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable

SCHEMA = "k BIGINT, v BIGINT, dt STRING"


def cli(*argv: str) -> tuple[int, str]:
    """Run the CLI in-process; (exit code, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def write(spark: Any, table: LakeTable, rows: list[tuple[int, int, str]], parts: int = 2) -> None:
    table.write(spark.createDataFrame(rows, SCHEMA).repartition(parts))


def upsert(spark: Any, table: LakeTable, landing: Path, rows: list[tuple[int, str, int]], **version: Any) -> None:
    spark.createDataFrame(rows, "k BIGINT, name STRING, v BIGINT").write.parquet(str(landing))
    run(spark, "versioned_upsert", {"table": table.url, **version, "source": {"path": str(landing),
                                                                               "format": "parquet"}})


@pytest.fixture(scope="module")
def lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("ls")
    root = base / "lake"
    made: dict[str, Any] = {"root": root}

    plain = LakeTable.create(str(root / "plain"), {"schema": SCHEMA})
    write(spark, plain, [(k, k, "-") for k in range(30)], parts=1)
    write(spark, plain, [(k, k, "-") for k in range(30, 50)], parts=1)

    daily = LakeTable.create(str(root / "ods" / "daily"), {"schema": SCHEMA, "partition_by": ["dt"]})
    write(spark, daily, [(k, k, d) for d in ("d1", "d2") for k in range(40)])

    bucketed = LakeTable.create(str(root / "dims" / "users"), {"schema": SCHEMA,
                                                              "bucket": {"columns": ["k"], "count": 4}})
    write(spark, bucketed, [(k, k, "-") for k in range(100)])

    events = LakeTable.create(str(root / "events"), {"schema": SCHEMA, "partition_by": ["dt"]})
    write(spark, events, [(k, k, d) for d in ("d1", "d2") for k in range(60)], parts=3)
    run(spark, "bucket_rewrite", {"table": events.url, "partitions": {"from": {"dt": "d2"}},
                                  "bucket": {"columns": ["k"], "count": 4}})
    write(spark, events, [(k, k, "d3") for k in range(60)])

    # clustered, with checkpoints every 2 entries: the last clustering is found in the state a checkpoint holds
    clustered = LakeTable.create(str(root / "sales"), {"schema": SCHEMA, "partition_by": ["dt"],
                                                       "properties": {"checkpoint.interval": "2"}})
    for day in ("d1", "d2"):
        write(spark, clustered, [(k, (k * 7919) % 100, day) for k in range(200)], parts=3)
    run(spark, "schedule_clustering", {"table": clustered.url, "min_commits": 2, "sort_columns": ["v"]})
    run(spark, "execute_clustering", {"table": clustered.url})
    clustered.alter_table([{"set_properties": {"health.commits_since_clustering": "1"}}])
    write(spark, clustered, [(k, k, "d3") for k in range(10)], parts=1)
    write(spark, clustered, [(k, k, "d3") for k in range(10, 20)], parts=1)

    keyed = LakeTable.create(str(root / "keyed"), {"schema": "k BIGINT NOT NULL, name STRING, v BIGINT",
                                                   "primary_key": ["k"], "bucket": {"columns": ["k"], "count": 4}})
    landing = base / "landing"
    upsert(spark, keyed, landing / "b1", [(k, f"n{k}", 1) for k in range(40)], version=1)
    upsert(spark, keyed, landing / "b2", [(k, f"m{k}", 2 + k % 7) for k in range(20, 60)], version_column="v")
    run(spark, "delete", {"table": keyed.url, "keys": [{"k": 1}, {"k": 2}], "version": 9})
    run(spark, "compact_upserts", {"table": keyed.url})
    made["compacted"] = {"keys": keyed.read(spark).count(), "stored": keyed.snapshot().rows, "ls": cli("ls", str(root)),
                         "ls_json": cli("ls", str(root), "--json")}
    upsert(spark, keyed, landing / "b3", [(k, f"o{k}", 10) for k in range(50, 70)], version=10)
    run(spark, "delete", {"table": keyed.url, "keys": [{"k": 3}], "version": 11})
    made["keys"] = keyed.read(spark).count()
    made.update(plain=plain, daily=daily, bucketed=bucketed, events=events, clustered=clustered, keyed=keyed)
    yield made


def ls_rows(text: str) -> dict[str, list[str]]:
    """The cells (split on 2+ spaces) of each table line of `ls`, by table path."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("TABLE "))
    rows = {}
    for line in lines[start + 1:]:
        if not line:
            break
        cells = re.split(r" {2,}", line.strip())
        rows[cells[0]] = cells
    return rows


def expected_cells(table: LakeTable, kind: str, rows: str, health: str = "ok") -> list[str]:
    snap = table.snapshot()
    last = table.commit_log.read(snap.seq)
    # every commit is published (Delta version = our seq): caught up
    return [kind, rows, f"{len(snap.files):,}", fmt_bytes(snap.bytes),
            f"{last.seq} {last.operation} {fmt_time(last.completed_at)}", f"delta {snap.seq}/{snap.seq}", health]


def test_ls_lists_every_table_with_its_kind_rows_files_and_last_commit(lake: dict[str, Any]) -> None:
    code, out = cli("ls", str(lake["root"]))

    assert code == 0
    assert out.splitlines()[0] == str(lake["root"])
    rows = ls_rows(out)
    assert list(rows) == ["dims/users", "events", "keyed", "ods/daily", "plain", "sales"]
    # (tiny test files: two or more in one partition or bucket are small files clustering would merge)
    assert rows["plain"][1:] == expected_cells(lake["plain"], "plain", "50", "small_files 1 > 0.5")
    assert rows["ods/daily"][1:] == expected_cells(lake["daily"], "partitioned", "80", "small_files 1 > 0.5")
    assert rows["dims/users"][1:] == expected_cells(lake["bucketed"], "bucketed 4 on k", "100")
    assert rows["events"][1:] == expected_cells(
        lake["events"], "partitioned, bucketed 4 on k from dt=d2 (1 plain, 2 bucketed partition(s))", "180")
    assert rows["sales"][1:] == expected_cells(lake["clustered"], "partitioned, clustered", "420",
                                               "commits_since_clustering 2 > 1")
    clustering = next(e for e in lake["clustered"].entries_since(0) if e.operation == "execute_clustering")
    assert f"sales: 2 commits since the last clustering ({clustering.instant}) (threshold 1)" in out
    # deltas since the compaction: an upper bound of the merged keys, labelled so, below the stored rows
    keyed = rows["keyed"]
    assert keyed[1:3] == ["primary-key (k), bucketed 4 on k", keyed[2]] and keyed[2].startswith("<= ")
    bound = int(keyed[2].removeprefix("<= ").removesuffix(" keys").replace(",", ""))
    assert lake["keys"] <= bound < lake["keyed"].snapshot().rows
    assert keyed[3:6] == expected_cells(lake["keyed"], "", "")[2:5]
    # the upsert and the versioned delete since the compaction: their files are not published (other engines
    # see the table as of its compaction), counted from what delta-rs reads of the published log
    seq = lake["keyed"].commit_log.head()
    hidden = hidden_from_delta_rs(lake["keyed"])
    assert keyed[6] == f"delta {seq}/{seq}, {len(hidden)} hidden"
    assert (f"keyed: 2 upsert commit(s) ({len(hidden)} file(s), {sum(f.rows for f in hidden)} row(s)) not visible "
            "to other engines until the next compact_upserts") in out


def hidden_from_delta_rs(table: LakeTable, *, tombstones: bool = False) -> list[Any]:
    """The live files the Delta log (read by delta-rs) does not publish: those of the commits since the compaction,
    or (`tombstones`) the compaction's own that hold delete tombstones (never published, by design)."""
    from deltalake import DeltaTable

    published = set(DeltaTable(table.url).file_uris())
    unpublished = [f for f in table.snapshot().files if table.storage.path(f.path) not in published]
    compaction = {e.instant for e in table.entries_since(0) if e.operation == "compact_upserts"}
    return [f for f in unpublished if (f.instant in compaction) == tombstones]


def test_ls_of_a_compacted_primary_key_table_counts_its_merged_keys_exactly(lake: dict[str, Any]) -> None:
    compacted = lake["compacted"]
    code, out = compacted["ls"]
    assert code == 0
    assert ls_rows(out)["keyed"][2] == f"{compacted['keys']} keys"
    assert compacted["keys"] < compacted["stored"]  # the tombstones of the two deleted keys are stored rows
    (item,) = [t for t in json.loads(compacted["ls_json"][1])["tables"] if t["path"] == "keyed"]
    assert item["rows"] == {"count": compacted["keys"], "what": "keys", "exact": True}
    pk = item["primary_key"]
    assert (pk["keys"], pk["keys_exact"], pk["keys_bound"], pk["delta_files"]) == (compacted["keys"], True, "exact", 0)
    assert pk["versions"] == {"count": 9, "min": 1, "max": 9} and pk["pending_deltas"] == []


def test_ls_json(lake: dict[str, Any]) -> None:
    code, out = cli("ls", str(lake["root"]), "--json")

    assert code == 0
    data = json.loads(out)
    by_path = {t["path"]: t for t in data["tables"]}
    for path, table in (("plain", lake["plain"]), ("ods/daily", lake["daily"]), ("dims/users", lake["bucketed"]),
                        ("events", lake["events"]), ("sales", lake["clustered"]), ("keyed", lake["keyed"])):
        snap = table.snapshot()
        item = by_path[path]
        assert item["error"] is None and item["url"] == table.url
        assert item["totals"] == {"files": len(snap.files), "rows": snap.rows, "bytes": snap.bytes,
                                  "partitions": len(snap.partitions())}
        assert item["last_commit"]["seq"] == snap.seq
    assert by_path["plain"]["kind"] == ["plain"]
    assert by_path["events"]["kind"] == ["partitioned", "bucketed", "bucketed_from_partition"]
    assert by_path["sales"]["kind"] == ["partitioned", "clustered"]
    assert by_path["keyed"]["kind"] == ["primary_key", "bucketed"]
    assert by_path["plain"]["clustering"]["commits_since"] is None  # never clustered: nothing to count
    assert by_path["sales"]["clustering"]["commits_since"] == 2
    # a table bucketed from a partition on: its plain partition and its bucketed ones
    layout = by_path["events"]["layout"]
    assert (layout["plain"]["partitions"], layout["plain"]["first"], layout["plain"]["rows"]) == (1, "dt=d1", 60)
    (group,) = layout["bucketed"]
    assert (group["count"], group["partitions"], group["first"], group["last"], group["rows"]) == (
        4, 2, "dt=d2", "dt=d3", 120)
    # the primary-key table with deltas: versions applied and the deltas per bucket not compacted yet
    pk = by_path["keyed"]["primary_key"]
    assert by_path["keyed"]["rows"] == {"count": pk["keys"], "what": "keys", "exact": False}
    assert pk["keys_bound"] == "at_most" and pk["versions"] == {"count": 11, "min": 1, "max": 11}
    deltas = [f for f in lake["keyed"].snapshot().files
              if f.instant in {e.instant for e in lake["keyed"].entries_since(4)}]
    assert sum(d["files"] for d in pk["pending_deltas"]) == len(deltas) == pk["delta_files"]
    assert sum(d["rows"] for d in pk["pending_deltas"]) == sum(f.rows for f in deltas)
    assert sorted(d["bucket"] for d in pk["pending_deltas"]) == sorted({f.bucket for f in deltas})
    # where publishing stands: caught up, the deltas since the compaction hidden from other engines
    seq = lake["keyed"].commit_log.head()
    assert by_path["plain"]["published"] == {"seq": 2, "published_seq": 2, "unpublished_commits": 0}
    published = by_path["keyed"]["published"]
    assert (published["seq"], published["published_seq"], published["unpublished_commits"]) == (seq, seq, 0)
    assert published["hidden_files"] - published["tombstone_files"] == len(deltas) == \
        len(hidden_from_delta_rs(lake["keyed"]))
    # the compaction's files with the tombstones of the deleted keys 1 and 2
    assert published["tombstone_files"] == len(hidden_from_delta_rs(lake["keyed"], tombstones=True)) >= 1
    assert (published["hidden_commits"], published["hidden_rows"]) == (2, sum(f.rows for f in deltas))


def test_timeline_shows_upsert_versions(lake: dict[str, Any]) -> None:
    keyed = lake["keyed"]
    code, out = cli("timeline", keyed.url)

    assert code == 0
    assert out.splitlines()[0].split()[5:9] == ["COMPLETED", "(UTC)", "VERSIONS", "SUMMARY"]
    cells = {c[0]: c for c in (re.split(r" {2,}", line) for line in out.splitlines()[1:])}
    entries = [keyed.commit_log.read(seq) for seq in range(keyed.commit_log.head() + 1)]
    assert [cells[e.instant][6] for e in entries] == ["-", "1", "2..8", "9", "-", "10", "11"]
    _, out = cli("timeline", keyed.url, "--json")
    assert [i["versions"] for i in json.loads(out)["instants"]] == [None, [1], list(range(2, 9)), [9], None,
                                                                     [10], [11]]


def test_files_of_a_table_bucketed_from_a_partition_on_has_no_stray_row(lake: dict[str, Any]) -> None:
    code, out = cli("files", lake["events"].url)

    assert code == 0
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("dt=d1"))
    assert lines[at].split()[:5] == ["dt=d1", "plain", "3", "60", str(lines[at].split()[4])]
    assert lines[at + 1].startswith("dt=d2")  # no bucket row under the plain partition (it showed "-")
    assert not any(line.split()[:1] == ["-"] for line in lines)
    _, out = cli("files", lake["events"].url, "--json")
    d1 = json.loads(out)["partitions"][0]
    assert (d1["name"], d1["buckets"], d1["plain_files"], d1["bucket_counts"]) == ("dt=d1", [], 3, [])
