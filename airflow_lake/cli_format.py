"""Text formatting for the `airflow-lake` CLI: aligned tables, times, sizes and instant summaries."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

SEPARATOR = "  "
_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def render_table(headers: Sequence[str] | None, rows: Sequence[Sequence[str]],
                 right: Collection[int] = ()) -> str:
    """Align `rows` in columns (those in `right` right-aligned) under optional `headers`."""
    lines = [list(headers)] if headers else []
    lines.extend(list(r) for r in rows)
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(max(map(len, lines)))]
    out = []
    for line in lines:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(line)]
        out.append(SEPARATOR.join(cells).rstrip())
    return "\n".join(out)


def fmt_time(stamp: float | None) -> str:
    """A UNIX time as 'YYYY-MM-DD HH:MM:SS' in UTC, '-' if unknown."""
    if not stamp:
        return "-"
    return dt.datetime.fromtimestamp(stamp, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_bytes(size: int) -> str:
    """A size in bytes, readable: '512 B', '1.5 KiB', '3.2 GiB'."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            break
    return f"{value:.1f} {unit}"


def fmt_count(number: int) -> str:
    """An integer with thousands separators."""
    return f"{number:,}"


def fmt_list(values: Sequence[Any]) -> str:
    """Comma-separated values, '-' if none."""
    return ", ".join(str(v) for v in values) if values else "-"


def instant_summary(instant: Mapping[str, Any]) -> str:
    """A short summary of an instant's metrics (files added/removed, rows added, ...)."""
    metrics = instant.get("metrics") or {}
    state = instant.get("state")
    if state in ("requested", "inflight"):
        return f"started {fmt_time(instant.get('started_at'))}"
    if state == "rolled_back":
        reason = (instant.get("metadata") or {}).get("reason")
        return f"rolled back: {reason}" if reason else "rolled back"
    if "files_added" in metrics or "files_removed" in metrics:
        return (f"files +{metrics.get('files_added', 0)}/-{metrics.get('files_removed', 0)}, "
                f"{rows_change(metrics)}")
    if "rolled_back" in metrics:
        reason = (instant.get("metadata") or {}).get("reason")
        return f"rolled back {fmt_list(metrics['rolled_back'])}" + (f" ({reason})" if reason else "")
    if "orphans_found" in metrics:
        aborted = int(metrics.get("uploads_aborted", 0))
        return (f"removed {metrics.get('files_deleted', 0)} orphan file(s), "
                f"{metrics.get('staging_dirs_deleted', 0)} staging dir(s), "
                f"{fmt_bytes(int(metrics.get('bytes_freed', 0)))} freed"
                + (f", {aborted} incomplete upload(s) aborted" if aborted else ""))
    if "files_deleted" in metrics:
        return f"deleted {metrics['files_deleted']} file(s), {fmt_bytes(int(metrics.get('bytes_freed', 0)))} freed"
    if "columns" in metrics:
        return f"table created, {metrics['columns']} column(s)"
    return ""


def rows_change(metrics: Mapping[str, Any]) -> str:
    """The rows a commit added and removed, and the net: 'rows +26,518/-26,561 (net -43)' for a delete that
    rewrote a file without 43 of its rows ('rows +N' alone when nothing was removed)."""
    added = int(metrics.get("rows_added", 0))
    removed = int(metrics.get("rows_removed") or 0)
    if not removed:  # an append: what it added is the change
        return f"rows +{fmt_count(added)}"
    return f"rows +{fmt_count(added)}/-{fmt_count(removed)} (net {added - removed:+,})"


