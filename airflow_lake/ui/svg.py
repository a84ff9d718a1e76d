"""Pictures of a table's layout as SVG: one row per partition, one cell per bucket (or per file of a plain
partition), the cell's shade by its bytes; hover text gives files, rows and bytes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from airflow_lake.cli_format import fmt_bytes

CELL, GAP, LABEL, MAX_ROWS, MAX_CELLS = 14, 2, 170, 60, 128


def layout_svg(data: Mapping[str, Any], title: str) -> str:
    """The files of a snapshot (`reports.files_data`) as an SVG grid."""
    partitions: Sequence[Mapping[str, Any]] = data["partitions"][-MAX_ROWS:]  # the newest partitions
    files_by_partition: dict[str, list[Mapping[str, Any]]] = {}
    for f in data.get("files", []):
        files_by_partition.setdefault(_key(f.get("partition") or {}), []).append(f)
    rows: list[tuple[str, list[tuple[int, str]]]] = []
    for part in partitions:
        if part.get("buckets"):
            cells = [(b["bytes"], f"bucket {b['bucket']}: {b['files']} file(s), {b['rows']} rows, "
                      f"{fmt_bytes(b['bytes'])}") for b in part["buckets"]]
        else:
            files = sorted(files_by_partition.get(_key(part["partition"]), []), key=lambda f: -f["bytes"])
            cells = [(f["bytes"], f"{f['path'].rsplit('/', 1)[-1]}: {f['rows']} rows, {fmt_bytes(f['bytes'])}")
                     for f in files]
        rows.append((part["name"] or "(unpartitioned)", cells[:MAX_CELLS]))
    biggest = max((b for _, cells in rows for b, _ in cells), default=1) or 1
    width = LABEL + max((len(c) for _, c in rows), default=1) * (CELL + GAP) + 10
    height = 24 + max(1, len(rows)) * (CELL + GAP) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="layout" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
           f'<text x="0" y="14" font-size="12" font-weight="bold">{escape(title)}</text>']
    for i, (name, cells) in enumerate(rows):
        y = 24 + i * (CELL + GAP)
        out.append(f'<text x="0" y="{y + CELL - 3}" font-size="11">{escape(name[:28])} ({len(cells)})</text>')
        for j, (size, text) in enumerate(cells):
            shade = 0.15 + 0.85 * (size / biggest)
            out.append(f'<rect class="cell" x="{LABEL + j * (CELL + GAP)}" y="{y}" width="{CELL}" height="{CELL}" '
                       f'fill="#1f6fb2" fill-opacity="{shade:.2f}"><title>{escape(text)}</title></rect>')
    if not rows:
        out.append('<text x="0" y="40" font-size="11">no live files</text>')
    out.append("</svg>")
    return "".join(out)


def _key(partition: Mapping[str, Any]) -> str:
    return "/".join(f"{k}={partition[k]}" for k in sorted(partition))
