"""The `airflow-lake` CLI on tables on object stores (S3, GCS and Azure: real servers on 127.0.0.1,
`tests/stores.py`; commits through the transaction API with data files written to the store, no Spark): `ls` finds
the tables under a prefix with bounded listings (never listing a table's own prefix, never touching a data file),
and `timeline`, `show`, `files`, `plans`, `remove-orphan-files` and `clean` take a table's URL where they take a
path, in text and with --json; the installed console script reaches the store from the environment alone.

The tables are made once per store (a module fixture); the tests run in this file's order on each, and only
`test_table_commands_take_a_url`, which runs before the console script's, changes them (its clean deletes a file no
snapshot from then on has live)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.jobs.runner import run as run_job
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.log import LogEntry
from airflow_lake.lake.format.storage import Storage
from tests.s3_server import S3Server
from tests.stores import STORES, StoreServer, server_of
from tests.test_cli import commit as cli_commit

BUCKETED = {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"], "bucket": {"columns": ["id"], "count": 4}}
PLAIN = {"schema": "id BIGINT"}
AIRFLOW_LAKE = Path(sys.executable).with_name("airflow-lake")
MB = 1024 * 1024


def commit(table: LakeTable, files: Sequence[tuple[str, int, int | None]], removed: Sequence[str] = (),
           action: str = "commit") -> LogEntry:
    """Commit data files given as (partition value of dt or "" for none, rows, bucket), written to the store
    first (manifest, then the file); bytes are rows * 10 in the log, whatever the file holds."""
    return cli_commit(table, files, removed, action, write_files=True)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, (out, err)
    return json.loads(out)


@pytest.fixture(scope="module", params=STORES)
def lake(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Under one prefix: a bucketed table (ods/sales, with a replace and a pending clustering plan), a plain one
    (plain), a table three levels down (a/b/deep), a prefix of other files (raw/) and a damaged table (broken)."""
    store = server_of(request, request.param)
    store_root = store.root()
    sales = LakeTable.create(f"{store_root}/ods/sales", BUCKETED)
    first = commit(sales, [("a", 10, 1)])
    commit(sales, [("a", 15, 3), ("b", 7, 0)])
    replaced = commit(sales, [("a", 10, 1)], removed=[first.added[0].path], action="replace")
    for _ in range(4):
        commit(sales, [("c", 5, 2)])
    plan = run_job(None, "schedule_clustering", {"table": sales.url, "min_commits": 1})
    plain = LakeTable.create(f"{store_root}/plain", PLAIN)
    commit(plain, [("", 3, None)])
    deep = LakeTable.create(f"{store_root}/a/b/deep", PLAIN)
    Storage(store_root).write_bytes("raw/2026/01/x.csv", b"1,2")  # other files, no table
    broken = LakeTable.create(f"{store_root}/broken", PLAIN)
    broken.storage.write_bytes("_lake/log/00000000000000000001.json", b"{not json")
    return {"root": store_root, "sales": sales, "plain": plain, "deep": deep, "first": first, "replaced": replaced,
            "plan": plan, "store": store}


def ls_requests(server: S3Server, counts: Counter[tuple[str, str]], root: str, by_path: dict[str, Any]) -> None:
    """On S3, where requests are counted: `ls` read or asked about no data file and listed no table's own prefix
    (its data); one delimiter listing per prefix outside the tables."""
    requests = list(server.counter.recent)[-sum(counts.values()):]  # (label, key, status), newest last
    key = server.key_of(root)
    tables = [f"{key}/{t}/" for t in by_path]
    assert not [r for r in requests if r[0] in ("GET", "HEAD") and "/_lake/" not in r[1]], requests
    assert not [r for r in requests if r[0] == "LIST" and (r[1] in tables or "/dt=" in r[1])], requests
    assert not any(kind == "data" and method != "LIST" for method, kind in counts), counts
    # the root, ods/, a/, a/b/, raw/ and the two below it
    assert counts[("LIST", "data")] == 7, counts


