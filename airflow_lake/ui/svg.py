"""The Lake page's pictures as inline SVG (no script, no CDN): a table's layout — one row per partition, one cell
per bucket (or per file of a plain partition), shaded by bytes — and line charts over its timeline.

Colours come from the page's CSS (classes `cell`, `line`, `dot`, `axis`), so the pictures follow the Airflow UI's
light or dark theme; the attributes are the fallbacks for an SVG opened on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from airflow_lake.cli_format import fmt_bytes

CELL, GAP, LABEL, MAX_ROWS, MAX_CELLS = 14, 2, 170, 60, 128
ACCENT, TEXT = "#1f6fb2", "#1b1f23"
CHART_W, CHART_H, CHART_LEFT, CHART_TOP, CHART_BOTTOM = 340, 150, 64, 30, 22
MAX_DOTS = 200  # above this many commits a chart draws the line only (no hover text per commit)


def layout_svg(data: Mapping[str, Any], title: str) -> str:
    """The files of a snapshot (`data.layout`) as an SVG grid: a row per partition (the newest `MAX_ROWS`)."""
    partitions: Sequence[Mapping[str, Any]] = data["partitions"][-MAX_ROWS:]
    rows: list[tuple[str, list[tuple[int, str]]]] = []
    for part in partitions:
        cells = [(b["bytes"], f"bucket {b['bucket']}: {b['files']} file(s), {b['rows']:,} rows, "
                  f"{fmt_bytes(b['bytes'])}") for b in part["buckets"]]
        cells += [(f["bytes"], f"{f['name']}: {f['rows']:,} rows, {fmt_bytes(f['bytes'])}")
                  for f in part["plain_files"]]
        rows.append((part["name"] or "(unpartitioned)", cells[:MAX_CELLS]))
    biggest = max((b for _, cells in rows for b, _ in cells), default=1) or 1
    width = LABEL + max((len(c) for _, c in rows), default=1) * (CELL + GAP) + 10
    height = 24 + max(1, len(rows)) * (CELL + GAP) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="layout" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
           f'<text class="label" x="0" y="14" font-size="12" font-weight="bold" fill="{TEXT}">{escape(title)}</text>']
    for i, (name, cells) in enumerate(rows):
        y = 24 + i * (CELL + GAP)
        out.append(f'<text class="label" x="0" y="{y + CELL - 3}" font-size="11" fill="{TEXT}">'
                   f'{escape(name[:28])} ({len(cells)})</text>')
        for j, (size, text) in enumerate(cells):
            shade = 0.15 + 0.85 * (size / biggest)
            out.append(f'<rect class="cell" x="{LABEL + j * (CELL + GAP)}" y="{y}" width="{CELL}" height="{CELL}" '
                       f'fill="{ACCENT}" fill-opacity="{shade:.2f}"><title>{escape(text)}</title></rect>')
    if not rows:
        out.append(f'<text class="label" x="0" y="40" font-size="11" fill="{TEXT}">no live files</text>')
    out.append("</svg>")
    return "".join(out)


def chart_svg(points: Sequence[Mapping[str, Any]], key: str, title: str,
              fmt: Callable[[int], str] = lambda n: f"{n:,}") -> str:
    """A line chart of `points[i][key]` after each commit (x: the commits in log order), with the title, the
    latest value and the axis ends written out, and each commit's value in its hover text."""
    values = [int(p[key]) for p in points]
    latest = fmt(values[-1]) if values else "-"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-series="{escape(key)}" width="{CHART_W}" '
           f'height="{CHART_H}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
           f'<text class="label" x="0" y="14" font-size="12" font-weight="bold" fill="{TEXT}">{escape(title)}: '
           f'<tspan class="latest">{escape(latest)}</tspan></text>']
    if not values:
        out.append(f'<text class="label" x="0" y="40" font-size="11" fill="{TEXT}">no commits</text></svg>')
        return "".join(out)
    top, bottom = max(values), min(0, *values)
    span = (top - bottom) or 1
    plot_w, plot_h = CHART_W - CHART_LEFT - 8, CHART_H - CHART_TOP - CHART_BOTTOM
    step = plot_w / max(1, len(values) - 1)

    def xy(i: int, value: int) -> tuple[float, float]:
        x = CHART_LEFT + (i * step if len(values) > 1 else plot_w / 2)
        return x, CHART_TOP + plot_h - (value - bottom) / span * plot_h

    base_y = CHART_TOP + plot_h
    out += [f'<line class="axis" x1="{CHART_LEFT}" y1="{CHART_TOP}" x2="{CHART_LEFT}" y2="{base_y}" '
            f'stroke="{TEXT}" stroke-opacity="0.3"/>',
            f'<line class="axis" x1="{CHART_LEFT}" y1="{base_y}" x2="{CHART_W - 8}" y2="{base_y}" '
            f'stroke="{TEXT}" stroke-opacity="0.3"/>',
            f'<text class="label tick" x="{CHART_LEFT - 4}" y="{CHART_TOP + 4}" font-size="10" text-anchor="end" '
            f'fill="{TEXT}">{escape(fmt(top))}</text>',
            f'<text class="label tick" x="{CHART_LEFT - 4}" y="{base_y}" font-size="10" text-anchor="end" '
            f'fill="{TEXT}">{escape(fmt(bottom))}</text>',
            f'<text class="label tick" x="{CHART_LEFT}" y="{CHART_H - 6}" font-size="10" fill="{TEXT}">'
            f'#{points[0]["seq"]}</text>',
            f'<text class="label tick" x="{CHART_W - 8}" y="{CHART_H - 6}" font-size="10" text-anchor="end" '
            f'fill="{TEXT}">#{points[-1]["seq"]}</text>']
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
    out.append(f'<polyline class="line" points="{line}" fill="none" stroke="{ACCENT}" stroke-width="1.5"/>')
    if len(values) <= MAX_DOTS:
        for i, (point, value) in enumerate(zip(points, values, strict=True)):
            x, y = xy(i, value)
            out.append(f'<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{ACCENT}">'
                       f'<title>#{point["seq"]} {escape(str(point.get("operation", "")))}: {escape(fmt(value))}'
                       "</title></circle>")
    out.append("</svg>")
    return "".join(out)


def bytes_text(size: int) -> str:
    """`fmt_bytes` for chart labels."""
    return fmt_bytes(size)
