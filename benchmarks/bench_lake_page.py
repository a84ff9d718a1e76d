"""Benchmark: the Lake page on long timelines — what its routes compute for a table with 100, 1,000 and 10,000
instants (no clustering yet, the worst case: "commits since the last clustering" reads the whole log back).

Measured in process (the functions the routes run, without HTTP and login): the list row (`table_summary`),
the table page's data (`table_detail`: newest 100 instants, plans, totals), the layout SVG and the HTML. The
baseline is the same page of the 100-instant table; the ratios say how the page grows with the timeline.

    .venv/bin/python benchmarks/bench_lake_page.py --rounds 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import REPO, median, scratch_dir

sys.path.insert(0, str(REPO))
from airflow_lake.ui import data, pages
from airflow_lake.ui.roots import resolve
from airflow_lake.ui.svg import layout_svg
from tests.ui.test_lake_page import build_long_timeline


def page_seconds(root: str, name: str) -> dict[str, float]:
    ref = resolve(f"0/{name}", [root])
    out = {}
    started = time.perf_counter()
    data.table_summary(ref)
    out["list row"] = time.perf_counter() - started
    started = time.perf_counter()
    detail = data.table_detail(ref)
    svg = layout_svg(data.layout(ref, None), "now")
    pages.table_page(detail, [svg])
    out["table page"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with scratch_dir("bench-lake-page-") as work:
        for size in sizes:
            build_long_timeline(Path(work) / f"t{size}", size)
        results = {}
        for size in sizes:
            runs = [page_seconds(str(work), f"t{size}") for _ in range(args.rounds)]
            results[size] = {k: median([r[k] for r in runs]) for k in runs[0]}
    base = results[sizes[0]]
    print("| instants | list row (ms) | table page (ms) | page ÷ 100-instant page |")
    print("|---|---|---|---|")
    for size in sizes:
        r = results[size]
        print(f"| {size:,} | {r['list row'] * 1000:.0f} | {r['table page'] * 1000:.0f} | "
              f"{r['table page'] / base['table page']:.2f} |")


if __name__ == "__main__":
    main()
