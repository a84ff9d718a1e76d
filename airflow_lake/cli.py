"""`airflow-lake`: look at lake tables from a shell — their timeline, live files and spec — and tidy them.

    airflow-lake ls /lake [--json]                 (every table under a root: kind, rows, files, last commit, health)
    airflow-lake timeline /lake/sales [--limit N] [--json]
    airflow-lake files /lake/sales [--as-of X] [--json]
    airflow-lake show /lake/sales [--as-of X] [--json]
    airflow-lake remove-orphan-files /lake/sales [--dry-run] [--older-than-hours H] [--json]
    airflow-lake plans /lake/sales [--json]
    airflow-lake rollback-pending /lake/sales [INSTANT ...] [--json]
    airflow-lake clean /lake/sales [--retain-hours H] [--force] [--json]
    airflow-lake restore /lake/sales --to SEQ|INSTANT|TIMESTAMP [--dry-run] [--json]
    airflow-lake alter /lake/sales [--add "c2 BIGINT AFTER c1"] [--widen "c BIGINT"] [--drop c] [--rename a=b]
                                   [--set k=v] [--unset k] [--json]   (in the order given; one commit, no data file)
    airflow-lake changes /lake/sales --from N|INSTANT|TIME [--to M] [--limit K] [--json]
                                   (rows inserted / deleted / updated per commit, then the rows: read with
                                   pyarrow, no Spark; cli_changes.py)
    airflow-lake delete /lake/sales --where PREDICATE | --filter COLUMN OP VALUE ... [--dry-run] [--json]
                                   (the one command that starts Spark: rows are rewritten; cli_delete.py)
    airflow-lake delete /lake/users --keys '[{"user_id": 42}]' --version N   (primary-key tables)
    airflow-lake publish PATH [PATH ...] [--json]  (catch tables up with their Delta Lake log, for other engines;
                                                    every table under a root; also the first time: cli_publish.py)
    airflow-lake connect-server [--port 15002] [--master local[2]] [--json]   (a Spark Connect server for lake tasks)
    airflow-lake jars s3|gcs|azure [--json]          (Spark's connector jars for a store, fetched once: store_jars.py)

It works on metadata (the commit log, checkpoints and pending instants), so it needs neither Spark nor Airflow;
`changes` also reads the data files the commits touched, with pyarrow.
Every path may be a table URL on an object store instead (`airflow-lake ls s3://bucket/lake`, `airflow-lake show
s3://bucket/lake/sales`), reached with the store's usual configuration (for S3: AWS_* environment variables or
~/.aws, as botocore reads them; AWS_ENDPOINT_URL for an S3-compatible server).
Only `remove-orphan-files`, `rollback-pending`, `restore`, `clean`, `alter` and `delete` change anything in our
log or data (`publish` writes only the published metadata other engines read): the first
deletes files no log entry holds (younger than the table's clean.retain.hours only with --force), the second rolls
back the named pending instants (a clustering plan too; never a live writer) or, without ids, every pending instant
whose writer died, the third commits a snapshot equal to an earlier one (`--to`: 17 digits are an instant id, other
digits a log sequence number, anything else a time, ISO-8601 or UNIX seconds with a decimal point). `clean` deletes
the files the log removed that no snapshot within the retention needs (`LakeTable.clean`). The old names `vacuum`
and `rollback` still work and say so on stderr (docs/api.md, "Names"). Errors print `airflow-lake: <message>` on
stderr and exit with code 2. With `--json` (every command takes it) stdout holds one JSON document and nothing
else: the command's result, or on an error `{"error": <message>, "exit_code": 2}`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

# Only what builds the parser is imported here: `--help` and a usage error must not pay for the lake core
# (pyarrow, msgspec, the commit log: ~1 s on a busy machine). Each command imports what it runs (below);
# tests/test_cli_imports.py holds `--help` to that.
from airflow_lake import cli_format as fmt
from airflow_lake import connect_server, store_jars
from airflow_lake.cli_changes import add_changes_parser, changes_data, render_changes
from airflow_lake.cli_delete import add_delete_parser, delete_data, render_delete
from airflow_lake.cli_publish import add_publish_parser, failure_line, publish_data, render_publish
from airflow_lake.lake.errors import LakeError, LakeSpecError

if TYPE_CHECKING:
    from airflow_lake.lake.table import LakeTable

Data = dict[str, Any]  # (as `reports.Data`)
PROG = "airflow-lake"
EXIT_OK, EXIT_ERROR = 0, 2
DEFAULT_LIMIT = 50
# the commands' names before issue 21: still parsed (unlisted in --help), with a note on stderr
RENAMED_COMMANDS = {"vacuum": "remove-orphan-files", "rollback": "rollback-pending"}


# -- command line --------------------------------------------------------------------------------------
def _ascii_digits(text: str) -> bool:
    # str.isdigit() and int() accept '²' or '٣'; a sequence number or instant id is ASCII digits only.
    return text.isascii() and text.isdigit()


def _limit(text: str) -> int:
    if not _ascii_digits(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _check_as_of(as_of: str | None) -> None:
    if as_of is not None and not _ascii_digits(as_of.strip()):
        raise LakeSpecError("as_of", f"{as_of!r} is neither a sequence number nor an instant id.",
                            "Give digits 0-9 only, e.g. 3 or 20261121054330123.")


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours >= 0")
    return value


class UsageError(Exception):
    """Arguments argparse refused (its usage is already on stderr)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser (its subcommands' too: they take the parent's class) whose errors `main` reports, so
    that with --json they come as a JSON document too."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `airflow-lake`."""
    parser: argparse.ArgumentParser = _Parser(
        prog=PROG, description="Inspect airflow-lake tables (metadata only), list the tables under a root, remove "
        "orphan files, roll back pending instants, clean, restore an earlier snapshot, alter, delete, publish for "
        "other engines, read the changes between snapshots.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser("ls", help="every lake table under a root: kind, rows, files, size, last commit, "
                                  "health")
    listing.add_argument("root", help="a directory or store URL (s3://bucket/prefix) holding lake tables (searched 4 "
                         "levels deep)")
    timeline = commands.add_parser("timeline", help="instants of a table, oldest first")
    timeline.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT,
                          help=f"show the last N log entries (default {DEFAULT_LIMIT}; 0 = all); "
                               "pending instants are always shown")
    files = commands.add_parser("files", help="live files per partition and bucket")
    show = commands.add_parser("show", help="table spec, snapshot totals and pending instants")
    for sub in (files, show):
        sub.add_argument("--as-of", dest="as_of", default=None,
                         help="a log sequence number or a completed instant id (default: latest)")
    removal = _with_old_name(commands, "remove-orphan-files", help="delete files no log entry holds (orphans)")
    for sub in removal:
        sub.add_argument("--dry-run", dest="dry_run", action="store_true",
                         help="only list what would be deleted; change nothing")
        sub.add_argument("--older-than-hours", dest="older_than_hours", type=_hours, default=None,
                         help="keep files modified more recently (default: the table property clean.retain.hours)")
        sub.add_argument("--force", action="store_true",
                         help="allow --older-than-hours below the table's clean.retain.hours (a running writer's "
                              "files may be deleted)")
    plans = commands.add_parser("plans", help="pending clustering plans (their partitions and groups) and commits "
                                "since the last clustering")
    clean = commands.add_parser("clean", help="delete files the log removed that no snapshot within the retention "
                                "needs")
    clean.add_argument("--retain-hours", dest="retain_hours", type=_hours, default=None,
                       help="keep what snapshots of the last H hours read (default: the table property "
                            "clean.retain.hours)")
    clean.add_argument("--force", action="store_true",
                       help="allow --retain-hours below the table's clean.retain.hours")
    rollback = _with_old_name(commands, "rollback-pending", help="roll back the named pending instants (a "
                              "clustering plan too), or without ids every one whose writer died")
    restore = commands.add_parser("restore", help="commit a snapshot equal to an earlier one (undo commits; "
                                  "history stays)")
    restore.add_argument("--to", dest="to", required=True, metavar="SEQ|INSTANT|TIMESTAMP",
                         help="a log sequence number, a completed instant id (17 digits), or a time (ISO-8601, UTC "
                              "without a zone, or UNIX seconds with a decimal point): the last snapshot at or "
                              "before it")
    restore.add_argument("--dry-run", dest="dry_run", action="store_true",
                         help="only print what would be removed and re-added; change nothing")
    alter = commands.add_parser("alter", help="add, widen, drop or rename columns, set or unset properties (in "
                                "the order given, one commit; no data file is rewritten)")
    for flag, metavar, text in _ALTER_FLAGS:
        alter.add_argument(f"--{flag}", dest="changes", action=_AlterChange, metavar=metavar, help=text)
    for sub in (timeline, files, show, *removal, plans, clean, *rollback, restore, alter):
        sub.add_argument("path", help="table path or URL")
    for sub in (listing, timeline, files, show, *removal, plans, clean, *rollback, restore, alter):
        sub.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    for sub in rollback:
        sub.add_argument("instants", nargs="*", metavar="INSTANT",
                         help="pending instant ids (17 digits) as `timeline` and `plans` show them")
    add_changes_parser(commands)  # (reads data files with pyarrow: cli_changes.py)
    add_delete_parser(commands)  # (needs Spark: cli_delete.py)
    add_publish_parser(commands)  # (every table at or under each PATH: cli_publish.py)
    server = commands.add_parser("connect-server", help="run a Spark Connect server (from the pip package) for "
                                 "lake tasks")
    connect_server.add_arguments(server)
    server.add_argument("--json", action="store_true", help="print the server's address as one JSON document; "
                        "the server's own output then goes to stderr")
    store_jars.add_arguments(commands.add_parser(
        "jars", help="fetch (once, with mvn, into your cache) the jars Spark needs for tables on a store; prints "
        "them comma-separated for --jars"))
    return parser


