"""`airflow-lake`: look at lake tables from a shell — their timeline, live files and spec — and vacuum them.

    airflow-lake timeline /lake/sales [--limit N] [--json]
    airflow-lake files /lake/sales [--as-of X] [--json]
    airflow-lake show /lake/sales [--as-of X] [--json]
    airflow-lake vacuum /lake/sales [--dry-run] [--older-than-hours H] [--json]
    airflow-lake plans /lake/sales [--json]

It works on metadata (the commit log, checkpoints and pending instants), so it needs neither Spark
nor Airflow. Only `vacuum` changes anything: it deletes files no log entry holds. Errors print
`airflow-lake: <message>` on stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from airflow_lake import cli_format as fmt
from airflow_lake.lake import instants
from airflow_lake.lake.buckets.bucketing import file_bucketing
from airflow_lake.lake.clustering.timeline import commits_since, pending_plans
from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.files import DataFile
from airflow_lake.lake.spec import DEFAULT_PROPERTIES
from airflow_lake.lake.table import LakeTable
from airflow_lake.lake.vacuum import vacuum

PROG = "airflow-lake"
EXIT_OK, EXIT_ERROR = 0, 2
DEFAULT_LIMIT = 50
Data = dict[str, Any]


# -- collecting: each command turns a table into one JSON-able dict -----------------------------------
def timeline_data(table: LakeTable, limit: int) -> Data:
    """The last `limit` log entries (0: all) with the instants they rolled back, then pending instants."""
    items = table.timeline(limit=None if limit == 0 else limit)
    return {"table": table.url, "instants": [item.to_dict() for item in items]}


def _summary(files: Sequence[DataFile]) -> Data:
    return {"files": len(files), "rows": sum(f.rows for f in files), "bytes": sum(f.bytes for f in files)}


def _partition_order(key: tuple[tuple[str, str | None], ...], columns: Sequence[str]) -> list[tuple[bool, str]]:
    values = dict(key)
    return [(values.get(c) is None, values.get(c) or "") for c in columns]


def files_data(table: LakeTable, as_of: str | None) -> Data:
    """Live files of a snapshot, and per partition (and bucket) their count, rows and bytes."""
    snap = table.snapshot(as_of)
    bucketed = snap.spec.bucket is not None
    groups = snap.partitions()
    partitions = []
    for key in sorted(groups, key=lambda k: _partition_order(k, snap.spec.partition_columns)):
        files = groups[key]
        buckets: dict[int | None, list[DataFile]] = {}
        for data_file in files:
            buckets.setdefault(data_file.bucket, []).append(data_file)
        partition = dict(key)
        counts = sorted({b.count for f in files if (b := file_bucketing(f, snap.spec)) is not None})
        partitions.append({
            "partition": partition,
            "name": fmt.partition_label(partition, snap.spec.partition_columns),
            # the partition's bucket count(s): [] plain, [8], or several after a change not yet rewritten
            "bucket_counts": counts,
            "plain_files": sum(1 for f in files if f.bucket is None),
            **_summary(files),
            "buckets": [{"bucket": b, **_summary(buckets[b])}
                        for b in sorted(buckets, key=lambda b: -1 if b is None else b)] if bucketed or counts else [],
        })
    return {
        "table": table.url, "seq": snap.seq, "instant": snap.instant, "completed_at": snap.completed_at,
        "bucket_count": snap.spec.bucket.count if snap.spec.bucket else None,
        "totals": {**_summary(snap.files), "partitions": len(partitions)},
        "partitions": partitions,
        "files": [f.to_dict() for f in snap.files],
    }


def show_data(table: LakeTable, as_of: str | None) -> Data:
    """The spec of a snapshot, its totals, and the table's pending instants."""
    snap = table.snapshot(as_of)
    spec = snap.spec
    pending = [i.id for i in table.timeline(limit=1) if i.state in (instants.REQUESTED, instants.INFLIGHT)]
    return {
        "table": table.url, "seq": snap.seq, "instant": snap.instant, "completed_at": snap.completed_at,
        "spec": spec.to_dict(),
        "effective_properties": {**{k: spec.property(k) for k in DEFAULT_PROPERTIES}, **spec.properties},
        "totals": {**_summary(snap.files), "partitions": len(snap.partitions())},
        "pending": pending,
        "pending_count": len(pending),
    }


def plans_data(table: LakeTable) -> Data:
    """Pending clustering plans (with their groups) and the commits since the last clustering."""
    counted = commits_since(table)
    plans = []
    for pending in pending_plans(table):
        item = pending.to_dict()
        if pending.plan is not None:
            item["groups_detail"] = [g.to_dict() for g in pending.plan.groups]
        plans.append(item)
    return {"table": table.url, "commits_since_last_clustering": counted.count,
            "last_clustering": counted.since_instant, "plans": plans}


def vacuum_data(table: LakeTable, older_than_hours: float | None, dry_run: bool) -> Data:
    """Delete (or with `dry_run` only list) the files no log entry holds; what was found and done."""
    result = vacuum(table, older_than_hours, dry_run=dry_run)
    return {"table": table.url, **result.to_dict()}


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
                                                             "and vacuum them.")
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
    vacuum = commands.add_parser("vacuum", help="delete files no log entry holds (orphans)")
    vacuum.add_argument("--dry-run", dest="dry_run", action="store_true",
                        help="only list what would be deleted; change nothing")
    vacuum.add_argument("--older-than-hours", dest="older_than_hours", type=_hours, default=None,
                        help="keep files modified more recently (default: the table property clean.retain.hours)")
    plans = commands.add_parser("plans", help="pending clustering plans and commits since the last clustering")
    for sub in (timeline, files, show, vacuum, plans):
        sub.add_argument("path", help="table path or URL")
        sub.add_argument("--json", action="store_true", help="print JSON instead of a text table")
    return parser


COMMANDS: dict[str, tuple[Callable[[LakeTable, argparse.Namespace], Data], Callable[[Data], str]]] = {
    "timeline": (lambda t, a: timeline_data(t, a.limit), fmt.render_timeline),
    "files": (lambda t, a: files_data(t, a.as_of), fmt.render_files),
    "show": (lambda t, a: show_data(t, a.as_of), fmt.render_show),
    "vacuum": (lambda t, a: vacuum_data(t, a.older_than_hours, a.dry_run), fmt.render_vacuum),
    "plans": (lambda t, a: plans_data(t), fmt.render_plans),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 error)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # argparse printed usage or help
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
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
