"""`tables: {view: {"path": ..., "partitions": "changed"}}`: an incremental job reads an upstream in only the
partitions its changes windows touched (metadata only), so a late day reads that day; an unpartitioned upstream's
change leaves the read whole; no change, no file. What the job computes from those partitions equals a rebuild
from the whole upstream. Misuse is refused before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable

EVENTS = "id BIGINT NOT NULL, k BIGINT, dt STRING"
# per day and k: the events, and the label of k as the dimension holds it now
DAILY = ("WITH days AS (SELECT dt FROM ev_changes UNION SELECT e.dt FROM ev e LEFT SEMI JOIN dim_changes c "
         "ON e.k = c.k) SELECT e.dt, e.k, COUNT(*) AS n, MAX(d.label) AS label FROM ev e LEFT JOIN dim d "
         "ON e.k = d.k WHERE e.dt IN (SELECT dt FROM days) GROUP BY e.dt, e.k")
FULL = ("SELECT e.dt, e.k, COUNT(*) AS n, MAX(d.label) AS label FROM ev e LEFT JOIN dim d ON e.k = d.k "
        "GROUP BY e.dt, e.k")


def append(spark: Any, path: str, rows: list[tuple[Any, ...]], schema: str) -> None:
    LakeTable.open(path).write(spark.createDataFrame(rows, schema).coalesce(1))  # a file per append


def step(up: str, dim: str, down: str, partitions: str = "changed") -> dict[str, Any]:
    return {"table": down, "mode": "overwrite", "partitions": "dynamic",
            "source": {"query": DAILY, "tables": {"ev": {"path": up, "partitions": partitions}, "dim": dim},
                       "incremental": [{"view": "ev_changes", "table": up}, {"view": "dim_changes", "table": dim}]}}


def rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in LakeTable.open(path).read(spark).collect())


@pytest.fixture
def tables(spark: Any, tmp_path: Path) -> dict[str, str]:
    paths = {name: str(tmp_path / name) for name in ("up", "dim", "down", "full")}
    LakeTable.create(paths["up"], {"schema": EVENTS, "partition_by": ["dt"]})
    LakeTable.create(paths["dim"], {"schema": "k BIGINT NOT NULL, label STRING"})
    for name in ("down", "full"):
        LakeTable.create(paths[name], {"schema": "dt STRING, k BIGINT, n BIGINT NOT NULL, label STRING",
                                       "partition_by": ["dt"]})
    for day in ("d1", "d2", "d3"):  # a file per day
        append(spark, paths["up"], [(i, i % 2, day) for i in range(4)], EVENTS)
    append(spark, paths["dim"], [(0, "zero"), (1, "one")], "k BIGINT, label STRING")
    return paths


def full_rebuild(spark: Any, paths: dict[str, str]) -> list[tuple[Any, ...]]:
    run(spark, "write", {"table": paths["full"], "mode": "overwrite",
                         "source": {"query": FULL, "tables": {"ev": paths["up"], "dim": paths["dim"]}}})
    return rows(spark, paths["full"])


def test_a_changed_day_reads_that_day_only_and_equals_a_full_rebuild(spark: Any, tables: dict[str, str]) -> None:
    up, dim, down = tables["up"], tables["dim"], tables["down"]
    first = run(spark, "write", step(up, dim, down))  # the first run: everything is a change
    assert first["source_scans"]["ev"] == {"files_read": 3, "files_skipped": 0}, first
    assert rows(spark, down) == full_rebuild(spark, tables)

    append(spark, up, [(10, 0, "d2"), (11, 0, "d2")], EVENTS)  # late events of d2
    late = run(spark, "write", step(up, dim, down))
    assert late["source_scans"]["ev"]["files_read"] == 2, late  # d2's two files; d1 and d3 not listed for Spark
    assert rows(spark, down) == full_rebuild(spark, tables)

    # a dimension change (unpartitioned: it may concern any day): every partition is read
    append(spark, dim, [(2, "two")], "k BIGINT, label STRING")
    LakeTable.open(dim).write(spark.createDataFrame([(1, "uno")], "k BIGINT, label STRING"), mode="overwrite")
    append(spark, dim, [(0, "zero")], "k BIGINT, label STRING")
    widened = run(spark, "write", step(up, dim, down))
    assert widened["source_scans"]["ev"]["files_read"] == 4, widened
    assert rows(spark, down) == full_rebuild(spark, tables)
    rebuilt = rows(spark, down)
    assert ("d1", 1, 2, "uno") in rebuilt

    # nothing changed upstream: no query, no read, no commit
    unchanged = run(spark, "write", step(up, dim, down))
    assert unchanged["noop"] and "source_scans" not in unchanged and rows(spark, down) == rebuilt, unchanged


def test_with_only_a_partitioned_upstream_changed_elsewhere_no_file_is_read(spark: Any, tables: dict[str, str],
                                                                            tmp_path: Path) -> None:
    """Two partitioned upstreams: a change in the other one's d3 reads this one's d3; none, none. A list of views
    prunes by their windows only."""
    up, down = tables["up"], tables["down"]
    other = str(tmp_path / "other")
    LakeTable.create(other, {"schema": EVENTS, "partition_by": ["dt"]})
    spec = {"table": down, "mode": "overwrite", "partitions": "dynamic",
            "source": {"query": "SELECT dt, k, COUNT(*) AS n, CAST(NULL AS STRING) AS label FROM ev GROUP BY dt, k",
                       "tables": {"ev": {"path": up, "partitions": "changed"}},
                       "incremental": [{"view": "ev_changes", "table": up}, {"view": "o", "table": other}]}}
    run(spark, "write", spec)
    append(spark, other, [(1, 1, "d3")], EVENTS)
    third = run(spark, "write", spec)
    assert third["source_scans"]["ev"] == {"files_read": 1, "files_skipped": 2}, third
    append(spark, other, [(2, 1, "d9")], EVENTS)  # a day `up` does not have: nothing of it to read
    none = run(spark, "write", spec)
    assert none["source_scans"]["ev"] == {"files_read": 0, "files_skipped": 3}, none
    append(spark, other, [(3, 1, "d1")], EVENTS)
    append(spark, up, [(4, 0, "d2")], EVENTS)
    spec["source"]["tables"]["ev"]["partitions"] = ["o"]  # the windows of `o` only: d1, not d2
    only_o = run(spark, "write", spec)
    assert only_o["source_scans"]["ev"] == {"files_read": 1, "files_skipped": 3}, only_o
    assert sorted(r[:3] for r in rows(spark, down)) == [(d, k, 2) for d in ("d1", "d2", "d3") for k in (0, 1)]
    # (d2's new event is not counted: the read left d2 out, as asked)


def test_changed_partitions_are_refused_where_they_mean_nothing(spark: Any, tables: dict[str, str],
                                                                tmp_path: Path) -> None:
    up, dim, down = tables["up"], tables["dim"], tables["down"]
    no_views = {"table": down, "mode": "overwrite", "partitions": "dynamic",
                "source": {"query": "SELECT dt, k, 1L AS n, 'x' AS label FROM ev",
                           "tables": {"ev": {"path": up, "partitions": "changed"}}}}
    with pytest.raises(LakeSpecError, match=r"source\.tables\.ev\.partitions.*no `incremental`"):
        run(spark, "write", no_views)
    bad = step(up, dim, down, partitions="some")
    with pytest.raises(LakeSpecError, match=r"source\.tables\.ev\.partitions.*'some' is not a choice"):
        run(spark, "write", bad)
    unknown_view = step(up, dim, down)
    unknown_view["source"]["tables"]["ev"]["partitions"] = ["ev_changes", "nope"]
    with pytest.raises(LakeSpecError, match=r"source\.tables\.ev\.partitions.*'nope' is not an incremental view"):
        run(spark, "write", unknown_view)
    unpartitioned = step(up, dim, down)
    unpartitioned["source"]["tables"]["dim"] = {"path": dim, "partitions": "changed"}
    with pytest.raises(LakeSpecError, match=r"source\.tables\.dim\.partitions.*without partition columns"):
        run(spark, "write", unpartitioned)
    keyed = str(tmp_path / "keyed")
    LakeTable.create(keyed, {"schema": EVENTS, "partition_by": ["dt"], "primary_key": ["id"],
                             "bucket": {"columns": ["id"], "count": 2}})
    on_keys = step(up, dim, down)
    on_keys["source"]["tables"]["dim"] = {"path": keyed, "partitions": "changed"}
    with pytest.raises(LakeSpecError, match=r"source\.tables\.dim\.partitions.*primary-key table"):
        run(spark, "write", on_keys)
    assert LakeTable.open(down).state().seq == 0  # nothing committed since the create