def _with_old_name(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *,
                   help: str) -> list[argparse.ArgumentParser]:
    """The parser of command `name` and, unlisted (no `help`), the one of its old name."""
    old = next(o for o, new in RENAMED_COMMANDS.items() if new == name)
    return [commands.add_parser(name, help=help),
            commands.add_parser(old, description=f"Deprecated name of `{PROG} {name}`: {help}.")]


def _rollback_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.lake.format.instants import is_instant_id

    ids = list(args.instants)
    for instant in ids:
        if not is_instant_id(instant):
            raise LakeSpecError("INSTANT", f"{instant!r} is not an instant id.",
                                f"Give 17-digit ids as `{PROG} timeline {table.url}` shows them.")
    entry = table.rollback_pending(ids or None)
    return {"table": table.url, "requested": ids, "rolled_back": list(entry.rolled_back) if entry else [],
            "instant": entry.instant if entry else None, "seq": entry.seq if entry else None,
            "reason": entry.metadata.get("reason") if entry else None}


def _clean_data(table: LakeTable, args: argparse.Namespace) -> Data:
    entry = table.clean(args.retain_hours, force=args.force)
    return {"table": table.url, "committed": entry is not None, "instant": entry.instant if entry else None,
            "seq": entry.seq if entry else None,
            "deleted": list(entry.metadata.get("deleted", ())) if entry else [],
            "files_deleted": int(entry.metrics.get("files_deleted", 0)) if entry else 0,
            "bytes_freed": int(entry.metrics.get("bytes_freed", 0)) if entry else 0,
            "retain_hours": args.retain_hours if args.retain_hours is not None
            else table.spec.float_property("clean.retain.hours")}