def test_ls_finds_the_tables_under_a_prefix_without_touching_their_data(
        lake: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    root = lake["root"]
    s3_server: S3Server | None = lake["store"].s3
    mark = s3_server.counter.mark() if s3_server else Counter()
    data = cli_json(capsys, "ls", root)
    if s3_server is not None:
        counts = s3_server.counter.since(mark)
    assert data["root"] == root
    assert [t["path"] for t in data["tables"]] == ["a/b/deep", "broken", "ods/sales", "plain"]
    by_path = {t["path"]: t for t in data["tables"]}
    assert by_path["ods/sales"]["url"] == f"{root}/ods/sales" and by_path["ods/sales"]["error"] is None
    assert by_path["ods/sales"]["totals"]["files"] == 7 and by_path["plain"]["totals"]["rows"] == 3
    assert "00000000000000000001.json" in by_path["broken"]["error"]
    if s3_server is not None:
        ls_requests(s3_server, counts, root, by_path)
    code, out, err = cli(capsys, "ls", root)
    assert code == 0 and out.splitlines()[0] == root
    assert [line.split()[0] for line in out.splitlines()[2:6]] == ["a/b/deep", "broken", "ods/sales", "plain"]
    # the root itself a table; a prefix holding nothing
    assert [t["path"] for t in cli_json(capsys, "ls", f"{root}/plain")["tables"]] == ["."]
    code, out, err = cli(capsys, "ls", f"{root}/nothing-here")
    assert code == 2 and "holds nothing" in err


def test_table_commands_take_a_url(lake: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    url = lake["sales"].url
    timeline = cli_json(capsys, "timeline", url)
    assert timeline["table"] == url
    states = [(i["action"], i["state"]) for i in timeline["instants"]]
    assert states[0] == ("create", "completed") and states[-1] == ("replace", "requested")  # the pending plan
    assert len([s for s in states if s[1] == "completed"]) == 8
    code, out, _ = cli(capsys, "timeline", url, "--limit", "2")
    assert code == 0 and "requested" in out

    show = cli_json(capsys, "show", url)
    assert show["table"] == url and show["totals"]["files"] == 7 and show["totals"]["rows"] == 52
    older = cli_json(capsys, "show", url, "--as-of", str(lake["first"].seq))
    assert older["totals"]["files"] == 1
    assert cli(capsys, "show", url)[0] == 0

    files = cli_json(capsys, "files", url)
    assert [p["partition"] for p in files["partitions"]] == [{"dt": "a"}, {"dt": "b"}, {"dt": "c"}]
    code, out, _ = cli(capsys, "files", url)
    assert code == 0 and "dt=c" in out

    plans = cli_json(capsys, "plans", url)
    assert [p["id"] for p in plans["plans"]] == [lake["plan"]["plan_id"]]
    assert plans["plans"][0]["partitions_detail"][0]["name"] == "dt=c"
    code, out, _ = cli(capsys, "plans", url)
    assert code == 0 and lake["plan"]["plan_id"] in out

    # the replaced file is clean's; nothing is an orphan yet (every key is the log's, or too young)
    orphans = cli_json(capsys, "remove-orphan-files", url, "--dry-run")
    assert orphans["orphans"] == [] and orphans["dry_run"] is True
    removed = lake["first"].added[0].path
    cleaned = cli_json(capsys, "clean", url, "--retain-hours", "0", "--force")
    assert cleaned["committed"] and cleaned["deleted"] == [removed]
    assert not lake["sales"].storage.exists(removed)

    code, out, _ = cli(capsys, "show", f"{lake['root']}/nope", "--json")
    assert code == 2 and "no lake table" in json.loads(out)["error"]


def test_the_console_script_reaches_the_store_from_the_environment(lake: dict[str, Any], tmp_path: Path) -> None:
    """What a shell user runs: the store is found through the environment its fsspec package reads (the AWS_*
    variables; STORAGE_EMULATOR_HOST; AZURE_STORAGE_CONNECTION_STRING: `StoreServer.env`); on S3 without
    credentials the command says so (exit code 2), not with a traceback."""
    store: StoreServer = lake["store"]
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "PYTHON", "LANG"))}
    env.update(store.env, HOME=str(tmp_path))  # no ~/.aws, no ~/.config
    done = subprocess.run([str(AIRFLOW_LAKE), "ls", lake["root"], "--json"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert [t["path"] for t in json.loads(done.stdout)["tables"]] == ["a/b/deep", "broken", "ods/sales", "plain"]
    if store.name != "s3":
        return
    anonymous = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    done = subprocess.run([str(AIRFLOW_LAKE), "show", lake["sales"].url, "--json"], capture_output=True,
                          text=True, env=anonymous, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    message = json.loads(done.stdout)["error"]
    assert "the store could not be reached (NoCredentialsError" in message and "AWS_ACCESS_KEY_ID" in message


def fsspec_config(store: StoreServer) -> dict[str, str]:
    """fsspec's own configuration of the store's package (FSSPEC_<PROTOCOL> as JSON, as ~/.config/fsspec/<protocol>
    .json would hold it), naming the endpoint and the credentials alone."""
    if store.name == "s3":
        return {"AWS_EC2_METADATA_DISABLED": "true", "FSSPEC_S3": json.dumps(
            {"endpoint_url": store.endpoint, "key": "testing", "secret": "testing",
             "client_kwargs": {"region_name": "us-east-1"}})}
    if store.name == "gcs":  # (gcsfs's gRPC lookup of the bucket's type is off for an emulator: tests/stores.py)
        return {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
                "FSSPEC_GS": json.dumps({"endpoint_url": store.endpoint, "token": "anon"})}
    return {"FSSPEC_ABFS": json.dumps({"connection_string": store.env["AZURE_STORAGE_CONNECTION_STRING"]})}


def test_the_store_may_be_configured_through_fsspec_instead(lake: dict[str, Any], tmp_path: Path) -> None:
    """fsspec's own configuration serves as well as the store client's environment (botocore's AWS_* variables,
    STORAGE_EMULATOR_HOST, AZURE_STORAGE_CONNECTION_STRING): here it alone names the endpoint and the
    credentials (for az:// URLs too: they are served by adlfs's `abfs` protocol)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "PYTHON", "LANG"))}
    env.update(fsspec_config(lake["store"]), HOME=str(tmp_path))
    done = subprocess.run([str(AIRFLOW_LAKE), "timeline", lake["sales"].url, "--json"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["instants"][0]["action"] == "create"


def test_remove_orphan_files_aborts_a_tables_incomplete_uploads(s3_server: S3Server, s3_root: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """What a Spark job killed before its commit leaves on S3 (docs/format.md): the dry run names the upload, the
    run aborts it and says so."""
    table = LakeTable.create(s3_root, PLAIN)
    key = f"{s3_server.key_of(s3_root)}/data/x-1/part-0.parquet"
    s3_server.client.create_multipart_upload(Bucket=s3_server.bucket, Key=key)
    args = ("remove-orphan-files", table.url, "--older-than-hours", "0")
    code, out, _ = cli(capsys, *args, "--dry-run")
    assert code == 0 and "would delete 0 orphan file(s) and 0 staging dir(s), 0 B, abort 1 incomplete upload(s)" \
        in out and "data/x-1/part-0.parquet (incomplete upload)" in out, out
    code, out, _ = cli(capsys, *args, "--force")
    assert code == 0 and "aborted 1 incomplete upload(s)" in out, out
    assert s3_server.client.list_multipart_uploads(Bucket=s3_server.bucket, Prefix=key).get("Uploads", []) == []
    code, out, _ = cli(capsys, "timeline", table.url)
    assert "1 incomplete upload(s) aborted" in out, out
