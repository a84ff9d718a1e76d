"""The Lake page's HTML, rendered on the server (every value escaped; links relative, so the page works under
any base URL, inside the Airflow UI's frame or on its own)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_lake.cli_format import fmt_bytes, fmt_time, instant_summary
from airflow_lake.ui.data import MAX_TIMELINE_PAGE

STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px; color: #1b1f23; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #6a737d; } .state-completed { color: #22863a; } .state-rolled_back { color: #b31d28; }
.state-inflight, .state-requested { color: #b08800; } details pre { white-space: pre-wrap; font-size: 11px; }
.layouts { display: flex; gap: 24px; flex-wrap: wrap; } h1 { font-size: 20px; } h2 { font-size: 16px; }
"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _link(ref: str, text: str) -> str:
    return f"<a href='table?ref={quote(ref, safe='/')}'>{escape(text)}</a>"


def _bucket_text(bucket: Mapping[str, Any] | None) -> str:
    if not bucket:
        return "plain"
    return f"{bucket.get('count')} on {', '.join(bucket.get('columns', []))}"


def index_page(roots: Sequence[str], tables: Sequence[Mapping[str, Any]], errors: Sequence[str]) -> str:
    """The list of lake tables under the roots."""
    rows = "".join(
        f"<tr data-table='{escape(t['ref'])}'><td>{_link(t['ref'], t['name'])}</td>"
        f"<td class='n rows'>{t['rows']:,}</td><td class='n files'>{t['files']:,}</td>"
        f"<td class='n'>{fmt_bytes(t['bytes'])}</td><td class='n instants'>{t['seq'] + 1:,}</td>"
        f"<td>{fmt_time(t['completed_at'])}</td><td>{escape(', '.join(t['partition_by']) or '-')}</td>"
        f"<td>{escape(_bucket_text(t['bucket']))}</td><td>{escape(', '.join(t['primary_key'] or []) or '-')}</td>"
        f"<td class='n since'>{t['commits_since_last_clustering']}</td>"
        f"<td class='n plans'>{t['pending_plans']}</td></tr>"
        for t in tables)
    roots_text = "".join(f"<li><code>{i}</code> {escape(r)}</li>" for i, r in enumerate(roots)) or \
        "<li>none: set <code>[lake] roots</code> (AIRFLOW__LAKE__ROOTS)</li>"
    problems = "".join(f"<li>{escape(e)}</li>" for e in errors)
    body = (f"<h1>Lake tables</h1><p class='muted'>Roots:</p><ul>{roots_text}</ul>"
            "<table id='tables'><thead><tr><th>Table</th><th>Rows</th><th>Files</th><th>Size</th><th>Instants</th>"
            "<th>Last commit (UTC)</th><th>Partitions</th><th>Buckets</th><th>Key</th>"
            "<th>Commits since clustering</th><th>Pending plans</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>" + (f"<p>Unreadable:</p><ul>{problems}</ul>" if problems else ""))
    return _page("Lake tables", body)


def table_page(detail: Mapping[str, Any], layouts: Sequence[str]) -> str:
    """One table: totals, clustering state, layout pictures, timeline (newest first)."""
    s = detail["summary"]
    plans = detail["plans"]
    plan_rows = "".join(
        f"<tr><td>{escape(p['id'])}</td><td>{fmt_time(p.get('requested_at'))}</td>"
        f"<td>{escape(str(p.get('layout', '')))}</td><td class='n'>{p.get('groups', '')}</td>"
        f"<td class='n'>{p.get('input_files', '')}</td><td class='n'>{p.get('output_files', '')}</td></tr>"
        for p in plans["plans"])
    instants = "".join(_instant_row(i) for i in detail["instants"])
    shown = len(detail["instants"])
    more = ""
    if detail["total_instants"] > detail["limit"]:
        more = f"<p class='muted' id='more'>The newest {shown} of {detail['total_instants']:,} log entries. "
        if detail["limit"] < MAX_TIMELINE_PAGE:
            wider = min(detail["limit"] * 10, MAX_TIMELINE_PAGE)
            more += f"<a href='table?ref={quote(s['ref'], safe='/')}&amp;limit={wider}'>Show more</a></p>"
        else:
            more += (f"A page shows at most {MAX_TIMELINE_PAGE:,}: <code>airflow-lake timeline "
                     f"{escape(s['path'])} --limit 0</code> lists them all.</p>")
    body = (
        "<p><a href='./'>&larr; all tables</a></p>"
        f"<h1 id='table-name'>{escape(s['name'])}</h1><p class='muted'>{escape(s['path'])}</p>"
        "<table id='totals'><tr><th>Rows</th><th>Files</th><th>Size</th><th>Instants</th><th>Buckets</th>"
        "<th>Key</th></tr>"
        f"<tr><td class='n rows'>{s['rows']:,}</td><td class='n files'>{s['files']:,}</td>"
        f"<td class='n'>{fmt_bytes(s['bytes'])}</td><td class='n instants'>{s['seq'] + 1:,}</td>"
        f"<td>{escape(_bucket_text(s['bucket']))}</td><td>{escape(', '.join(s['primary_key'] or []) or '-')}</td>"
        "</tr></table>"
        f"<h2>Clustering</h2><p id='since'>{plans['commits_since_last_clustering']} commit(s) since the last "
        f"clustering ({escape(plans['last_clustering'] or 'never')}); {len(plans['plans'])} pending plan(s).</p>"
        + (f"<table id='plans'><tr><th>Plan</th><th>Requested</th><th>Layout</th><th>Groups</th><th>Input files</th>"
           f"<th>Output files</th></tr>{plan_rows}</table>" if plan_rows else "")
        + f"<h2>Layout</h2><div class='layouts'>{''.join(layouts)}</div>"
        "<h2>Timeline</h2><table id='timeline'><thead><tr><th>Seq</th><th>Instant</th><th>Action</th>"
        "<th>Operation</th><th>State</th><th>Completed (UTC)</th><th>Versions</th><th>Summary</th><th>Metrics</th>"
        f"</tr></thead><tbody>{instants}</tbody></table>{more}")
    return _page(f"Lake: {s['name']}", body)


def _instant_row(item: Mapping[str, Any]) -> str:
    metrics = item.get("metrics") or {}
    detail = escape(json.dumps(metrics, indent=1, sort_keys=True, default=str)) if metrics else ""
    return (f"<tr class='instant'><td class='n'>{'' if item.get('seq') is None else item['seq']}</td>"
            f"<td>{escape(item['id'])}</td><td>{escape(item['action'])}</td><td>{escape(item['operation'])}</td>"
            f"<td class='state-{escape(item['state'])}'>{escape(item['state'])}</td>"
            f"<td>{fmt_time(item.get('completed_at'))}</td><td class='versions'>{escape(versions_text(item))}</td>"
            f"<td>{escape(instant_summary(item))}</td>"
            f"<td>{f'<details><summary>metrics</summary><pre>{detail}</pre></details>' if detail else ''}</td></tr>")


def versions_text(item: Mapping[str, Any]) -> str:
    """An upsert's versions, "3, 4": the log entry's metadata lists them; its metrics list them too from
    this release on, while entries written before hold only their count there ("versions": 2)."""
    metadata, metrics = item.get("metadata") or {}, item.get("metrics") or {}
    for listed in (metadata.get("versions"), metrics.get("versions")):
        if isinstance(listed, list | tuple):
            return ", ".join(map(str, listed))
    count = metrics.get("version_count", metrics.get("versions"))
    if isinstance(count, int) and not isinstance(count, bool):
        return f"{count} version(s)"
    return ""


def error_page(name: str, message: str) -> str:
    """The page of a table that cannot be shown, saying which and why."""
    body = ("<p><a href='./'>&larr; all tables</a></p>"
            f"<h1 id='table-name'>{escape(name)}</h1><p id='error' class='state-rolled_back'>{escape(message)}</p>")
    return _page(f"Lake: {name} cannot be read", body)