def _render_clean(data: Data) -> str:
    if not data["committed"]:
        return f"{data['table']}: nothing to clean (no removed file is past {data['retain_hours']:g} h)"
    return "\n".join([f"{data['table']}: deleted {data['files_deleted']} file(s), {fmt.fmt_bytes(data['bytes_freed'])} "
                      f"freed (log entry {data['seq']}, instant {data['instant']})", *data["deleted"]])


def _render_rollback(data: Data) -> str:
    if data["rolled_back"]:
        return (f"{data['table']}: rolled back {', '.join(data['rolled_back'])} (log entry {data['seq']}, "
                f"reason: {data['reason']})")
    if data["requested"]:
        return f"{data['table']}: nothing to roll back ({', '.join(data['requested'])} already rolled back)"
    return f"{data['table']}: nothing to roll back (no pending instant whose writer died)"


def _orphans_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.lake.maintenance.orphans import remove_orphan_files

    result = remove_orphan_files(table, args.older_than_hours, dry_run=args.dry_run, force=args.force)
    return {"table": table.url, **result.to_dict()}


def _restore_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.lake.maintenance import restore as restore_module

    target = restore_module.target_from_text(args.to)
    result = restore_module.restore(table, target, dry_run=args.dry_run)
    entry = result.entry
    return {**result.plan.to_dict(), "target": target.describe(), "dry_run": args.dry_run,
            "committed": entry is not None, "instant": entry.instant if entry else None,
            "seq": entry.seq if entry else None}