def fmt_ranges(values: Sequence[int], limit: int = 6) -> str:
    """Whole numbers as compact runs: '1..7', '1, 3, 5..9'; with more than `limit` runs the first and last ones
    around '...' and the count, '-' if none."""
    ordered = sorted(set(values))
    if not ordered:
        return "-"
    runs: list[list[int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    texts = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}..{b}" for a, b in runs]
    if len(texts) > limit:
        keep = limit // 2
        return f"{', '.join(texts[:keep])}, ..., {', '.join(texts[-keep:])} ({len(ordered)} versions)"
    return ", ".join(texts)


def partition_label(partition: Mapping[str, str | None], columns: Sequence[str]) -> str:
    """'dt=2024-01-01/country=NL' (NULL for a null value), '(unpartitioned)' for none."""
    if not partition:
        return "(unpartitioned)"
    order = [c for c in columns if c in partition] + sorted(c for c in partition if c not in columns)
    return "/".join(f"{c}={'NULL' if partition[c] is None else partition[c]}" for c in order)


# -- the commands' text forms ----------------------------------------------------------------------
def render_timeline(data: Mapping[str, Any]) -> str:
    """Text form of `airflow-lake timeline`: one row per instant."""
    items = data["instants"]
    if not items:
        return f"{data['table']}: no instants"
    headers = ["INSTANT", "ACTION", "OPERATION", "STATE", "SEQ", "COMPLETED (UTC)", "VERSIONS", "SUMMARY"]
    rows = [[i["id"], i["action"], i["operation"] or "-", i["state"], "-" if i["seq"] is None else str(i["seq"]),
             fmt_time(i["completed_at"]) if i["state"] in ("completed", "rolled_back") else "-",
             fmt_ranges(i.get("versions") or ()), instant_summary(i)] for i in items]
    return render_table(headers, rows, right={4})


def _snapshot_line(data: Mapping[str, Any]) -> str:
    return (f"table {data['table']}\nsnapshot {data['seq']} (instant {data['instant']}, "
            f"completed {fmt_time(data['completed_at'])} UTC)")


def render_files(data: Mapping[str, Any]) -> str:
    """Text form of `airflow-lake files`: per partition, then per bucket, files / rows / size."""
    head = _snapshot_line(data)
    if not data["partitions"]:
        return f"{head}\nno live files"
    rows = []
    for part in data["partitions"]:
        counts = part.get("bucket_counts") or []
        count_text = "+".join(str(c) for c in counts) + ("+plain" if counts and part.get("plain_files") else "")
        rows.append([part["name"], count_text or "plain", "", fmt_count(part["files"]), fmt_count(part["rows"]),
                     fmt_bytes(part["bytes"])])
        rows.extend(["", "", str(b["bucket"]), fmt_count(b["files"]), fmt_count(b["rows"]), fmt_bytes(b["bytes"])]
                    for b in part["buckets"])
        if part.get("plain"):  # plain files beside bucketed ones in one partition
            plain = part["plain"]
            rows.append(["", "", "plain", fmt_count(plain["files"]), fmt_count(plain["rows"]),
                         fmt_bytes(plain["bytes"])])
    totals = data["totals"]
    rows.append([f"total ({totals['partitions']} partition(s))", "", "", fmt_count(totals["files"]),
                 fmt_count(totals["rows"]), fmt_bytes(totals["bytes"])])
    table = render_table(["PARTITION", "BUCKETS", "BUCKET", "FILES", "ROWS", "SIZE"], rows, right={2, 3, 4, 5})
    return f"{head}\n\n{table}"


def _partition_text(values: Mapping[str, Any]) -> str:
    return "/".join(f"{k}={v}" for k, v in values.items())


def render_show(data: Mapping[str, Any]) -> str:
    """Text form of `airflow-lake show`: spec, snapshot totals, pending instants."""
    spec, totals = data["spec"], data["totals"]
    bucket = spec["bucket"]
    bucket_text = "-" if not bucket else (
        f"{bucket['count']} buckets by {fmt_list(bucket['columns'])}"
        + (f", sorted by {fmt_list(bucket['sort_columns'])}" if bucket["sort_columns"] else "")
        + (f", from {_partition_text(bucket['from_partition'])} on" if bucket.get("from_partition") else "")
        + "".join(f", {c['count']} in {_partition_text(c['partition'])}" for c in bucket.get("partition_counts", ())))
    pending = data["pending"]
    merge = [f"{col}={op}" for col, op in sorted(spec["merge_operators"].items())]
    facts = [
        ["table", data["table"]],
        ["snapshot", f"{data['seq']} (instant {data['instant']}, completed {fmt_time(data['completed_at'])} UTC)"],
        ["partition_by", fmt_list(spec["partition_by"])],
        ["bucket", bucket_text],
        ["primary_key", fmt_list(spec["primary_key"])],
        ["version_column", spec["version_column"] or "-"],
        ["merge_operators", fmt_list(merge)],
        *([["null_values", fmt_list([f"{c}={json.dumps(v, separators=(',', ':'))}"
                                     for c, v in sorted(spec["null_values"].items())])]]
          if spec.get("null_values") else []),
        ["files", fmt_count(totals["files"])],
        ["rows", fmt_count(totals["rows"])],
        ["size", f"{fmt_bytes(totals['bytes'])} ({fmt_count(totals['bytes'])} bytes)"],
        ["partitions", fmt_count(totals["partitions"])],
        ["pending instants", str(data["pending_count"]) + (f" ({fmt_list(pending)})" if pending else "")],
    ]
    columns = [[c["name"], c["type"], "yes" if c["nullable"] else "no"] for c in spec["columns"]]
    explicit = spec["properties"]
    props = [[key, value + ("" if key in explicit else " (default)")]
             for key, value in sorted(data["effective_properties"].items())]
    return "\n\n".join([render_table(None, facts), render_table(["COLUMN", "TYPE", "NULLABLE"], columns),
                        render_table(["PROPERTY", "VALUE"], props)])


def render_remove_orphan_files(data: Mapping[str, Any]) -> str:
    """Text form of `airflow-lake remove-orphan-files`: what was (or in a dry run would be) deleted, a path a line."""
    hours = f"{data['older_than_hours']:g} h"
    uploads = list(data.get("uploads") or ())
    listed = [*data["orphans"], *(f"{d}/" for d in data["staging"]), *(f"{u} (incomplete upload)" for u in uploads)]
    nested = [f"left alone (another lake table lies there): {d}/" for d in data.get("nested_tables") or ()]
    if not listed:
        return "\n".join([f"table {data['table']}", f"no orphans untouched for {hours}", *nested])
    counts = (f"{data['orphans_found']} orphan file(s) and {data['staging_dirs_found']} staging dir(s), "
              f"{fmt_bytes(int(data['bytes']))}")
    aborts = f"{len(uploads)} incomplete upload(s)" if uploads else ""
    if data["dry_run"]:
        head = f"dry run: would delete {counts}" + (f", abort {aborts}" if aborts else "") + f" (untouched for {hours})"
    else:
        head = (f"deleted {counts}" + (f", aborted {aborts}" if aborts else "") + f" (untouched for {hours}); "
                f"recorded as instant {data['instant']}, seq {data['seq']}")
    return "\n".join([f"table {data['table']}", head, *nested, "", *listed])


def render_plans(data: Mapping[str, Any]) -> str:
    """Text form of `airflow-lake plans`: one row per pending clustering plan."""
    head = (f"{data['table']}: {data['commits_since_last_clustering']} commit(s) since the last clustering"
            f" ({data['last_clustering'] or 'none yet'})")
    if not data["plans"]:
        return head + "\nno pending clustering plans"
    headers = ["PLAN", "REQUESTED (UTC)", "GROUPS", "PARTITIONS", "INPUT FILES", "INPUT", "OUTPUT FILES", "LAYOUT",
               "RUNNING"]
    rows = []
    for plan in data["plans"]:
        if plan.get("damaged"):
            rows.append([plan["id"], fmt_time(plan["requested_at"]), "-", "-", "-", "-", "-", "(unreadable)", "-"])
            continue
        rows.append([plan["id"], fmt_time(plan["requested_at"]), str(plan["groups"]), str(plan["partitions"]),
                     str(plan["input_files"]), fmt_bytes(plan["input_bytes"]), str(plan["output_files"]),
                     plan["layout"], ", ".join(plan["attempts"]) or "-"])
    lines = [head, render_table(headers, rows, right={2, 3, 4, 5, 6})]
    for plan in data["plans"]:
        if plan.get("damaged"):
            lines += ["", f"plan {plan['id']} cannot be run: {plan.get('problem')}"]
            continue
        parts = [[p["name"], str(p["groups"]), fmt_count(p["files"]), fmt_bytes(p["bytes"]), fmt_count(p["rows"]),
                  str(p["output_files"])] for p in plan.get("partitions_detail") or ()]
        groups = [[str(n), _partition_text(g["partition"]) or "(unpartitioned)", fmt_count(len(g["files"])),
                   fmt_bytes(g["bytes"]), fmt_count(g["rows"]), str(g["output_files"]),
                   fmt_ranges(g.get("buckets") or ())]
                  for n, g in enumerate(plan.get("groups_detail") or (), start=1)]
        lines += ["", f"plan {plan['id']}: partitions",
                  render_table(["PARTITION", "GROUPS", "FILES", "INPUT", "ROWS", "OUTPUT FILES"], parts,
                               right={1, 2, 3, 4, 5}),
                  "", f"plan {plan['id']}: groups",
                  render_table(["GROUP", "PARTITION", "FILES", "INPUT", "ROWS", "OUTPUT FILES", "BUCKETS"], groups,
                               right={0, 2, 3, 4, 5})]
    return "\n".join(lines)


def rows_text(rows: Mapping[str, Any]) -> str:
    """The rows a reader sees: '1,200', or for a primary-key table '454 keys' (exact) or '<= 720 keys' (an upper
    bound from metadata)."""
    count = fmt_count(int(rows["count"]))
    if rows.get("what") == "keys":
        return f"{count} keys" if rows.get("exact") else f"<= {count} keys"
    return count if rows.get("exact", True) else f"<= {count}"


def health_text(warnings: Sequence[Mapping[str, Any]]) -> str:
    """'ok', or each warning as 'check value > threshold'."""
    if not warnings:
        return "ok"
    return "; ".join(f"{w['check']} {_number(w['value'])} > {_number(w['threshold'])}" for w in warnings)


def _number(value: Any) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".") if isinstance(value, float) else f"{value:,}"


