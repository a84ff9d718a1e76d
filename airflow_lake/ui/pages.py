"""The Lake page's HTML, rendered on the server.

Every value from a table or a URL is escaped (`escape` for text and attributes, `quote` for URL parts). Links
are relative, so the page works under any base URL: shown inside the Airflow UI (an external view in its
navigation, in a frame), or on its own. Inside the UI it takes the UI's colours, fonts and light/dark mode from
the frame's parent, and follows a switch; on its own it follows the browser's colour scheme.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_lake.cli_format import fmt_bytes, fmt_time, instant_summary
from airflow_lake.ui.data import MAX_PARTITION_ROWS, MAX_TIMELINE_PAGE, task_of
from airflow_lake.ui.svg import bytes_text, chart_svg

# The UI's semantic tokens (Chakra UI, which the Airflow 3 UI is built with) that the page takes over.
UI_TOKENS = {
    "--lake-fg": "--chakra-colors-fg", "--lake-muted": "--chakra-colors-fg-muted",
    "--lake-bg": "--chakra-colors-bg", "--lake-subtle": "--chakra-colors-bg-muted",
    "--lake-border": "--chakra-colors-border", "--lake-accent": "--chakra-colors-blue-solid",
    "--lake-link": "--chakra-colors-fg-info", "--lake-ok": "--chakra-colors-fg-success",
    "--lake-error": "--chakra-colors-fg-error", "--lake-warn": "--chakra-colors-fg-warning",
    "--lake-font": "--chakra-fonts-body", "--lake-mono": "--chakra-fonts-mono",
}

STYLE = """
:root { --lake-fg: #1b1f23; --lake-muted: #6a737d; --lake-bg: #ffffff; --lake-subtle: #f3f5f7;
  --lake-border: #dde1e5; --lake-accent: #1f6fb2; --lake-link: #1f6fb2; --lake-ok: #22863a; --lake-error: #b31d28;
  --lake-warn: #9a6700; --lake-font: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  --lake-mono: ui-monospace, SFMono-Regular, Menlo, monospace; color-scheme: light; }
@media (prefers-color-scheme: dark) { :root:not(.lake-light) { --lake-fg: #e4e4e7; --lake-muted: #a1a1aa;
  --lake-bg: #111111; --lake-subtle: #1f1f23; --lake-border: #3f3f46; --lake-accent: #4d9de0; --lake-link: #7cb7ea;
  --lake-ok: #56d364; --lake-error: #f47067; --lake-warn: #e3b341; color-scheme: dark; } }
body { font-family: var(--lake-font); margin: 0; padding: 12px 16px; color: var(--lake-fg);
  background: var(--lake-bg); font-size: 14px; }
a { color: var(--lake-link); } code, pre { font-family: var(--lake-mono); }
h1 { font-size: 20px; margin: 4px 0; } h2 { font-size: 16px; margin: 20px 0 6px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--lake-border); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--lake-subtle); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: var(--lake-muted); } .state-completed { color: var(--lake-ok); }
.state-rolled_back, .error { color: var(--lake-error); } .state-inflight, .state-requested { color: var(--lake-warn); }
details pre { white-space: pre-wrap; font-size: 11px; } nav.sections a { margin-right: 12px; }
.kind { display: inline-block; border: 1px solid var(--lake-border); border-radius: 10px; padding: 0 8px;
  font-size: 12px; color: var(--lake-muted); }
.warning { border-left: 3px solid var(--lake-warn); padding: 4px 8px; margin: 4px 0; background: var(--lake-subtle); }
.ok { color: var(--lake-ok); }
.layouts, .charts { display: flex; gap: 24px; flex-wrap: wrap; }
svg .label { fill: var(--lake-fg); } svg .axis { stroke: var(--lake-muted); }
svg .cell, svg .dot { fill: var(--lake-accent); } svg .line { stroke: var(--lake-accent); }
"""

# Inside the Airflow UI the page is a same-origin frame: take the UI's tokens from the parent and follow its
# light/dark switch (the UI sets class "dark" or "light" on its root). Links to the UI's own pages (a commit's
# task instance) must open in the UI, not in the frame, and the frame may not navigate its parent: they go
# through the UI's router (history entry + popstate), the way its own links do.
SCRIPT = """
(function () {
  var tokens = TOKENS, root = document.documentElement, host = null;
  try { if (window.parent !== window) { host = window.parent.document.documentElement; } } catch (e) { host = null; }
  function follow() {
    var style = window.parent.getComputedStyle(host), dark = host.classList.contains("dark");
    root.classList.toggle("lake-dark", dark); root.classList.toggle("lake-light", !dark);
    root.style.colorScheme = dark ? "dark" : "light";
    Object.keys(tokens).forEach(function (mine) {
      var value = style.getPropertyValue(tokens[mine]).trim();
      if (value) { root.style.setProperty(mine, value); } else { root.style.removeProperty(mine); }
    });
    root.setAttribute("data-ui-theme", dark ? "dark" : "light");
  }
  if (host) {
    follow();
    new MutationObserver(follow).observe(host, {attributes: true, attributeFilter: ["class", "style"]});
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a[data-ui-link]") : null;
    if (!link || !host || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) { return; }
    event.preventDefault();
    var ui = window.parent, state = ui.history.state || {};
    ui.history.pushState({usr: null, key: Math.random().toString(36).slice(2, 10),
                          idx: (typeof state.idx === "number" ? state.idx : 0) + 1}, "", link.href);
    ui.dispatchEvent(new PopStateEvent("popstate", {state: ui.history.state}));
  });
})();
""".replace("TOKENS", json.dumps(UI_TOKENS))


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<meta name='color-scheme' content='light dark'><style>{STYLE}</style>"
            f"<script>{SCRIPT}</script></head><body>{body}</body></html>")


def _link(ref: str, text: str) -> str:
    return f"<a href='table?ref={quote(ref, safe='/')}'>{escape(text)}</a>"


def _n(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else escape(str(value))


def _plain(value: Any) -> str:
    """A value as it is written: versions (yyyymmdd, epoch millis), ids and seqs are names, not amounts, so they
    get no thousands separators ("20240301", never "20,240,301")."""
    return "-" if value is None else escape(str(value))


def _rows_cell(t: Mapping[str, Any]) -> str:
    """Rows; for a primary-key table its merged keys ("≤" when only an upper bound is known) over the stored rows."""
    visible = t.get("visible_rows") or {}
    if visible.get("what") != "keys":
        return f"<td class='n rows'>{t['rows']:,}</td>"
    bound = "" if visible.get("exact") else "≤ "
    return (f"<td class='n keys'>{bound}{_n(visible.get('count'))} keys"
            f"<div class='muted'><span class='rows'>{t['rows']:,}</span> stored rows</div></td>")


def layout_text(layout: Mapping[str, Any]) -> str:
    """How the partitions are laid out: '4 on k (2 partitions); plain (1 partition)'."""
    parts = []
    for group in layout.get("bucketed") or []:
        parts.append(f"{group['count']} on {', '.join(group['columns'])} ({_partitions_text(group)})")
    plain = layout.get("plain")
    if plain is not None:
        parts.append(f"plain ({_partitions_text(plain)})" if parts else "plain")
    return "; ".join(parts) or "plain"


def _partitions_text(group: Mapping[str, Any]) -> str:
    count = group["partitions"]
    if count == 1:
        return f"{group['first']}" if group["first"] != "(unpartitioned)" else "1 partition"
    return f"{count} partitions, {group['first']} to {group['last']}"


def _health_text(warnings: Sequence[Mapping[str, Any]]) -> str:
    if not warnings:
        return "<span class='ok'>ok</span>"
    return "<br>".join(f"<span class='warn' title='{escape(str(w.get('message', '')))}'>"
                       f"{escape(str(w.get('check', '')))} {escape(_number(w.get('value')))} &gt; "
                       f"{escape(_number(w.get('threshold')))}</span>" for w in warnings)


def _since(t: Mapping[str, Any]) -> str:
    since = t.get("commits_since_last_clustering")
    return "-" if since is None else f"{since:,}"


def index_page(roots: Sequence[str], tables: Sequence[Mapping[str, Any]], errors: Sequence[str]) -> str:
    """The list of lake tables under the roots."""
    rows = "".join(
        f"<tr data-table='{escape(t['ref'])}'><td>{_link(t['ref'], t['name'])}</td>"
        f"<td class='kind-text'>{escape(t['kind_text'])}</td>{_rows_cell(t)}"
        f"<td class='n files'>{t['files']:,}</td><td class='n'>{fmt_bytes(t['bytes'])}</td>"
        f"<td class='n instants'>{t['seq'] + 1:,}</td><td>{fmt_time(t['completed_at'])}</td>"
        f"<td>{escape(', '.join(t['partition_by']) or '-')}</td><td>{escape(layout_text(t['layout']))}</td>"
        f"<td>{escape(', '.join(t['primary_key'] or []) or '-')}</td>"
        f"<td class='n since'>{_since(t)}</td><td class='n plans'>{t['pending_plans']}</td>"
        f"{_published_cell(t.get('published') or {})}"
        f"<td class='health'>{_health_text(t['health'])}</td></tr>"
        for t in tables)
    roots_text = "".join(f"<li><code>{i}</code> {escape(r)}</li>" for i, r in enumerate(roots)) or \
        "<li>none: set <code>[lake] roots</code> (AIRFLOW__LAKE__ROOTS)</li>"
    problems = "".join(f"<li>{escape(e)}</li>" for e in errors)
    body = (f"<h1>Lake tables</h1><p class='muted'>Roots:</p><ul>{roots_text}</ul>"
            "<table id='tables'><thead><tr><th>Table</th><th>Kind</th><th class='n'>Rows</th><th class='n'>Files</th>"
            "<th class='n'>Size</th><th class='n'>Instants</th><th>Last commit (UTC)</th><th>Partitions</th>"
            "<th>Buckets</th><th>Key</th><th class='n'>Commits since clustering</th><th class='n'>Pending plans</th>"
            "<th title='The newest Delta Lake version other engines read, against our log'>Published</th>"
            "<th>Health</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>" + (f"<p>Unreadable:</p><ul>{problems}</ul>" if problems else ""))
    return _page("Lake tables", body)


def table_page(detail: Mapping[str, Any], layouts: Sequence[str]) -> str:
    """One table: facts, health, schema, primary-key state, partitions, clustering and plans, charts, layout
    pictures, timeline (newest first)."""
    s = detail["summary"]
    sections = [("health", "Health"), ("schema", "Schema"), ("partitions-section", "Partitions"),
                *([("clustering", "Clustering")] if _has_clustering(detail["plans"]) else []),
                ("charts", "Charts"), ("layout", "Layout"), ("timeline-section", "Timeline")]
    if s.get("primary_key"):
        sections.insert(2, ("primary-key", "Primary key"))
    nav = "".join(f"<a href='#{anchor}'>{text}</a>" for anchor, text in sections)
    body = (
        "<p><a href='./'>&larr; all tables</a></p>"
        f"<h1 id='table-name'>{escape(s['name'])}</h1>"
        f"<p><span class='kind' id='kind'>{escape(s['kind_text'])}</span> "
        f"<span class='muted'>{escape(s['path'])}</span></p>"
        f"<nav class='sections'>{nav}</nav>"
        + _facts(s) + _health(detail["health"]) + _schema(detail["schema"])
        + (_primary_key(s.get("primary_key_state") or {}) if s.get("primary_key") else "")
        + _partitions(detail["partitions"])
        + (_clustering(detail["plans"]) if _has_clustering(detail["plans"]) else "")
        + _charts(detail["charts"])
        + f"<h2 id='layout'>Layout</h2><div class='layouts'>{''.join(layouts)}</div>"
        + _timeline(detail))
    return _page(f"Lake: {s['name']}", body)


def _facts(s: Mapping[str, Any]) -> str:
    return ("<table id='totals'><tr><th class='n'>Rows</th><th class='n'>Files</th><th class='n'>Size</th>"
            "<th class='n'>Partitions</th><th class='n'>Instants</th><th>Last commit (UTC)</th><th>Buckets</th>"
            "<th>Key</th><th>Published for other engines</th></tr>"
            f"<tr>{_rows_cell(s)}<td class='n files'>{s['files']:,}</td>"
            f"<td class='n bytes'>{fmt_bytes(s['bytes'])}</td>"
            f"<td class='n partitions'>{s['partitions']:,}</td><td class='n instants'>{s['seq'] + 1:,}</td>"
            f"{_last_commit_cell(s.get('last_commit') or {})}"
            f"<td class='buckets'>{escape(layout_text(s['layout']))}</td>"
            f"<td>{escape(', '.join(s['primary_key'] or []) or '-')}</td>"
            f"{_published_cell(s.get('published') or {})}</tr></table>")


def _published_cell(published: Mapping[str, Any]) -> str:
    """Where publishing stands: the newest published Delta version against our head, the commits not published
    yet, and for a primary-key table the upserts other engines see only after the next compaction."""
    seq, done = published.get("seq"), published.get("published_seq")
    if done is None:
        text = "off <span class='muted'>(publish.delta is false)</span>" if seq is not None else "-"
        return f"<td class='published' data-published-seq=''>{text}</td>"
    behind = int(published.get("unpublished_commits") or 0)
    head = (f"Delta <span class='published-seq'>{_plain(done if done >= 0 else None)}</span> / "
            f"<span class='head-seq'>{_plain(seq)}</span>")
    lines = [f"<div class='unpublished warn'>{_n(behind)} commit(s) not published yet</div>" if behind else ""]
    commits = published.get("hidden_commits")
    if commits is not None:
        files = int(published.get("hidden_files") or 0) - int(published.get("tombstone_files") or 0)
        lines.append(f"<div class='hidden muted' data-hidden-commits='{int(commits)}' data-hidden-files='{files}'>"
                     + (f"{_n(int(commits))} upsert commit(s), {_n(files)} file(s) not visible elsewhere until "
                        "the next compaction" if commits else "all upserts compacted: visible elsewhere")
                     + "</div>")
    return f"<td class='published' data-published-seq='{_plain(done)}'>{head}{''.join(lines)}</td>"


def _last_commit_cell(last: Mapping[str, Any]) -> str:
    """The table's newest log entry: when, what, and the task that made it (linked) if it was a task."""
    task = task_of({"airflow": last.get("airflow")})
    made_by = (f"<div>by <a class='task-link last' data-ui-link href='{escape(task_link(task))}' target='_top'>"
               f"{escape(task['dag_id'])} &rsaquo; {escape(task['task_id'])}</a></div>" if task else "")
    return (f"<td class='last-commit'>{fmt_time(last.get('completed_at'))} "
            f"<span class='muted'>#{_plain(last.get('seq'))} "
            f"{escape(str(last.get('operation') or ''))}</span>{made_by}</td>")