def _render_restore(data: Data) -> str:
    head = (f"table {data['table']}: restore to seq {data['restored_to_seq']} (instant {data['restored_to_instant']}, "
            f"completed {data['restored_to_completed_at']}) from seq {data['restored_from_seq']}")
    if data["noop"]:
        return f"{head}\nnothing to do: the latest snapshot already equals it"
    counts = f"{len(data['removed'])} file(s) removed, {len(data['readded'])} re-added"
    changed = [name for key, name in (("spec_changed", "spec"), ("versions_changed", "upsert versions"))
               if data[key]]
    lines = [head, f"dry run: would commit {counts}" if data["dry_run"] else
             f"restored as log entry {data['seq']} (instant {data['instant']}): {counts}"]
    if changed:
        lines.append(f"also restored: {', '.join(changed)}")
    lines += [f"remove  {p}" for p in data["removed"]] + [f"re-add  {p}" for p in data["readded"]]
    return "\n".join(lines)


# -- alter ---------------------------------------------------------------------------------------------
_ALTER_FLAGS = (
    ("add", '"NAME TYPE [AFTER COL|FIRST]"', "add a nullable column (at the end unless AFTER or FIRST)"),
    ("widen", '"NAME TYPE"', "widen a column's type (int -> bigint, float -> double, decimal, date -> timestamp_ntz)"),
    ("drop", "NAME", "drop a column (its data stays in old files, never read again)"),
    ("rename", "OLD=NEW", "rename a column (old files keep reading right)"),
    ("set", "KEY=VALUE", "set a table property, e.g. clean.retain.hours=24"),
    ("unset", "KEY", "unset a table property (its default applies again)"),
)
_ADD = re.compile(r"^\s*(\S+)\s+(.+?)(?:\s+AFTER\s+(\S+)|\s+(FIRST))?\s*$", re.IGNORECASE | re.DOTALL)


