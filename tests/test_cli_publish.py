"""`airflow-lake publish PATH [PATH ...]` (issue 34, item 4): catches every table at or under each path up with its
Delta Lake log, also a table that was never published (its `_delta_log/` deleted: a table created before publishing
existed), checked with delta-rs reading the log it wrote; one table that fails is named with its error, the command
exits 2, and the other tables are still published. Metadata only: no Spark."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_lake.cli import main
from airflow_lake.lake import LakeTable
from tests.lake.lake_core_helpers import append, live_paths, make_table


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def table_with_commits(path: Path, commits: int) -> LakeTable:
    table = make_table(str(path))
    for day in range(commits):
        append(table, f"d{day}", disk=True)
    return table


def read_by_delta_rs(table: LakeTable) -> tuple[int, set[str]]:
    """The newest Delta version and its files, as delta-rs reads the published log."""
    delta = DeltaTable(table.url)
    return delta.version(), {uri.removeprefix(table.url.rstrip("/") + "/") for uri in delta.file_uris()}


def test_publish_a_root_publishes_every_table_below_it_also_the_first_time(tmp_path: Path) -> None:
    old = table_with_commits(tmp_path / "lake" / "old", 3)
    nested = table_with_commits(tmp_path / "lake" / "dims" / "users", 1)
    shutil.rmtree(old.storage.path("_delta_log"))  # as a table created before publishing existed

    code, out, err = cli("publish", str(tmp_path / "lake"))

    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{tmp_path}/lake/dims/users: up to date: Delta version 1 = seq 1",
                                out.splitlines()[1]]
    assert out.splitlines()[1].startswith(f"{tmp_path}/lake/old: published 4 Delta version(s), up to seq 3 in ")
    assert read_by_delta_rs(old) == (3, live_paths(old))
    assert read_by_delta_rs(nested) == (1, live_paths(nested))
    # once caught up, again: nothing written
    code, out, _ = cli("publish", old.url, "--json")
    (item,) = json.loads(out)["tables"]
    assert code == 0 and (item["seq"], item["published_seq"], item["delta_versions_written"]) == (3, 3, 0)
    assert (item["unpublished_commits"], item["error"]) == (0, None)


def test_one_table_that_fails_is_named_and_the_others_are_still_published(tmp_path: Path) -> None:
    broken = table_with_commits(tmp_path / "lake" / "a_broken", 2)
    fine = table_with_commits(tmp_path / "lake" / "b_fine", 2)
    for table in (broken, fine):
        shutil.rmtree(table.storage.path("_delta_log"))
    Path(broken.storage.path("_delta_log")).write_text("not a directory")  # no version can be written there

    code, out, err = cli("publish", str(tmp_path / "lake"), "--json")

    assert code == 2
    data = json.loads(out)
    by_url = {t["url"]: t for t in data["tables"]}
    assert (data["published"], data["failed"], data["exit_code"]) == (1, 1, 2)
    assert by_url[fine.url]["error"] is None and by_url[fine.url]["delta_versions_written"] == 3
    assert read_by_delta_rs(fine) == (2, live_paths(fine))
    assert "_delta_log" in by_url[broken.url]["error"]  # (the OS error of writing a version under a file)
    assert err == f"airflow-lake: {broken.url}: publishing failed: {by_url[broken.url]['error']}\n"
    assert broken.commit_log.head() == 2  # our log, the truth, untouched

    code, out, err = cli("publish", fine.url, str(tmp_path / "nothing"))  # text form; a path with no table
    assert code == 2 and out.splitlines()[0] == f"{fine.url}: up to date: Delta version 2 = seq 2"
    assert out.splitlines()[1].startswith(f"{tmp_path}/nothing: FAILED: ")
    assert f"airflow-lake: {tmp_path}/nothing: publishing failed:" in err


def test_a_directory_without_tables_and_a_table_that_does_not_publish(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out, err = cli("publish", str(tmp_path / "empty"))
    assert code == 2 and "holds no lake table" in out and "holds no lake table" in err
    off = make_table(str(tmp_path / "off"), {"publish.delta": "false"})
    code, out, _ = cli("publish", off.url)
    assert code == 0
    assert out.strip() == f"{off.url}: not published (table property publish.delta is false), log at seq 0"
    assert not Path(off.storage.path("_delta_log")).exists()


def test_ls_and_the_page_show_commits_not_published_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lake.lake.publish import delta_publisher
    from airflow_lake.ui import data, pages
    from airflow_lake.ui.roots import resolve

    table = table_with_commits(tmp_path / "lake" / "sales", 1)

    def broken(*_: Any, **__: Any) -> Any:
        raise OSError("the store refused the Delta version")

    monkeypatch.setattr(delta_publisher, "publish", broken)  # the publish after the next commit fails
    append(table, "late", disk=True)
    monkeypatch.undo()

    code, out, _ = cli("ls", str(tmp_path / "lake"))
    assert code == 0 and "delta 1/2" in out.splitlines()[2]
    assert ("sales: 1 commit(s) not published for other engines yet (the next commit or `airflow-lake publish` "
            "catches up)") in out
    row = data.table_summary(resolve("0/sales", [str(tmp_path / "lake")]))
    assert row["published"] == {"seq": 2, "published_seq": 1, "unpublished_commits": 1}
    assert ("<td class='published' data-published-seq='1'>Delta <span class='published-seq'>1</span> / "
            "<span class='head-seq'>2</span><div class='unpublished warn'>1 commit(s) not published yet</div></td>"
            ) in pages.index_page([str(tmp_path / "lake")], [row], [])

    assert cli("publish", table.url)[0] == 0
    assert "delta 2/2" in cli("ls", str(tmp_path / "lake"))[1]
