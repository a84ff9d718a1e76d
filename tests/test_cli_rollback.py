"""`airflow-lake rollback-pending` (was `rollback`): the command the damaged-plan messages name (metadata only, no
Spark)."""

from __future__ import annotations

import json

import pytest

from airflow_lake.cli import main
from airflow_lake.jobs import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format import instants
from tests.lake.lake_core_helpers import append, backdate, make_table


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_rollback_pending_drops_a_named_plan_or_every_dead_writer_and_refuses_the_rest(
        table_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(table_path)
    entry = None
    for _ in range(4):
        entry, _ = append(table, "a")
    assert entry is not None
    plan = run(None, "schedule_clustering", {"table": table_path})["plan_id"]
    dead = table.begin("commit", "write")
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)

    code, out, _ = cli(capsys, "rollback-pending", table_path, "--json")  # no ids: dead writers only, never a plan
    assert code == 0 and json.loads(out)["rolled_back"] == [dead.instant]
    assert [p.id for p in instants.pending(table.storage)] == [plan]
    code, out, _ = cli(capsys, "rollback-pending", table_path)
    assert code == 0 and "nothing to roll back" in out

    code, out, _ = cli(capsys, "rollback-pending", table_path, plan)
    assert code == 0 and f"rolled back {plan}" in out and plan in LakeTable.open(table_path).state().rolled_back
    code, out, _ = cli(capsys, "rollback-pending", table_path, plan)  # again: nothing left to do
    assert code == 0 and "already rolled back" in out

    for bad, message in ((entry.instant, "is completed"), ("20000101000000000", "not pending"),
                         ("12", "not an instant id")):
        code, out, err = cli(capsys, "rollback-pending", table_path, bad)
        assert code == 2 and message in err and out == "", (bad, err)
    live = table.begin("commit", "write")
    code, _, err = cli(capsys, "rollback-pending", table_path, live.instant)
    assert code == 2 and "alive" in err
    live.abort()


def test_the_old_rollback_command_still_works_and_says_it_is_deprecated(
        table_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(table_path)
    dead = table.begin("commit", "write")
    dead._heartbeat.stop()
    backdate(table, dead.instant, 30)

    code, out, err = cli(capsys, "rollback", table_path, dead.instant, "--json")

    assert code == 0 and json.loads(out)["rolled_back"] == [dead.instant]
    assert err == "airflow-lake: `airflow-lake rollback` is deprecated; use `airflow-lake rollback-pending` " \
                  "(same arguments).\n"
    entry = LakeTable.open(table_path).commit_log.read(json.loads(out)["seq"])
    assert (entry.action, entry.operation, entry.rolled_back) == ("rollback", "rollback_pending", (dead.instant,))
    code, out, err = cli(capsys, "--help")
    assert code == 0 and "rollback-pending" in out and "remove-orphan-files" in out
    assert " rollback " not in out and "vacuum" not in out  # the old names are not advertised