class _AlterChange(argparse.Action):
    """Collects the alter flags as changes in the order given on the command line (argparse keeps no order
    across different flags)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        changes = list(getattr(namespace, self.dest, None) or [])
        try:
            changes.append(_alter_change(str(option_string).lstrip("-"), str(values)))
        except ValueError as err:
            parser.error(str(err))  # exits with usage and code 2
        setattr(namespace, self.dest, changes)


def _alter_change(flag: str, text: str) -> dict[str, object]:
    """The JSON form of one alter flag (checked in full against the table by `alter_table`)."""
    where = f"--{flag}"
    if flag in ("add", "widen"):
        match = _ADD.match(text)
        if match is None or (flag == "widen" and (match.group(3) or match.group(4))):
            shape = '"NAME TYPE [AFTER COL|FIRST]"' if flag == "add" else '"NAME TYPE"'
            raise ValueError(f"{where} {text!r}: expected {shape}")
        change: dict[str, object] = {flag: match.group(1), "type": match.group(2)}
        if match.group(3):
            change["after"] = match.group(3)
        if match.group(4):
            change["first"] = True
        return change
    if flag in ("rename", "set"):
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{where} {text!r}: expected {'OLD=NEW' if flag == 'rename' else 'KEY=VALUE'}")
        if flag == "rename":
            return {"rename": key.strip(), "to": value.strip()}
        return {"set_properties": {key.strip(): value.strip()}}
    if flag == "unset":
        return {"unset_properties": [text.strip()]}
    return {"drop": text.strip()}


def _alter_data(table: LakeTable, args: argparse.Namespace) -> Data:
    changes = list(args.changes or [])
    if not changes:
        raise LakeSpecError("alter", "no change given.", "Give at least one of --add, --widen, --drop, --rename, "
                            "--set, --unset.")
    entry = table.alter_table(changes)
    spec = entry.metadata.get("spec") or {}
    return {"table": table.url, "instant": entry.instant, "seq": entry.seq, "changes": changes,
            "columns": [{k: c[k] for k in ("name", "type", "physical") if k in c} for c in spec.get("columns", [])],
            "properties": spec.get("properties", {})}


def _render_alter(data: Data) -> str:
    lines = [f"{data['table']}: altered as log entry {data['seq']} (instant {data['instant']}), "
             f"{len(data['changes'])} change(s); no data file written", "columns:"]
    for column in data["columns"]:
        physical = f"  (in files: {column['physical']})" if "physical" in column else ""
        lines.append(f"  {column['name']} {column['type']}{physical}")
    if data["properties"]:
        lines.append("properties: " + ", ".join(f"{k}={v}" for k, v in sorted(data["properties"].items())))
    return "\n".join(lines)


def _timeline_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.reports import timeline_data

    return timeline_data(table, args.limit)


def _files_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.reports import files_data

    return files_data(table, args.as_of)


def _show_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.reports import show_data

    return show_data(table, args.as_of)


def _plans_data(table: LakeTable, args: argparse.Namespace) -> Data:
    from airflow_lake.reports import plans_data

    return plans_data(table)


COMMANDS: dict[str, tuple[Callable[[LakeTable, argparse.Namespace], Data], Callable[[Data], str]]] = {
    "timeline": (_timeline_data, fmt.render_timeline),
    "files": (_files_data, fmt.render_files),
    "show": (_show_data, fmt.render_show),
    "remove-orphan-files": (_orphans_data, fmt.render_remove_orphan_files),
    "plans": (_plans_data, fmt.render_plans),
    "clean": (_clean_data, _render_clean),
    "rollback-pending": (_rollback_data, _render_rollback),
    "restore": (_restore_data, _render_restore),
    "alter": (_alter_data, _render_alter),
    "delete": (delete_data, render_delete),
    "changes": (changes_data, render_changes),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as err:  # (the usage is on stderr)
        print(str(err), file=sys.stderr)
        if "--json" in argv:
            _emit(json.dumps({"error": str(err), "exit_code": EXIT_ERROR}, indent=2))
        return EXIT_ERROR
    except SystemExit as stop:  # --help
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    if args.command == "connect-server":
        return _connect_server(args)
    if args.command == "jars":
        return _jars(args)
    if args.command in RENAMED_COMMANDS:
        old, args.command = args.command, RENAMED_COMMANDS[args.command]
        print(f"{PROG}: `{PROG} {old}` is deprecated; use `{PROG} {args.command}` (same arguments).",
              file=sys.stderr)
    render: Callable[[Data], str]
    try:
        if args.command == "ls":
            from airflow_lake.reports import ls_data

            data, render = ls_data(args.root), fmt.render_ls
        elif args.command == "publish":
            data, render = publish_data(args.paths), render_publish
        else:
            collect, render = COMMANDS[args.command]
            _check_as_of(getattr(args, "as_of", None))
            from airflow_lake.lake.table import LakeTable

            data = collect(LakeTable.open(args.path), args)
    except (LakeError, OSError, json.JSONDecodeError) as err:  # no table, bad --as-of, unreadable metadata
        return _fail(str(err), args.json)
    except Exception as err:
        if not _is_store_client_error(err):
            raise
        where = args.root if args.command == "ls" else " ".join(args.paths) if args.command == "publish" else args.path
        return _fail(f"{where}: the store could not be reached ({type(err).__name__}: {err}). Fix: configure the "
                     "store's credentials and endpoint for this shell (for S3 the AWS_* environment variables or "
                     "~/.aws as botocore reads them: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE, "
                     "AWS_DEFAULT_REGION, and AWS_ENDPOINT_URL for an S3-compatible server).", args.json)
    _emit(json.dumps(data, indent=2, default=str) if args.json else render(data))
    if args.command == "publish" and data["failed"]:  # the others were published; this one is named
        for item in data["tables"]:
            if item["error"] is not None:
                print(f"{PROG}: {failure_line(item)}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _fail(message: str, as_json: bool) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    if as_json:
        _emit(json.dumps({"error": message, "exit_code": EXIT_ERROR}, indent=2))
    return EXIT_ERROR


# the errors of the stores' client libraries that are no OSError (s3fs passes botocore's own on: no credentials,
# no connection); only a module already imported can have raised one
_STORE_CLIENT_ERRORS = (("botocore.exceptions", "BotoCoreError"), ("google.auth.exceptions", "GoogleAuthError"),
                        ("azure.core.exceptions", "AzureError"))


def _is_store_client_error(err: BaseException) -> bool:
    for module, name in _STORE_CLIENT_ERRORS:
        loaded = sys.modules.get(module)
        kind = getattr(loaded, name, None) if loaded is not None else None
        if isinstance(kind, type) and isinstance(err, kind):
            return True
    return False


def _emit(text: str) -> None:
    try:
        print(text, flush=True)
    except BrokenPipeError:  # e.g. `| head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _jars(args: argparse.Namespace) -> int:
    try:
        data = store_jars.run(args)
    except (store_jars.JarsError, OSError) as err:
        return _fail(str(err), args.json)
    _emit(json.dumps(data, indent=2) if args.json else str(data["class_path" if args.class_path else "spark_jars"]))
    return EXIT_OK


def _connect_server(args: argparse.Namespace) -> int:
    if args.json:
        _emit(json.dumps({"url": f"sc://{args.host}:{args.port}", "host": args.host, "port": args.port,
                          "master": args.master}))
        # the server replaces this process and logs to its stdout: send that to stderr, keeping stdout one document
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return connect_server.run(args)


if __name__ == "__main__":
    sys.exit(main())
