"""`airflow-lake publish PATH [PATH ...]`: catch every table at or under each PATH up with publishing (its Delta
Lake log), so other engines read its newest snapshot; a table created before publishing existed is published for
the first time (its whole log replayed). Metadata only: no Spark.

Every table is tried, whatever happens to the others; one that fails is named with its error on stderr and the
command exits with code 2 (after publishing all the others).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_lake.cli_format import fmt_count
from airflow_lake.lake.errors import LakeError

Data = dict[str, Any]


def add_publish_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The parser of `publish` (with its paths and --json)."""
    sub = commands.add_parser("publish", help="publish the commits other engines do not see yet (Delta Lake log); "
                              "every table at or under each PATH, also for the first time")
    sub.add_argument("paths", nargs="+", metavar="PATH", help="a table, or a directory or store URL holding tables "
                     "(as `ls` takes it: every table below is published)")
    sub.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    return sub


def publish_data(paths: Sequence[str]) -> Data:
    """Publish every table at or under `paths`, in order; one result per table (`url`, what `Table.publish` did and
    where publishing stands, or its `error`), and per PATH that names no table an item with its `error`."""
    # (imported here, not at the top: the parser is built without the core, so `airflow-lake --help` stays light)
    from airflow_lake.reports import tables_under

    tables: list[Data] = []
    for given in paths:
        try:
            _, found = tables_under(given)
        except (LakeError, OSError) as err:
            tables.append({"path": given, "url": None, "error": str(err)})
            continue
        if not found:
            tables.append({"path": given, "url": None, "error": f"{given!r} holds no lake table. Fix: give a table's "
                           "path or a directory holding tables (`airflow-lake ls` lists them)."})
        tables += [publish_table(given, relative, url) for relative, url in found]
    failed = [t for t in tables if t["error"] is not None]
    out: Data = {"tables": tables, "published": len(tables) - len(failed), "failed": len(failed)}
    if failed:  # (the shape of the CLI's error document, with the results beside it)
        out["error"] = "; ".join(failure_line(t) for t in failed)
        out["exit_code"] = 2
    return out


def publish_table(given: str, relative: str, url: str) -> Data:
    """Publish one table: what it did, then where publishing stands (`publication.published_data`), or its error
    (any: one table's failure must not stop the others)."""
    from airflow_lake.lake.table import LakeTable
    from airflow_lake.publication import published_data

    item: Data = {"path": given if relative == "." else f"{given.rstrip('/')}/{relative}", "url": url}
    try:
        table = LakeTable.open(url)
        done = table.publish().to_dict()
        item.update(published_data(table), **done, error=None)
    except Exception as err:
        problem = str(err) if isinstance(err, LakeError) else f"{type(err).__name__}: {err}"
        item["error"] = problem
    return item


def failure_line(item: Mapping[str, Any]) -> str:
    """'<table>: <error>' (what stderr says of a table that failed)."""
    return f"{item['url'] or item['path']}: publishing failed: {item['error']}"


def render_publish(data: Mapping[str, Any]) -> str:
    """Text form: one line per table, what was published and where it stands."""
    return "\n".join(_line(t) for t in data["tables"])


def _line(item: Mapping[str, Any]) -> str:
    name = item["url"] or item["path"]
    if item["error"] is not None:
        return f"{name}: FAILED: {item['error']}"
    if item.get("published_seq") is None:
        return f"{name}: not published (table property publish.delta is false), log at seq {item['seq']}"
    written = int(item.get("delta_versions_written") or 0)
    head = (f"published {fmt_count(written)} Delta version(s), up to seq {item['published_seq']} "
            f"in {float(item.get('publish_seconds') or 0):.3f} s" if written else
            f"up to date: Delta version {item['published_seq']} = seq {item['seq']}")
    return f"{name}: {head}{hidden_text(item)}"


def hidden_text(item: Mapping[str, Any]) -> str:
    """For a primary-key table whose upserts other engines do not see yet: '; 3 upsert commit(s) in 5 file(s) not
    visible to other engines until the next compact_upserts' ('' otherwise)."""
    commits = item.get("hidden_commits")
    if not commits:
        return ""
    files = int(item.get("hidden_files") or 0) - int(item.get("tombstone_files") or 0)
    return (f"; {fmt_count(int(commits))} upsert commit(s) in {fmt_count(files)} file(s) not visible to other "
            "engines until the next compact_upserts")