def _health(warnings: Sequence[Mapping[str, Any]]) -> str:
    if not warnings:
        return "<h2 id='health'>Health</h2><p id='health-ok' class='ok'>No warnings.</p>"
    items = "".join(
        f"<div class='warning' data-check='{escape(str(w.get('check', '')))}'><strong>{escape(str(w.get('check', '')))}"
        f"</strong>: {escape(str(w.get('message', '')))} <span class='muted'>(value <span class='value'>"
        f"{escape(_number(w.get('value')))}</span>, threshold <span class='threshold'>"
        f"{escape(_number(w.get('threshold')))}</span>)</span></div>"
        for w in warnings)
    return f"<h2 id='health'>Health</h2><div id='warnings'>{items}</div>"


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _schema(columns: Sequence[Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr class='column' data-column='{escape(c['name'])}'><td class='name'>{escape(c['name'])}</td>"
        f"<td class='type'>{escape(c['type'])}</td><td class='nullable'>{'yes' if c['nullable'] else 'no'}</td>"
        f"<td class='roles'>{escape(', '.join(c['roles']))}</td>"
        f"<td class='physical'>{escape(c['physical'] or '')}</td></tr>"
        for c in columns)
    return ("<h2 id='schema'>Schema</h2><table id='schema-table'><thead><tr><th>Column</th><th>Type</th>"
            "<th>Nullable</th><th>Role</th><th>Name in the files (renamed)</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _primary_key(state: Mapping[str, Any]) -> str:
    versions = state.get("versions") or {}
    deltas = state.get("pending_deltas") or []
    delta_rows = "".join(
        f"<tr class='delta' data-partition='{escape(str(d.get('name') or ''))}' "
        f"data-bucket='{_plain(d.get('bucket'))}'>"
        f"<td>{escape(str(d.get('name') or ''))}</td><td class='n bucket'>{_plain(d.get('bucket'))}</td>"
        f"<td class='n files'>{_n(d.get('files'))}</td><td class='n rows'>{_n(d.get('rows'))}</td></tr>"
        for d in deltas)
    exact = "exact" if state.get("keys_exact") else "at most: deltas may repeat or delete keys"
    return (
        "<h2 id='primary-key'>Primary key</h2><table id='pk'><tr><th class='n'>Keys (merged)</th>"
        "<th class='n'>Stored rows</th><th class='n'>Base files</th><th class='n'>Delta files</th>"
        "<th class='n'>Versions applied</th><th class='n'>Lowest</th><th class='n'>Highest</th></tr>"
        f"<tr><td class='n keys'>{'' if state.get('keys_exact') else '≤ '}{_n(state.get('keys'))} "
        f"<span class='muted'>({escape(exact)})</span></td><td class='n stored'>{_n(state.get('stored_rows'))}</td>"
        f"<td class='n base-files'>{_n(state.get('base_files'))}</td>"
        f"<td class='n delta-files'>{_n(state.get('delta_files'))}</td>"
        f"<td class='n versions'>{_n(versions.get('count'))}</td>"
        f"<td class='n lowest'>{_plain(versions.get('min'))}</td>"
        f"<td class='n highest'>{_plain(versions.get('max'))}</td></tr></table>"
        + (("<p>Pending deltas (written by upserts, not compacted yet), per bucket:</p><table id='deltas'><thead><tr>"
            "<th>Partition</th><th class='n'>Bucket</th><th class='n'>Delta files</th><th class='n'>Delta rows</th>"
            f"</tr></thead><tbody>{delta_rows}</tbody></table>")
           if delta_rows else "<p id='deltas-none' class='muted'>No pending deltas.</p>"))


def _partitions(partitions: Sequence[Mapping[str, Any]]) -> str:
    shown = partitions[-MAX_PARTITION_ROWS:]
    rows = "".join(_partition_row(p) for p in shown)
    more = (f"<p class='muted'>The newest {len(shown):,} of {len(partitions):,} partitions "
            "(all of them: <code>/lake/api/table</code>).</p>" if len(shown) < len(partitions) else "")
    if not partitions:
        return "<h2 id='partitions-section'>Partitions</h2><p id='partitions-none' class='muted'>No live files.</p>"
    return ("<h2 id='partitions-section'>Partitions</h2><table id='partitions'><thead><tr><th>Partition</th>"
            "<th class='n'>Files</th><th class='n'>Rows</th><th class='n'>Size</th><th>Buckets</th>"
            "<th class='n'>Smallest file</th><th class='n'>Largest file</th><th>Last commit</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{more}")


def _partition_row(p: Mapping[str, Any]) -> str:
    counts = p["bucket_counts"]
    if counts:
        buckets = f"{' and '.join(map(str, counts))} ({p['buckets_with_files']} with files)"
        if p["plain_files"]:
            buckets += f" + {p['plain_files']} plain file(s)"
    else:
        buckets = "plain"
    last = p["last_commit"]
    commit = f"#{last['seq']}" if last.get("seq") is not None else "-"
    when = fmt_time(last["completed_at"]) if last.get("completed_at") else (last.get("instant") or "")
    return (f"<tr class='partition' data-partition='{escape(p['name'])}'><td class='name'>{escape(p['name'])}</td>"
            f"<td class='n files'>{p['files']:,}</td><td class='n rows'>{p['rows']:,}</td>"
            f"<td class='n bytes' data-bytes='{p['bytes']}'>{fmt_bytes(p['bytes'])}</td>"
            f"<td class='buckets'>{escape(buckets)}</td>"
            f"<td class='n smallest' data-bytes='{p['smallest_bytes']}'>{fmt_bytes(p['smallest_bytes'])}</td>"
            f"<td class='n largest' data-bytes='{p['largest_bytes']}'>{fmt_bytes(p['largest_bytes'])}</td>"
            f"<td class='last-commit'><span class='seq'>{escape(commit)}</span> "
            f"<span class='muted'>{escape(last.get('operation') or '')} {escape(when)}</span></td></tr>")


def _has_clustering(plans: Mapping[str, Any]) -> bool:
    return bool(plans.get("clustered") or plans.get("plans"))


def _clustering(plans: Mapping[str, Any]) -> str:
    since = plans["commits_since_last_clustering"]
    last = plans["last_clustering"]
    text = (f"{since} commit(s) since the last clustering ({escape(last)})" if last else
            f"{since} commit(s) since the table's start (never clustered)")
    rows = "".join(_plan_rows(p) for p in plans["plans"])
    table = ("<table id='plans'><thead><tr><th>Plan</th><th>Requested (UTC)</th><th>Layout</th>"
             "<th>Partitions</th><th class='n'>Groups</th><th class='n'>Input files</th><th class='n'>Input size</th>"
             f"<th class='n'>Output files</th></tr></thead><tbody>{rows}</tbody></table>" if rows else "")
    return (f"<h2 id='clustering'>Clustering</h2><p id='since'>{text}; {len(plans['plans'])} pending plan(s).</p>"
            + table)


def _plan_rows(p: Mapping[str, Any]) -> str:
    if p.get("damaged"):
        return (f"<tr class='plan' data-plan='{escape(p['id'])}'><td>{escape(p['id'])}</td>"
                f"<td>{fmt_time(p.get('requested_at'))}</td><td colspan='6' class='error'>cannot be run: "
                f"{escape(str(p.get('problem')))}</td></tr>")
    groups = "".join(
        f"<tr class='group'><td>{escape(g['partition_name'])}</td><td class='n files'>{g['files']:,}</td>"
        f"<td class='n rows'>{g['rows']:,}</td><td class='n'>{fmt_bytes(g['bytes'])}</td>"
        f"<td class='n'>{g['output_files']:,}</td>"
        f"<td>{escape(', '.join(map(str, g['buckets'])) or '-')}</td></tr>"
        for g in p["groups_detail"])
    detail = ("<table class='groups'><thead><tr><th>Group's partition</th><th class='n'>Files</th>"
              "<th class='n'>Rows</th><th class='n'>Size</th><th class='n'>Output files</th><th>Buckets</th></tr>"
              f"</thead><tbody>{groups}</tbody></table>")
    return (f"<tr class='plan' data-plan='{escape(p['id'])}'><td>{escape(p['id'])}</td>"
            f"<td>{fmt_time(p.get('requested_at'))}</td><td>{escape(str(p.get('layout', '')))}</td>"
            f"<td class='plan-partitions'>{escape(', '.join(p['partitions']))}</td>"
            f"<td class='n groups'>{p.get('groups', '')}</td><td class='n'>{p.get('input_files', '')}</td>"
            f"<td class='n'>{fmt_bytes(int(p.get('input_bytes') or 0))}</td>"
            f"<td class='n'>{p.get('output_files', '')}</td></tr>"
            f"<tr class='plan-groups' data-plan='{escape(p['id'])}'><td></td><td colspan='7'>{detail}</td></tr>")


def _charts(charts: Mapping[str, Any]) -> str:
    points = charts["points"]
    note = "" if charts["complete"] else " (earlier commits removed files the page cannot size: not drawn)"
    small = fmt_bytes(int(charts["small_file_bytes"]))
    pictures = [chart_svg(points, "files", "Live files"), chart_svg(points, "bytes", "Size", bytes_text),
                chart_svg(points, "rows", "Stored rows"),
                chart_svg(points, "small_files", f"Small files (< {small})")]
    span = f"commits #{points[0]['seq']} to #{points[-1]['seq']}" if points else "no commits"
    return (f"<h2 id='charts'>Charts</h2><p class='muted'>After each commit, {escape(span)}{escape(note)}.</p>"
            f"<div class='charts'>{''.join(pictures)}</div>")


def _timeline(detail: Mapping[str, Any]) -> str:
    s = detail["summary"]
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
    return ("<h2 id='timeline-section'>Timeline</h2><table id='timeline'><thead><tr><th>Seq</th><th>Instant</th>"
            "<th>Action</th><th>Operation</th><th>State</th><th>Completed (UTC)</th><th>Versions</th>"
            "<th class='n' title='Rows the commit inserted (+), deleted (&minus;) and updated (~; keys of a "
            "primary-key table), read from the files it touched; — for a commit that changes no row'>Rows changed</th>"
            "<th>Made by (DAG run, task)</th><th>Summary</th><th>Metrics</th>"
            f"</tr></thead><tbody>{instants}</tbody></table>{more}")


def task_link(task: Mapping[str, Any]) -> str:
    """The Airflow UI's page of a task instance, relative to the Lake app (mounted at <base>/lake/):
    ../dags/<dag>/runs/<run>/tasks/<task>[/mapped/<map index>], each part URL-encoded."""
    parts = [quote(str(task[k]), safe="") for k in ("dag_id", "run_id", "task_id")]
    link = f"../dags/{parts[0]}/runs/{parts[1]}/tasks/{parts[2]}"
    map_index = task.get("map_index")
    if isinstance(map_index, int) and map_index >= 0:
        link += f"/mapped/{map_index}"
    return link


def _task_cell(item: Mapping[str, Any]) -> str:
    task = task_of(item.get("metadata") or {})
    if task is None:
        return "<td class='task'></td>"
    mapped = f" [{task['map_index']}]" if isinstance(task["map_index"], int) and task["map_index"] >= 0 else ""
    tried = f", try {task['try_number']}" if task["try_number"] is not None else ""
    return (f"<td class='task'><a class='task-link' data-ui-link href='{escape(task_link(task))}' target='_top' "
            f"title='{escape(task['run_id'])}'>{escape(task['dag_id'])} &rsaquo; {escape(task['task_id'])}"
            f"{escape(mapped)}</a><div class='muted'>{escape(task['run_id'])}{escape(tried)}</div></td>")


def _instant_row(item: Mapping[str, Any]) -> str:
    metrics = item.get("metrics") or {}
    detail = escape(json.dumps(metrics, indent=1, sort_keys=True, default=str)) if metrics else ""
    anchor = f" id='seq-{item['seq']}'" if item.get("seq") is not None and item.get("state") == "completed" else ""
    return (f"<tr class='instant'{anchor}><td class='n'>{'' if item.get('seq') is None else item['seq']}</td>"
            f"<td>{escape(item['id'])}</td><td>{escape(item['action'])}</td><td>{escape(item['operation'])}</td>"
            f"<td class='state-{escape(item['state'])}'>{escape(item['state'])}</td>"
            f"<td>{fmt_time(item.get('completed_at'))}</td><td class='versions'>{escape(versions_text(item))}</td>"
            f"{_changes_cell(item.get('changes'))}{_task_cell(item)}<td>{escape(instant_summary(item))}</td>"
            f"<td>{f'<details><summary>metrics</summary><pre>{detail}</pre></details>' if detail else ''}</td></tr>")


def _changes_cell(changes: Mapping[str, Any] | None) -> str:
    """A commit's change counts: '+3 -1 ~0' (a true minus sign), '—' for a commit that changes no row, 'n/a' (why,
    in its title) for one not counted; empty for what is no commit (a pending or rolled-back instant, the create)."""
    if changes is None:
        return "<td class='n changes'></td>"
    state = changes.get("state")
    if state == "data_free":
        return "<td class='n changes' data-state='data_free' title='changes no row'>—</td>"
    if state != "counted":
        return (f"<td class='n changes muted' data-state='not_counted' title='{escape(str(changes.get('reason')))}'>"
                "n/a</td>")
    counts = {k: int(changes.get(k) or 0) for k in ("inserted", "deleted", "updated")}
    data = " ".join(f"data-{k}='{v}'" for k, v in counts.items())
    return (f"<td class='n changes' data-state='counted' {data} title='{counts['inserted']:,} inserted, "
            f"{counts['deleted']:,} deleted, {counts['updated']:,} updated'>+{counts['inserted']:,} "
            f"&minus;{counts['deleted']:,} ~{counts['updated']:,}</td>")


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
