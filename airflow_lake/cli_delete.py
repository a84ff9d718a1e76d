"""`airflow-lake delete PATH --where PREDICATE | --filter COLUMN OP VALUE ... [--dry-run]`, or on a primary-key table
`airflow-lake delete PATH --keys JSON --version N` (a versioned delete): the `delete` operation
from a shell, with a local Spark session (or the master in AIRFLOW_LAKE_SPARK_MASTER). `--dry-run` counts the
matching rows and prints the files that would be rewritten or dropped; it writes nothing."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeSpecError

if TYPE_CHECKING:  # (the parser is built without the core: `airflow-lake --help` stays light)
    from airflow_lake.lake.table import LakeTable

Data = dict[str, Any]


def add_delete_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The parser of `delete` (with its path and --json)."""
    sub = commands.add_parser("delete", help="delete rows matching a SQL predicate or filters (copy-on-write; "
                              "starts a local Spark session)")
    sub.add_argument("path", help="table path or URL")
    sub.add_argument("--where", default=None, help="a SQL boolean predicate over the table's columns, e.g. "
                     "\"user_id = 42\" (\"true\" deletes every row)")
    sub.add_argument("--filter", dest="filters", nargs=3, action="append", metavar=("COLUMN", "OP", "VALUE"),
                     default=None, help="a filter as reads take it (repeat for AND); VALUE is JSON if it parses "
                     "(42, [1, 2], \"x\"), else text: --filter user_id = 42 --filter dt in '[\"d1\", \"d2\"]'")
    sub.add_argument("--keys", default=None, help="primary-key tables: the keys to delete as JSON, a list of key "
                     "objects ('[{\"user_id\": 42}]', with the partition values on a partitioned table) or a source "
                     "('{\"path\": \"/keys.parquet\"}'); needs --version")
    sub.add_argument("--version", default=None, help="with --keys: the delete's version (a new one, higher than the "
                     "keys' upserts to remove all of them)")
    sub.add_argument("--request-id", dest="request_id", default=None,
                     help="make the delete idempotent: a second run with the same id returns the first's commit")
    sub.add_argument("--dry-run", dest="dry_run", action="store_true",
                     help="only count and list the files that would be rewritten or dropped; change nothing")
    sub.add_argument("--json", action="store_true", help="print JSON instead of text")
    return sub


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def delete_data(table: LakeTable, args: argparse.Namespace) -> Data:
    """Run (or, with --dry-run, plan) the delete; its metrics or plan."""
    filters = [[c, op, _value(v)] for c, op, v in args.filters] if args.filters else None
    if args.keys is not None or args.version is not None:
        return _versioned_delete(table, args, filters)
    if (filters is None) == (args.where is None):
        raise LakeSpecError("--where", "give exactly one of --where and --filter.",
                            "e.g. --where \"user_id = 42\" or --filter user_id = 42.")
    spec: Data = {"table": table.url, **({"filters": filters} if filters else {"where": args.where})}
    if args.request_id:
        spec["request_id"] = args.request_id
    from airflow_lake.jobs.registry import validate
    from airflow_lake.jobs.session import build_session

    validate("delete", spec)  # the shape, before Spark starts
    spark = build_session(f"airflow-lake delete {table.url}")
    if args.dry_run:
        from airflow_lake.lake.delete.copy_on_write import delete

        result = delete(table, spark, filters=filters, where=args.where, dry_run=True)
        assert result.plan is not None
        return {"table": table.url, "dry_run": True, **result.plan.to_dict()}
    from airflow_lake.jobs import run

    return run(spark, "delete", spec)


def _versioned_delete(table: LakeTable, args: argparse.Namespace, filters: Any) -> Data:
    """--keys / --version: a versioned delete of a primary-key table."""
    if filters is not None or args.where is not None:
        raise LakeSpecError("--keys", "give --keys/--version or --where/--filter, not both.",
                            "--keys and --version for a primary-key table, --where or --filter for others.")
    if args.dry_run:
        raise LakeSpecError("--dry-run", "a versioned delete has no dry run (it reads no rows: it records the keys).",
                            "Drop --dry-run.")
    if args.keys is None or args.version is None:
        raise LakeSpecError("--version" if args.version is None else "--keys", "--keys and --version go together.",
                            "e.g. --keys '[{\"user_id\": 42}]' --version 20240301.")
    try:
        keys = json.loads(args.keys)
    except ValueError as err:
        raise LakeSpecError("--keys", f"{args.keys!r} is not JSON.", "e.g. --keys '[{\"user_id\": 42}]'.") from err
    spec: Data = {"table": table.url, "keys": keys, "version": args.version}
    if args.request_id:
        spec["request_id"] = args.request_id
    from airflow_lake.jobs.registry import validate
    from airflow_lake.jobs.session import build_session

    validate("delete", spec)  # the shape, before Spark starts
    spark = build_session(f"airflow-lake delete {table.url}")
    from airflow_lake.jobs import run

    return run(spark, "delete", spec)


def render_delete(data: Data) -> str:
    """Text form: what was (or would be) rewritten and dropped."""
    if data.get("dry_run"):
        lines = [f"{data['table']}: {data['rows_deleted']} row(s) match in snapshot {data['seq']}; "
                 f"{data['files_scanned']} file(s) scanned, {len(data['rewrite'])} would be rewritten, "
                 f"{len(data['drop'])} dropped (dry run: nothing changed)"]
        lines += [f"  rewrite {f['path']}  ({f['rows_deleted']} of {f['rows']} rows deleted)" for f in data["rewrite"]]
        lines += [f"  drop    {f['path']}  (all {f['rows']} rows deleted)" for f in data["drop"]]
        return "\n".join(lines)
    if data.get("noop"):
        return f"{data['table']}: no row matches; nothing committed ({data.get('files_scanned', 0)} file(s) scanned)"
    again = " (already committed by an earlier run)" if data.get("already_committed") else ""
    if "keys_deleted" in data:
        if data.get("noop"):
            return f"{data['table']}: no key to delete; nothing committed"
        return (f"{data['table']}: deleted {data['keys_deleted']} key(s) at version {data['version']} in log entry "
                f"{data['seq']}{again}: {data.get('files_added', 0)} delete file(s) added")
    return (f"{data['table']}: deleted {data['rows_deleted']} row(s) in log entry {data['seq']}{again}: "
            f"{data['files_rewritten']} file(s) rewritten, {data['files_dropped']} dropped, "
            f"{data['files_scanned']} scanned")