def render_ls(data: Mapping[str, Any]) -> str:
    """Text form of `airflow-lake ls`: one line per table under the root, then its warnings in full."""
    tables = data["tables"]
    if not tables:
        return f"{data['root']}: no lake tables"
    headers = ["TABLE", "KIND", "ROWS", "FILES", "SIZE", "LAST COMMIT (UTC)", "PUBLISHED", "HEALTH"]
    rows, notes = [], []
    for item in tables:
        if item.get("error"):
            rows.append([item["path"], "-", "-", "-", "-", "-", "-", "unreadable"])
            notes.append(f"{item['path']}: {item['error']}")
            continue
        last = item["last_commit"]
        published = item.get("published") or {}
        rows.append([item["path"], item["kind_text"], rows_text(item["rows"]), fmt_count(item["totals"]["files"]),
                     fmt_bytes(item["totals"]["bytes"]),
                     f"{last['seq']} {last['operation']} {fmt_time(last['completed_at'])}",
                     published_text(published), health_text(item["health"])])
        notes += [f"{item['path']}: {w['message']}" for w in item["health"]]
        notes += [f"{item['path']}: {note}" for note in published_notes(published)]
    out = f"{data['root']}\n" + render_table(headers, rows, right={2, 3, 4})
    return out + ("\n\n" + "\n".join(notes) if notes else "")


