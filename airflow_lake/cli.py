"""`airflow-lake`: look at lake tables from a shell — their timeline, live files and spec — and tidy them.

    airflow-lake timeline /lake/sales [--limit N] [--json]
    airflow-lake files /lake/sales [--as-of X] [--json]
    airflow-lake show /lake/sales [--as-of X] [--json]
    airflow-lake remove-orphan-files /lake/sales [--dry-run] [--older-than-hours H] [--json]
    airflow-lake plans /lake/sales [--json]
    airflow-lake rollback-pending /lake/sales [INSTANT ...] [--json]
    airflow-lake connect-server [--port 15002] [--master local[2]]   (a Spark Connect server for lake tasks)

It works on metadata (the commit log, checkpoints and pending instants), so it needs neither Spark
nor Airflow. Only `remove-orphan-files` and `rollback-pending` change anything: the first deletes files no
log entry holds, the second rolls back the named pending instants (a clustering plan too; never a live
writer) or, without ids, every pending instant whose writer died. Their old names `vacuum` and `rollback`
still work and say so on stderr (docs/api.md, "Names"). Errors print `airflow-lake: <message>` on stderr and
exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence

from airflow_lake import cli_format as fmt
from airflow_lake import connect_server
from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.format.instants import is_instant_id
from airflow_lake.lake.table import LakeTable
from airflow_lake.reports import Data, files_data, orphan_files_data, plans_data, show_data, timeline_data

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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `airflow-lake`."""
    parser = argparse.ArgumentParser(prog=PROG, description="Inspect airflow-lake tables (metadata only), "
                                                             "remove orphan files, roll back pending instants.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
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
    plans = commands.add_parser("plans", help="pending clustering plans and commits since the last clustering")
    rollback = _with_old_name(commands, "rollback-pending", help="roll back the named pending instants (a "
                              "clustering plan too), or without ids every one whose writer died")
    for sub in (timeline, files, show, *removal, plans, *rollback):
        sub.add_argument("path", help="table path or URL")
        sub.add_argument("--json", action="store_true", help="print JSON instead of a text table")
    for sub in rollback:
        sub.add_argument("instants", nargs="*", metavar="INSTANT",
                         help="pending instant ids (17 digits) as `timeline` and `plans` show them")
    connect_server.add_arguments(commands.add_parser(
        "connect-server", help="run a Spark Connect server (from the pip package) for lake tasks"))
    return parser


def _with_old_name(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *,
                   help: str) -> list[argparse.ArgumentParser]:
    """The parser of command `name` and, unlisted (no `help`), the one of its old name."""
    old = next(o for o, new in RENAMED_COMMANDS.items() if new == name)
    return [commands.add_parser(name, help=help),
            commands.add_parser(old, description=f"Deprecated name of `{PROG} {name}`: {help}.")]


def _rollback_data(table: LakeTable, args: argparse.Namespace) -> Data:
    ids = list(args.instants)
    for instant in ids:
        if not is_instant_id(instant):
            raise LakeSpecError("INSTANT", f"{instant!r} is not an instant id.",
                                f"Give 17-digit ids as `{PROG} timeline {table.url}` shows them.")
    entry = table.rollback_pending(ids or None)
    return {"table": table.url, "requested": ids, "rolled_back": list(entry.rolled_back) if entry else [],
            "instant": entry.instant if entry else None, "seq": entry.seq if entry else None,
            "reason": entry.metadata.get("reason") if entry else None}


def _render_rollback(data: Data) -> str:
    if data["rolled_back"]:
        return (f"{data['table']}: rolled back {', '.join(data['rolled_back'])} (log entry {data['seq']}, "
                f"reason: {data['reason']})")
    if data["requested"]:
        return f"{data['table']}: nothing to roll back ({', '.join(data['requested'])} already rolled back)"
    return f"{data['table']}: nothing to roll back (no pending instant whose writer died)"


COMMANDS: dict[str, tuple[Callable[[LakeTable, argparse.Namespace], Data], Callable[[Data], str]]] = {
    "timeline": (lambda t, a: timeline_data(t, a.limit), fmt.render_timeline),
    "files": (lambda t, a: files_data(t, a.as_of), fmt.render_files),
    "show": (lambda t, a: show_data(t, a.as_of), fmt.render_show),
    "remove-orphan-files": (lambda t, a: orphan_files_data(t, a.older_than_hours, a.dry_run),
                            fmt.render_remove_orphan_files),
    "plans": (lambda t, a: plans_data(t), fmt.render_plans),
    "rollback-pending": (_rollback_data, _render_rollback),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 error)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # argparse printed usage or help
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    if args.command == "connect-server":
        return connect_server.run(args)
    if args.command in RENAMED_COMMANDS:
        old, args.command = args.command, RENAMED_COMMANDS[args.command]
        print(f"{PROG}: `{PROG} {old}` is deprecated; use `{PROG} {args.command}` (same arguments).",
              file=sys.stderr)
    collect, render = COMMANDS[args.command]
    try:
        _check_as_of(getattr(args, "as_of", None))
        data = collect(LakeTable.open(args.path), args)
    except (LakeError, OSError, json.JSONDecodeError) as err:  # no table, bad --as-of, unreadable metadata
        print(f"{PROG}: {err}", file=sys.stderr)
        return EXIT_ERROR
    text = json.dumps(data, indent=2, default=str) if args.json else render(data)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # e.g. `| head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
