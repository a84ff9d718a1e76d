"""`airflow-lake changes PATH --from N [--to M] [--limit K]`: the rows a table's commits changed after snapshot N up
to snapshot M (default: the latest), read with pyarrow on this machine (`lake.changes.arrow_read`: no Spark; for
small tables — `LakeTable.changes(spark, ...)` reads big ones). It prints, per data-changing commit, its seq,
time, operation and the rows it inserted, deleted and updated, then the first K changed rows with their
`_change_type`; data-free commits (clustering, bucket rewrite, compaction, alter) are listed apart.

--from and --to take what `LakeTable.changes` takes: a log sequence number, an instant id, or a time (ISO-8601,
UTC without a zone, or UNIX seconds with a decimal point: the last snapshot completed at or before it); --from -1
reads the whole snapshot at --to as inserts.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.cli_format import fmt_count, fmt_time, render_table
from airflow_lake.lake.errors import LakeError

if TYPE_CHECKING:  # (the parser is built without the core: `airflow-lake --help` stays light)
    from airflow_lake.lake.table import LakeTable

Data = dict[str, Any]
DEFAULT_ROWS = 20


def _rows_limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def add_changes_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The parser of `changes` (with its path and --json)."""
    sub = commands.add_parser("changes", help="rows inserted, deleted and updated between two snapshots, per commit "
                              "(reads the data files the commits touched, with pyarrow: small tables)")
    sub.add_argument("path", help="table path or URL")
    sub.add_argument("--from", dest="start", required=True, metavar="SEQ|INSTANT|TIMESTAMP",
                     help="the snapshot the changes start after (exclusive): a log sequence number, an instant id, "
                          "or a time (ISO-8601, or UNIX seconds with a decimal point); -1: the whole table as "
                          "inserts")
    sub.add_argument("--to", dest="end", default=None, metavar="SEQ|INSTANT|TIMESTAMP",
                     help="the snapshot they end at (inclusive; default: the latest)")
    sub.add_argument("--limit", type=_rows_limit, default=DEFAULT_ROWS,
                     help=f"show the first N changed rows (default {DEFAULT_ROWS}; 0 = all); the counts cover all")
    sub.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    return sub


def changes_data(table: LakeTable, args: argparse.Namespace) -> Data:
    """The window, its counts per data-changing commit and its first `args.limit` changed rows."""
    import pyarrow as pa

    from airflow_lake.lake.changes.arrow_read import CHANGE_TYPE, COMMIT_SEQ, COMMIT_TIME, changes_arrow, counts_of
    from airflow_lake.lake.changes.window import change_window

    window = change_window(table, args.start, args.end)
    try:
        rows = changes_arrow(table, window)
    except LakeError:
        raise
    except (pa.ArrowException, ValueError) as err:  # a damaged or foreign data file: say which table, not a trace
        raise LakeError(f"the changes of {table.url!r} after {window.start} up to {window.end} cannot be read: "
                        f"{type(err).__name__}: {err}") from err
    counts = counts_of(window, rows)
    by_seq = {c.seq: c for c in window.commits}
    commits = []
    for seq, counted in counts.items():
        commit = by_seq.get(seq)
        commits.append({"seq": seq, "completed_at": commit.completed_at if commit else window.end_completed_at,
                        "operation": commit.operation if commit else None, "initial": commit is None, **counted})
    shown = rows if args.limit == 0 else rows.slice(0, args.limit)
    listed = []
    for row in shown.to_pylist():
        when = row[COMMIT_TIME]
        listed.append({**row, COMMIT_TIME: when.isoformat() if isinstance(when, dt.datetime) else when})
    return {
        "table": table.url,
        "window": {"start": window.start, "end": window.end, "from_empty": window.start < 0,
                   "data_commits": [c.seq for c in window.commits], "skipped": list(window.skipped)},
        "columns": [*window.spec.column_names, CHANGE_TYPE, COMMIT_SEQ, COMMIT_TIME],
        "commits": commits,
        "totals": {key: sum(c[key] for c in commits) for key in ("inserted", "deleted", "updated")},
        "rows_total": rows.num_rows, "rows": listed,
    }


def render_changes(data: Mapping[str, Any]) -> str:
    """Text form: the window, one line per data-changing commit, then the rows shown."""
    window = data["window"]
    since = "the empty table (the whole snapshot as inserts)" if window["from_empty"] else f"seq {window['start']}"
    lines = [f"table {data['table']}: changes after {since} up to seq {window['end']}"]
    if data["commits"]:
        table = [[str(c["seq"]), fmt_time(c["completed_at"]),
                  "(snapshot)" if c["initial"] else str(c["operation"]), fmt_count(c["inserted"]),
                  fmt_count(c["deleted"]), fmt_count(c["updated"])] for c in data["commits"]]
        lines.append(render_table(["SEQ", "COMPLETED (UTC)", "OPERATION", "INSERTED", "DELETED", "UPDATED"], table,
                                  right={0, 3, 4, 5}))
    else:
        lines.append("no data-changing commit in the window")
    if window["skipped"]:
        lines.append(f"data-free (no row changed, no file read): seq {_seqs(window['skipped'])}")
    total, rows = data["rows_total"], data["rows"]
    if not total:
        lines.append("no rows changed")
        return "\n".join(lines)
    lines.append(f"rows: {fmt_count(len(rows))} of {fmt_count(total)} changed row(s)"
                 + (" (--limit 0 shows all)" if len(rows) < total else ""))
    columns = [c for c in data["columns"] if c != "_commit_time"]
    lines.append(render_table(columns, [[_cell(row[c]) for c in columns] for row in rows]))
    return "\n".join(lines)


def _seqs(seqs: list[int], shown: int = 12) -> str:
    more = f" and {len(seqs) - shown} more" if len(seqs) > shown else ""
    return ", ".join(map(str, seqs[:shown])) + more


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)