def published_text(published: Mapping[str, Any]) -> str:
    """Where publishing stands, in a cell: 'delta 41/41' (the newest published Delta version / our head), with the
    files of a primary-key table other engines do not see yet ('delta 41/41, 5 hidden'), 'off' when the table does
    not publish."""
    seq, done = published.get("seq"), published.get("published_seq")
    if done is None:
        return "off" if seq is not None else "-"
    text = f"delta {'-' if done < 0 else done}/{seq}"
    hidden = int(published.get("hidden_files") or 0) - int(published.get("tombstone_files") or 0)
    return text + (f", {fmt_count(hidden)} hidden" if hidden > 0 else "")


def published_notes(published: Mapping[str, Any]) -> list[str]:
    """What other engines do not see yet, in words: commits not published (caught up by the next commit or
    `airflow-lake publish`), a primary-key table's upserts since its last compaction."""
    notes = []
    behind = published.get("unpublished_commits")
    if behind:
        notes.append(f"{fmt_count(int(behind))} commit(s) not published for other engines yet (the next commit or "
                     "`airflow-lake publish` catches up)")
    commits = published.get("hidden_commits")
    if commits:
        files = int(published.get("hidden_files") or 0) - int(published.get("tombstone_files") or 0)
        notes.append(f"{fmt_count(int(commits))} upsert commit(s) ({fmt_count(files)} file(s), "
                     f"{fmt_count(int(published.get('hidden_rows') or 0))} row(s)) not visible to other engines "
                     "until the next compact_upserts")
    return notes
