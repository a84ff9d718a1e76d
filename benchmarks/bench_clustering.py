"""Benchmark: clustering (`execute_clustering`: LINEAR / ZORDER / HILBERT) vs a plain Spark range sort and delta-rs.

Everything runs in one process, on one local[2] SparkSession, in the same run as its baselines.

Data: `--rows` rows (x BIGINT, y BIGINT uniform in [0, 1e6), p STRING of 20 random lowercase letters),
generated with numpy from a fixed seed and appended to an unpartitioned lake table in `--input-files`
appends (one small file each). That table is prepared once; every measured run starts from a fresh copy
of it (`shutil.copytree`, outside the timed region).

(1) time   ours      `run(spark, "execute_clustering", {"table", "plan_id"})` of a plan scheduled (untimed) with
                     `small_file_limit_bytes` 1e12, `max_bytes_per_group` 1e13 and `target_file_max_bytes`
                     chosen so that ceil(input bytes / target) == `--files`: one group, `--files` outputs.
                     Variants: LINEAR(x), ZORDER(x, y) and HILBERT(x, y) with SAMPLE and DIRECT coordinates.
           baseline  plain Spark on the same input files: `spark.read.parquet(<the table's files>)
                     .repartitionByRange(F, "x").sortWithinPartitions("x").write.parquet(<new dir>)`.
           delta-rs  the same rows (read from the lake table's input files with pyarrow) written as a Delta
                     table in as many appends; timed: `DeltaTable(path).optimize.z_order(["x", "y"],
                     target_size=...)`, with target_size calibrated by up to 4 untimed runs (its warm-up) so
                     that about `--files` files result. A different engine (Rust, DataFusion): its ratio is for
                     orientation only.
           Every variant runs `--rounds` times; within a round the variants alternate and the order rotates
           each round. One untimed warm-up of every Spark variant on a small table comes first (`--no-warmup`).
           Reported: median seconds, ratio of medians to the baseline, median of the per-round ratios, and the
           CPU seconds of this process and all its descendants (the JVM, the Python workers) in the timed call,
           median and ratio to the baseline's: on a busy machine a steadier figure than the wall time.
(2) layout 50 random box queries (fixed seed), each a 100,000 x 100,000 square inside [0, 1e6)^2 (1% of the
           domain): the share of files a query must open, judged by each file's Parquet footer min/max of x
           and y (min over row groups of the mins, max of the maxes). Mean % over the boxes for the input
           files (random order), the baseline, every variant, delta-rs and an ideal grid of `--files` cells
           (8 x 8 for 64), computed from perfect grid cell boxes on the same 50 boxes, next to its exact
           expectation for a box placed uniformly inside the domain.
(3) skewed strings  `--string-rows` rows (x BIGINT uniform in [0, 1e6), s = 'http://www.' + 8 random lowercase
           letters): ZORDER(x, s) with DIRECT (strings mapped by their first 8 bytes, all 'http://w') and SAMPLE
           coordinates into `--files` files; box queries 10% wide in x and 10% wide in the rank of s (between two
           quantiles of the actual s values), the share of files opened from the footers (s compared as str);
           the Spark baseline (by x) and an ideal grid (x ranges x s quantiles) for reference. One run each.

`--data skewed` (issue 37): heavily duplicated, skewed x, y instead of the uniform ones in (1) and (2): x DOUBLE =
           lognormal(0, 1) rounded to 0.1 (about 550 distinct values; the most common holds ~6.5 % of the rows),
           y BIGINT = numpy's zipf(1.3) capped at 1e9 (1 holds ~25 %, 2 ~10 %, then a long tail). Box queries are
           10% of the rows wide in the rank of x and 10% in the rank of y (bounds are actual values, so a box
           inside a run of one value is that value alone); the ideal grid cuts x and y each into equal-count
           ranges at the data's own quantiles, every cut between two distinct values (`quantile_cuts`: a run
           of one value is never split), its cells' boxes the min/max of their rows. Every layout row gets its
           share of files divided by the ideal's ("/ ideal").

Goals printed beside the times: LINEAR <= 1.15x, ZORDER SAMPLE <= 1.4x, HILBERT SAMPLE <= 1.5x the baseline.

    .venv/bin/python benchmarks/bench_clustering.py --out /tmp/bench_clustering.md          # 8M rows, ~4 min
    .venv/bin/python benchmarks/bench_clustering.py --rows 400000 --string-rows 200000 --rounds 1   # smoke run
    .venv/bin/python benchmarks/bench_clustering.py --data skewed --skip-delta --skip-strings   # issue 37's layout
    .venv/bin/python benchmarks/bench_clustering.py --variants hilbert-sample --skip-delta \
        --conf spark.sql.execution.arrow.maxRecordsPerBatch=100000                          # a session setting
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import REPO, local_spark, machine_info, median, progress, ratio, timed

from airflow_lake.jobs.runner import run
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.table import LakeTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEED = 20261122
DOMAIN = 1_000_000  # x and y are uniform in [0, DOMAIN)
PAYLOAD_BYTES = 20
BOXES = 50
BOX_SHARE = 0.1  # a box is 10% of each dimension: 1% of the 2-d domain
URL_PREFIX = b"http://www."
URL_SUFFIX = 8
SCHEMA_XY = "x bigint, y bigint, p string"
SCHEMA_SKEWED = "x double, y bigint, p string"
ZIPF_A = 1.3
ZIPF_CAP = 10**9
DATA_KINDS = ("uniform", "skewed")
SCHEMA_XS = "x bigint, s string"
WARMUP_ROWS = 50_000
BASELINE = "spark"
DELTA = "delta-rs"
LETTERS = (ord("a"), ord("z"))


@dataclass(frozen=True)
class Variant:
    """One way of ordering the rows: ours (a clustering layout), the Spark baseline, or delta-rs."""

    key: str
    label: str
    layout: str | None = None  # None: not our clustering
    columns: tuple[str, ...] = ()
    curve: str = "SAMPLE"
    goal: float | None = None


XY_VARIANTS = (
    Variant(BASELINE, 'Spark: repartitionByRange(F, "x") + sortWithinPartitions("x") (baseline)'),
    Variant("linear", "ours LINEAR(x)", "LINEAR", ("x",), "SAMPLE", 1.15),
    Variant("zorder-sample", "ours ZORDER(x, y) SAMPLE", "ZORDER", ("x", "y"), "SAMPLE", 1.4),
    Variant("hilbert-sample", "ours HILBERT(x, y) SAMPLE", "HILBERT", ("x", "y"), "SAMPLE", 1.5),
    Variant("zorder-direct", "ours ZORDER(x, y) DIRECT", "ZORDER", ("x", "y"), "DIRECT"),
    Variant("hilbert-direct", "ours HILBERT(x, y) DIRECT", "HILBERT", ("x", "y"), "DIRECT"),
    Variant(DELTA, 'delta-rs: optimize.z_order(["x", "y"]) (other engine)'),
)
XS_VARIANTS = (
    Variant(BASELINE, 'Spark: repartitionByRange(F, "x") + sortWithinPartitions("x")'),
    Variant("zorder-direct", "ours ZORDER(x, s) DIRECT", "ZORDER", ("x", "s"), "DIRECT"),
    Variant("zorder-sample", "ours ZORDER(x, s) SAMPLE", "ZORDER", ("x", "s"), "SAMPLE"),
)


def code_state() -> tuple[str, list[str]]:
    """A hash of airflow_lake/**/*.py as on disk and `git status` of airflow_lake/: the repository is edited
    while benchmarks run, so the report says which code it measured and whether it changed meanwhile."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "airflow_lake").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    try:
        status = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "airflow_lake"],
                                capture_output=True, text=True, check=False, timeout=30).stdout.splitlines()
    except OSError:
        status = ["(git status failed)"]
    return digest.hexdigest()[:12], status


# -- data ------------------------------------------------------------------------------------------------
def random_letters(rng: np.random.Generator, rows: int, width: int, prefix: bytes = b"") -> pa.Array:
    """`rows` strings: `prefix` + `width` uniformly random lowercase letters."""
    size = len(prefix) + width
    data = np.empty((rows, size), dtype=np.uint8)
    data[:, :len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    data[:, len(prefix):] = rng.integers(LETTERS[0], LETTERS[1] + 1, size=(rows, width), dtype=np.uint8)
    offsets = np.arange(0, rows * size + 1, size, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())
                                            ).cast(pa.string())


def xy_chunk(rows: int, index: int) -> pa.Table:
    rng = np.random.default_rng([SEED, 1, index])
    return pa.table({"x": rng.integers(0, DOMAIN, rows, dtype=np.int64),
                     "y": rng.integers(0, DOMAIN, rows, dtype=np.int64),
                     "p": random_letters(rng, rows, PAYLOAD_BYTES)})


def skewed_chunk(rows: int, index: int) -> pa.Table:
    """Heavily duplicated, skewed x, y: x lognormal(0, 1) rounded to one decimal (about 100 distinct values
    hold nearly every row, the most common ~4 % each), y Zipf-like integers (numpy's zipf(1.3): 1 holds
    ~25 % of the rows, 2 ~10 %, then a long tail; capped at 1e9)."""
    rng = np.random.default_rng([SEED, 3, index])
    return pa.table({"x": np.round(rng.lognormal(0.0, 1.0, rows), 1),
                     "y": np.minimum(rng.zipf(ZIPF_A, rows), ZIPF_CAP).astype(np.int64),
                     "p": random_letters(rng, rows, PAYLOAD_BYTES)})


def xs_chunk(rows: int, index: int) -> pa.Table:
    rng = np.random.default_rng([SEED, 2, index])
    return pa.table({"x": rng.integers(0, DOMAIN, rows, dtype=np.int64),
                     "s": random_letters(rng, rows, URL_SUFFIX, URL_PREFIX)})


def split(rows: int, parts: int) -> list[int]:
    return [rows // parts + (1 if i < rows % parts else 0) for i in range(parts)]


def build_lake(spark: SparkSession, path: Path, schema: str, chunks: Sequence[pa.Table], staging: Path) -> LakeTable:
    """An unpartitioned lake table with one append (one small file) per chunk."""
    table = LakeTable.create(str(path), {"schema": schema})
    staging.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(chunks):
        src = staging / f"chunk-{i:03d}.parquet"
        pq.write_table(chunk, src)
        table.write(spark.read.parquet(str(src)))
        src.unlink()
    return table


def live_files(path: Path) -> list[str]:
    """Absolute paths of a lake table's live data files."""
    table = LakeTable.open(str(path))
    return sorted(table.storage.path(f.path) for f in table.snapshot().files)


def live_bytes(path: Path) -> int:
    return sum(f.bytes for f in LakeTable.open(str(path)).snapshot().files)


def target_bytes(total: int, files: int) -> int:
    """target_file_max_bytes with ceil(total / target) == files (the planner's rule)."""
    target = max(1, math.ceil(total / files))
    while target > 1 and math.ceil(total / target) < files:
        target -= 1
    while math.ceil(total / target) > files:
        target += 1
    if math.ceil(total / target) != files:
        raise ValueError(f"no target size gives {files} files for {total} bytes")
    return target


# -- footers and box queries -----------------------------------------------------------------------------
FileBox = tuple[Any, Any, Any, Any]  # (min of column 0, max of column 0, min of column 1, max of column 1)


def footer_boxes(paths: Sequence[str], columns: Sequence[str]) -> list[FileBox | None]:
    """Per file: the min/max of `columns` from its Parquet footer (None: no rows, nothing to open)."""
    out: list[FileBox | None] = []
    for path in paths:
        meta = pq.read_metadata(path.removeprefix("file://"))
        if meta.num_rows == 0:
            out.append(None)
            continue
        names = [meta.schema.column(j).path for j in range(meta.num_columns)]
        bounds: list[Any] = []
        for name in columns:
            j = names.index(name)
            lows, highs = [], []
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                if group.num_rows == 0:
                    continue
                stats = group.column(j).statistics
                if stats is None or not stats.has_min_max:
                    lows.append(None)
                    highs.append(None)
                else:
                    lows.append(stats.min)
                    highs.append(stats.max)
            # a row group without statistics could hold anything: the file must be opened for every box
            bounds += [None if None in lows else min(lows), None if None in highs else max(highs)]
        out.append((bounds[0], bounds[1], bounds[2], bounds[3]))
    return out


def opened_share(files: Sequence[FileBox | None], boxes: Sequence[FileBox]) -> dict[str, float]:
    """Per box, the % of files whose footer box meets it; mean, min and max over the boxes."""
    shares = []
    for lo0, hi0, lo1, hi1 in boxes:
        hit = sum(1 for f in files if f is not None
                  and (f[0] is None or f[0] <= hi0) and (f[1] is None or f[1] >= lo0)
                  and (f[2] is None or f[2] <= hi1) and (f[3] is None or f[3] >= lo1))
        shares.append(100.0 * hit / len(files))
    return {"mean": float(np.mean(shares)), "min": float(np.min(shares)), "max": float(np.max(shares))}


def xy_boxes(seed: int) -> list[FileBox]:
    """Squares of BOX_SHARE * DOMAIN (integer values lo..hi inclusive), uniformly placed inside the domain."""
    width = int(DOMAIN * BOX_SHARE)
    rng = np.random.default_rng([SEED, seed])
    corners = rng.integers(0, DOMAIN - width + 1, size=(BOXES, 2))
    return [(int(a), int(a) + width - 1, int(b), int(b) + width - 1) for a, b in corners]


def grid_shape(files: int) -> tuple[int, int]:
    """The most square grid of `files` cells."""
    rows = max(d for d in range(1, math.isqrt(files) + 1) if files % d == 0)
    return rows, files // rows


def ideal_grid(files: int) -> list[FileBox | None]:
    """Perfect grid cells over [0, DOMAIN)^2 as file boxes (x cuts x grid_shape[0], y cuts y the other)."""
    nx, ny = grid_shape(files)
    xs = [(i * DOMAIN // nx, (i + 1) * DOMAIN // nx - 1) for i in range(nx)]
    ys = [(j * DOMAIN // ny, (j + 1) * DOMAIN // ny - 1) for j in range(ny)]
    return [(x0, x1, y0, y1) for x0, x1 in xs for y0, y1 in ys]


def expected_cells(cells: int) -> float:
    """Exact mean number of `cells` equal cells of [0, DOMAIN) that a window of BOX_SHARE * DOMAIN values
    meets, over every placement inside the domain."""
    width = int(DOMAIN * BOX_SHARE)
    starts = np.arange(0, DOMAIN - width + 1, dtype=np.int64)
    cut = np.array([i * DOMAIN // cells for i in range(cells + 1)], dtype=np.int64)
    first = np.searchsorted(cut, starts, side="right") - 1
    last = np.searchsorted(cut, starts + width - 1, side="right") - 1
    return float(np.mean(last - first + 1))


def ideal_expectation(files: int) -> tuple[float, float]:
    """% of files an ideal grid makes a box query open: exactly, for boxes inside the domain, and without
    domain edges ((1 + box / cell) cells per dimension, the usual textbook figure)."""
    nx, ny = grid_shape(files)
    inside = 100.0 * expected_cells(nx) * expected_cells(ny) / files
    no_edges = 100.0 * (1 + BOX_SHARE * nx) * (1 + BOX_SHARE * ny) / files
    return inside, no_edges


def rank_boxes(sorted_x: np.ndarray, sorted_y: np.ndarray, seed: int) -> list[FileBox]:
    """Boxes 10% of the rows wide in the rank of x and 10% in the rank of y (bounds are actual values, so a
    window inside a run of one value is that value alone): the 1% box of skewed data."""
    n = len(sorted_x)
    span = max(1, int(n * BOX_SHARE))
    rng = np.random.default_rng([SEED, seed])
    out: list[FileBox] = []
    for _ in range(BOXES):
        a, b = (int(r) for r in rng.integers(0, n - span + 1, size=2))
        out.append((sorted_x[a].item(), sorted_x[a + span - 1].item(),
                    sorted_y[b].item(), sorted_y[b + span - 1].item()))
    return out


def quantile_cuts(sorted_values: np.ndarray, ranges: int) -> np.ndarray:
    """Row positions (into `sorted_values`) that cut it into up to `ranges` ranges of near equal rows, every
    cut between two distinct values (a run of one value is never split): each cut at the boundary nearest
    the point that shares the rows still to cut evenly, so one heavy value does not leave later ranges empty."""
    n = len(sorted_values)
    boundaries = np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1  # positions between distinct values
    cuts: list[int] = []
    start, used = 0, 0  # the rows cut off so far; boundaries[:used] are at or below `start`
    pieces = min(ranges, len(boundaries) + 1)
    for i in range(1, pieces):
        target = start + (n - start) / (pieces - i + 1)
        lowest, highest = used, len(boundaries) - (pieces - i)  # leave a boundary for every later cut
        j = min(max(int(np.searchsorted(boundaries, target)), lowest), highest)
        if j > lowest and target - boundaries[j - 1] <= boundaries[j] - target:
            j -= 1
        cuts.append(int(boundaries[j]))
        start, used = int(boundaries[j]), j + 1
    return np.array(cuts, dtype=np.int64)


def ideal_quantile_grid(x: np.ndarray, y: np.ndarray, files: int) -> list[FileBox | None]:
    """The ideal grid of skewed data: grid_shape(files) cells, x and y each cut into equal-count ranges over
    the data's own quantiles, cuts between distinct values (`quantile_cuts`); a cell's box is the min/max of
    its rows (as its footer would say); an empty cell is a file nothing opens."""
    nx, ny = grid_shape(files)
    sx, sy = np.sort(x), np.sort(y)
    x_cut = sx[quantile_cuts(sx, nx)]  # a row is in x range i: the number of cut values <= its x
    y_cut = sy[quantile_cuts(sy, ny)]
    cell = np.searchsorted(x_cut, x, side="right") * ny + np.searchsorted(y_cut, y, side="right")
    order = np.argsort(cell, kind="stable")
    ordered = cell[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    boxes: list[FileBox | None] = [None] * files
    xo, yo = x[order], y[order]
    for c, lo_x, hi_x, lo_y, hi_y in zip(ordered[starts].tolist(), np.minimum.reduceat(xo, starts).tolist(),
                                         np.maximum.reduceat(xo, starts).tolist(),
                                         np.minimum.reduceat(yo, starts).tolist(),
                                         np.maximum.reduceat(yo, starts).tolist(), strict=True):
        boxes[c] = (lo_x, hi_x, lo_y, hi_y)
    return boxes


def string_boxes(sorted_s: pa.Array, seed: int) -> list[FileBox]:
    """x windows 10% of the domain wide; s windows between two quantiles of s, 10% apart in rank."""
    n = len(sorted_s)
    width = int(DOMAIN * BOX_SHARE)
    span = max(1, int(n * BOX_SHARE))
    rng = np.random.default_rng([SEED, seed])
    out: list[FileBox] = []
    for _ in range(BOXES):
        a = int(rng.integers(0, DOMAIN - width + 1))
        r = int(rng.integers(0, n - span + 1))
        out.append((a, a + width - 1, sorted_s[r].as_py(), sorted_s[r + span - 1].as_py()))
    return out


def ideal_string_grid(sorted_s: pa.Array, files: int) -> list[FileBox | None]:
    """Perfect grid cells: equal x ranges x equal-rank ranges of s (bounds are actual s values)."""
    n = len(sorted_s)
    nx, ns = grid_shape(files)
    xs = [(i * DOMAIN // nx, (i + 1) * DOMAIN // nx - 1) for i in range(nx)]
    ss = [(sorted_s[j * n // ns].as_py(), sorted_s[(j + 1) * n // ns - 1].as_py()) for j in range(ns)]
    return [(x0, x1, s0, s1) for x0, x1 in xs for s0, s1 in ss]


# -- the runners -----------------------------------------------------------------------------------------
@dataclass
class Setup:
    """A prepared input: the lake table (copied per run), its files, and a Delta copy of the same rows."""

    lake: Path
    inputs: list[str]
    input_bytes: int
    target: int
    columns: tuple[str, str]
    files: int
    delta: Path | None = None
    delta_target: int | None = None
    delta_input_bytes: int = 0


@dataclass
class Outcome:
    seconds: float
    files: int
    boxes: list[FileBox | None]
    facts: dict[str, Any] = field(default_factory=dict)
    cpu: float = float("nan")  # CPU seconds of the process tree in the timed call (`tree_cpu`)


def tree_cpu() -> float:
    """CPU seconds (user + system, own and reaped children's) of this process and every live descendant, from
    /proc (Linux; NaN elsewhere): the driver, the JVM and Spark's Python workers."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    try:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid ...
            parents[int(entry.name)] = int(fields[1])
            times[int(entry.name)] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    except OSError:
        return float("nan")
    tree, todo = set(), [os.getpid()]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return sum(times.get(pid, 0) for pid in tree) / tick


def timed_cpu(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """`timed`, and the process tree's CPU seconds meanwhile (`tree_cpu`)."""
    cpu = tree_cpu()
    seconds, result = timed(fn)
    return seconds, tree_cpu() - cpu, result


def run_ours(spark: SparkSession, setup: Setup, variant: Variant, scratch: Path) -> Outcome:
    """Copy the prepared table, schedule a plan (untimed), time execute_clustering, read the output footers."""
    path = scratch / f"ours-{variant.key}"
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(setup.lake, path)
    try:
        schedule_spec = {"table": str(path), "min_commits": 1, "layout": variant.layout,
                         "sort_columns": list(variant.columns), "curve": variant.curve,
                         "small_file_limit_bytes": 10**12, "max_bytes_per_group": 10**13,
                         "target_file_max_bytes": setup.target}
        sched = run(None, "schedule_clustering", schedule_spec)
        if not sched.get("plan_id"):
            raise RuntimeError(f"schedule_clustering planned nothing: {sched.get('reason')} (spec {schedule_spec})")
        if sched.get("output_files") != setup.files:
            raise RuntimeError(f"the plan writes {sched.get('output_files')} files, not {setup.files}")
        seconds, cpu, metrics = timed_cpu(lambda: run(spark, "execute_clustering", {"table": str(path),
                                                                                    "plan_id": sched["plan_id"]}))
        files = live_files(path)
        return Outcome(seconds, len(files), footer_boxes(files, setup.columns),
                       {"execute_seconds": metrics.get("execute_seconds"), "files_before": metrics.get("files_before"),
                        "files_after": metrics.get("files_after"), "bytes_after": metrics.get("bytes_after")}, cpu)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_spark(spark: SparkSession, setup: Setup, scratch: Path) -> Outcome:
    """The baseline: a range sort of the same input files by x, written as plain Parquet."""
    out = scratch / "spark-out"
    shutil.rmtree(out, ignore_errors=True)
    try:
        seconds, cpu, _ = timed_cpu(lambda: spark.read.parquet(*setup.inputs).repartitionByRange(setup.files, "x")
                                    .sortWithinPartitions("x").write.parquet(str(out)))
        files = sorted(str(p) for p in out.glob("part-*.parquet"))
        return Outcome(seconds, len(files), footer_boxes(files, setup.columns),
                       {"bytes_after": sum(Path(f).stat().st_size for f in files)}, cpu)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def prepare_delta(setup: Setup, path: Path) -> None:
    """The lake table's input files, read with pyarrow, appended to a Delta table one file each."""
    from deltalake import DeltaTable, write_deltalake

    for src in setup.inputs:
        write_deltalake(str(path), pq.read_table(src), mode="append")
    setup.delta = path
    setup.delta_input_bytes = sum(int(s) for s in DeltaTable(str(path)).get_add_actions(flatten=True)
                                  .column("size_bytes").to_pylist())


def run_delta(setup: Setup, scratch: Path, target: int | None = None) -> Outcome:
    """Copy the prepared Delta table, time open + optimize.z_order, read the active files' footers."""
    from deltalake import DeltaTable

    assert setup.delta is not None
    path = scratch / "delta-run"
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(setup.delta, path)
    size = target or setup.delta_target
    try:
        seconds, metrics = timed(lambda: DeltaTable(str(path)).optimize.z_order(["x", "y"], target_size=size))
        files = DeltaTable(str(path)).file_uris()
        return Outcome(seconds, len(files), footer_boxes(files, setup.columns),
                       {"files_removed": metrics.get("numFilesRemoved"), "files_added": metrics.get("numFilesAdded"),
                        "target_size": size,
                        "bytes_after": sum(Path(f.removeprefix("file://")).stat().st_size for f in files)})
    finally:
        shutil.rmtree(path, ignore_errors=True)


def calibrate_delta(setup: Setup, scratch: Path, tries: int = 4) -> list[str]:
    """target_size for about `files` output files. delta-rs does not make files of target_size bytes on disk
    (it counts its own way), so start at input bytes / files and scale by the count each untimed try gave
    (they double as the warm-up); keep the closest."""
    target = max(1, setup.delta_input_bytes // setup.files)
    tried: dict[int, int] = {}
    for _ in range(tries):
        if target in tried:
            break
        tried[target] = run_delta(setup, scratch, target).files
        if tried[target] == setup.files:
            break
        target = max(1, round(target * tried[target] / setup.files))
    order = list(tried)
    best = min(order, key=lambda t: (abs(tried[t] - setup.files), order.index(t)))  # ties: the earlier try
    setup.delta_target = best
    return ["delta-rs target_size calibration (untimed tries): "
            + ", ".join(f"{t:,} B -> {n} files" for t, n in tried.items()) + f"; used {best:,} B"]


Runner = Callable[[], Outcome]


def runners(spark: SparkSession, setup: Setup, variants: Sequence[Variant], scratch: Path) -> dict[str, Runner]:
    out: dict[str, Runner] = {}
    for v in variants:
        if v.key == BASELINE:
            out[v.key] = lambda: run_spark(spark, setup, scratch)
        elif v.key == DELTA:
            out[v.key] = lambda: run_delta(setup, scratch)
        else:
            out[v.key] = lambda v=v: run_ours(spark, setup, v, scratch)  # type: ignore[misc]
    return out


def rotate(names: list[str], round_no: int) -> list[str]:
    """Who goes first changes every round."""
    shift = round_no % len(names)
    return names[shift:] + names[:shift]


def run_rounds(label: str, rounds: int, make: dict[str, Runner], errors: dict[str, str]
               ) -> dict[str, list[Outcome]]:
    """Every runner once per round, in rotating order; a runner that raises is reported and skipped after."""
    kept: dict[str, list[Outcome]] = {}
    for round_no in range(rounds):
        for who in rotate(list(make), round_no):
            if who in errors:
                continue
            try:
                got = make[who]()
            except Exception:
                errors[who] = traceback.format_exc()
                progress(f"  {label} round {round_no + 1}/{rounds} {who:15s} FAILED:\n{errors[who]}")
                continue
            kept.setdefault(who, []).append(got)
            progress(f"  {label} round {round_no + 1}/{rounds} {who:15s} {got.seconds:7.2f} s  {got.files} files"
                     f"  CPU {got.cpu:6.2f} s")
    return kept


# -- the report ------------------------------------------------------------------------------------------
def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.2f}"
        return str(v).replace("|", "\\|")

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def pct(value: float) -> str:
    return f"{value:.2f} %"


def quality_of(outcomes: list[Outcome], boxes: list[FileBox]) -> tuple[dict[str, float], str]:
    """The last run's box-query figures, and whether every round laid the files out alike."""
    figures = [opened_share(o.boxes, boxes) for o in outcomes]
    means = {round(f["mean"], 6) for f in figures}
    return figures[-1], ("same every round" if len(means) == 1
                         else "per round: " + ", ".join(f"{f['mean']:.2f}" for f in figures))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=8_000_000, help="rows of the x, y table (default 8000000)")
    parser.add_argument("--string-rows", type=int, default=2_000_000,
                        help="rows of the skewed-string table (default 2000000)")
    parser.add_argument("--rounds", type=int, default=2, help="measured runs of every variant (default 2)")
    parser.add_argument("--files", type=int, default=64, help="output files of every layout (default 64)")
    parser.add_argument("--input-files", type=int, default=8, help="appends = input files (default 8)")
    parser.add_argument("--variants", default=",".join(v.key for v in XY_VARIANTS),
                        help="comma-separated x, y variants to run (default: all; the baseline always runs)")
    parser.add_argument("--data", choices=DATA_KINDS, default="uniform",
                        help="the x, y data: uniform (default) or skewed (x lognormal rounded to 0.1, y Zipf-like)")
    parser.add_argument("--skip-delta", action="store_true", help="leave delta-rs out")
    parser.add_argument("--skip-strings", action="store_true", help="leave the skewed-strings case (3) out")
    parser.add_argument("--no-warmup", action="store_true", help="no untimed warm-up on a small table")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lake-bench-clustering"),
                        help="scratch directory (a fresh subdirectory is made and deleted)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch subdirectory")
    parser.add_argument("--out", default=None, help="also write the markdown report here")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra Spark setting for the session (repeatable), e.g. "
                        "spark.sql.execution.arrow.maxRecordsPerBatch=100000")
    args = parser.parse_args(argv)
    wanted = {k.strip() for k in args.variants.split(",") if k.strip()} | {BASELINE}
    unknown = wanted - {v.key for v in XY_VARIANTS}
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {[v.key for v in XY_VARIANTS]}")
    if args.skip_delta:
        wanted.discard(DELTA)
    if args.rows < 1000 or args.string_rows < 1000 or args.rounds < 1 or args.files < 1 or args.input_files < 1:
        parser.error("--rows and --string-rows must be >= 1000, --rounds, --files and --input-files >= 1")
    extra_conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--conf {item!r} is not KEY=VALUE")
        extra_conf[key.strip()] = value.strip()
    variants = [v for v in XY_VARIANTS if v.key in wanted]
    deltalake_version = "not used"
    if DELTA in wanted:
        try:
            import deltalake

            deltalake_version = deltalake.__version__
        except ImportError:
            progress("deltalake is not installed: delta-rs is left out (pip install deltalake)")
            variants = [v for v in variants if v.key != DELTA]
            deltalake_version = "not installed"

    command = shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(["bench_clustering.py", *argv])
    machine = machine_info()
    code_before = code_state()
    started = time.monotonic()
    work = Path(args.work)
    made_work = not work.exists()
    work.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    errors: dict[str, str] = {}
    string_errors: dict[str, str] = {}
    notes: list[str] = []
    progress(f"clustering benchmark: {args.rows} rows, {args.string_rows} string rows, {args.files} files, "
             f"{args.rounds} round(s), scratch {root}")
    conf = {**DEFAULT_CONF, "spark.sql.shuffle.partitions": "4", **extra_conf}
    spark = local_spark("airflow-lake bench_clustering", conf, root / "warehouse")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        scratch = root / "runs"
        scratch.mkdir()

        # -- the x, y data ------------------------------------------------------------------------------
        clock = time.perf_counter()
        make_chunk = skewed_chunk if args.data == "skewed" else xy_chunk
        chunks = [make_chunk(n, i) for i, n in enumerate(split(args.rows, args.input_files))]
        gen_seconds = time.perf_counter() - clock
        if args.data == "skewed":  # the boxes and the ideal grid follow the data's own quantiles
            all_x = np.concatenate([c.column("x").to_numpy() for c in chunks])
            all_y = np.concatenate([c.column("y").to_numpy() for c in chunks])
            box_list = rank_boxes(np.sort(all_x), np.sort(all_y), 1)
            ideal_boxes = ideal_quantile_grid(all_x, all_y, args.files)
            data_facts = skewed_facts(all_x, all_y)
            del all_x, all_y
        else:
            box_list, ideal_boxes, data_facts = xy_boxes(1), ideal_grid(args.files), ""
        build_lake(spark, root / "lake-xy", SCHEMA_SKEWED if args.data == "skewed" else SCHEMA_XY, chunks,
                   root / "staging")
        lake_seconds = time.perf_counter() - clock - gen_seconds
        del chunks
        total = live_bytes(root / "lake-xy")
        xy = Setup(root / "lake-xy", live_files(root / "lake-xy"), total, target_bytes(total, args.files),
                   ("x", "y"), args.files)
        progress(f"x, y table: {len(xy.inputs)} files, {total} bytes (generated in {gen_seconds:.1f} s, "
                 f"written in {lake_seconds:.1f} s); target_file_max_bytes {xy.target}")
        if any(v.key == DELTA for v in variants):
            prepare_delta(xy, root / "delta-xy")
            notes += calibrate_delta(xy, scratch)
            progress("; ".join(notes))

        # -- warm-up -------------------------------------------------------------------------------------
        if not args.no_warmup:
            warm_rows = min(WARMUP_ROWS, args.rows)
            warm_chunks = [make_chunk(n, 1000 + i) for i, n in enumerate(split(warm_rows, 2))]
            build_lake(spark, root / "lake-warm", SCHEMA_SKEWED if args.data == "skewed" else SCHEMA_XY, warm_chunks,
                       root / "staging")
            warm_total = live_bytes(root / "lake-warm")
            warm_files = min(args.files, 8)
            warm = Setup(root / "lake-warm", live_files(root / "lake-warm"), warm_total,
                         target_bytes(warm_total, warm_files), ("x", "y"), warm_files)
            warm_errors: dict[str, str] = {}
            run_rounds("warm-up", 1, runners(spark, warm, [v for v in variants if v.key != DELTA], scratch),
                       warm_errors)
            errors.update({k: f"(in the warm-up)\n{v}" for k, v in warm_errors.items()})
            shutil.rmtree(root / "lake-warm", ignore_errors=True)

        # -- (1) + (2): time and layout ------------------------------------------------------------------
        xy_results = run_rounds("x,y", args.rounds, runners(spark, xy, variants, scratch), errors)
        random_boxes = footer_boxes(xy.inputs, xy.columns)

        # -- (3) skewed strings --------------------------------------------------------------------------
        xs: Setup | None = None
        if not args.skip_strings:
            s_chunks = [xs_chunk(n, i) for i, n in enumerate(split(args.string_rows, args.input_files))]
            all_s = pa.chunked_array([c.column("s") for c in s_chunks]).combine_chunks()
            sorted_s = all_s.take(pc.array_sort_indices(all_s))
            del all_s
            build_lake(spark, root / "lake-xs", SCHEMA_XS, s_chunks, root / "staging")
            del s_chunks
            s_total = live_bytes(root / "lake-xs")
            xs = Setup(root / "lake-xs", live_files(root / "lake-xs"), s_total, target_bytes(s_total, args.files),
                       ("x", "s"), args.files)
            xs_results = run_rounds("x,s", 1, runners(spark, xs, XS_VARIANTS, scratch), string_errors)
            s_input_boxes = footer_boxes(xs.inputs, xs.columns)
    finally:
        spark.stop()
        if args.keep:
            progress(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
            if made_work:
                with contextlib.suppress(OSError):
                    work.rmdir()
    elapsed = time.monotonic() - started
    code_after = code_state()
    load_end = [round(x, 2) for x in os.getloadavg()]

    # -- report ----------------------------------------------------------------------------------------------
    lines = ["# Clustering benchmark: execute_clustering vs a Spark range sort and delta-rs", ""]
    lines += [
        f"- command: `{command}`",
        f"- date: {machine['date']} (UTC), took {elapsed / 60:.1f} min",
        f"- machine: {machine['nproc']} cores, {machine['memory']} memory, {machine['cpu']}; load average "
        f"{machine['load_average']} at the start, {load_end} at the end",
        f"- versions: python {machine['versions']['python']}, pyspark {machine['versions']['pyspark']}, "
        f"pyarrow {machine['versions']['pyarrow']}, deltalake {deltalake_version}",
        f"- code: git {machine['git_revision']}; airflow_lake/*.py hash {code_before[0]} at the start, "
        f"{code_after[0]} at the end ("
        + ("unchanged" if code_before[0] == code_after[0] else "CHANGED DURING THE RUN: the figures may mix versions")
        + "); uncommitted changes under airflow_lake/: "
        + (", ".join(code_before[1]) if code_before[1] else "none"),
        "- Spark: local[2], driver memory 4g, spark.sql.shuffle.partitions 4, showConsoleProgress false, plus "
        "the jobs' DEFAULT_CONF" + "".join(f", {k}={v}" for k, v in extra_conf.items()),
        (f"- data: {args.rows:,} rows (x, y uniform int64 in [0, {DOMAIN:,}), p {PAYLOAD_BYTES} random letters; "
         if args.data == "uniform" else
         f"- data (skewed): {args.rows:,} rows (x double = lognormal(0, 1) rounded to 0.1, y bigint = "
         f"min(zipf({ZIPF_A}), {ZIPF_CAP:.0e}), p {PAYLOAD_BYTES} random letters; {data_facts}; ")
        + f"numpy seed {SEED}) in {len(xy.inputs)} input files ({xy.input_bytes:,} bytes) from {args.input_files} "
        f"appends to an unpartitioned lake table; every layout writes {args.files} files "
        f"(target_file_max_bytes {xy.target:,})",
        f"- rounds: {args.rounds} per variant, alternating, order rotated each round; "
        + ("no warm-up" if args.no_warmup else f"one untimed warm-up of every Spark variant on {WARMUP_ROWS:,} rows"),
        "",
        "## 1. Time (the same input files; ours: the execute_clustering call only, on a fresh copy of the table)",
        "",
    ]
    base_runs = xy_results.get(BASELINE, [])
    base = median([o.seconds for o in base_runs]) if base_runs else float("nan")
    base_cpu = median([o.cpu for o in base_runs]) if base_runs else float("nan")
    rows = []
    for v in variants:
        runs = xy_results.get(v.key)
        if not runs:
            rows.append([v.label, "failed", "", "", "", "", "", "", "", ""])
            continue
        secs = [o.seconds for o in runs]
        mid = median(secs)
        paired = (median([o.seconds / b.seconds for o, b in zip(runs, base_runs, strict=False)])
                  if v.key != BASELINE and base_runs else 1.0)
        goal = ""
        if v.goal is not None:
            goal = f"<= {v.goal:.2f}x: {'ok' if ratio(mid, base) <= v.goal else 'MISS'}"
        elif v.key == DELTA:
            goal = "(different engine)"
        inner = runs[-1].facts.get("execute_seconds")
        cpu = median([o.cpu for o in runs])
        rows.append([v.label, f"{mid:.2f}", ", ".join(f"{s:.2f}" for s in secs), f"{ratio(mid, base):.3f}x",
                     f"{paired:.3f}x", goal, runs[-1].files, "" if inner is None else f"{inner:.2f}", f"{cpu:.2f}",
                     f"{ratio(cpu, base_cpu):.3f}x"])
    lines += md_table(["variant", "median s", "runs s", "/ baseline", "paired ratio", "goal", "files out",
                       "execute_seconds (metric)", "CPU s (process tree)", "CPU / baseline"], rows)
    if DELTA in xy_results:
        d = xy_results[DELTA][-1].facts
        lines += ["", f"delta-rs {deltalake_version}: the same rows read from the lake table's {len(xy.inputs)} "
                  f"input files with pyarrow and appended as {len(xy.inputs)} Delta files "
                  f"({xy.delta_input_bytes:,} bytes); timed `DeltaTable(path).optimize.z_order([\"x\", \"y\"], "
                  f"target_size={d['target_size']})` on a fresh copy; {d['files_removed']} files removed, "
                  f"{d['files_added']} added. " + "; ".join(notes) + "."]

    if args.data == "skewed":
        lines += ["", f"## 2. Layout quality: share of files a box query opens (skewed x, y; {BOXES} boxes, each "
                  "10% of the rows in the rank of x by 10% in the rank of y, bounds are actual values, seed "
                  f"{SEED})", "", "Judged from each file's Parquet footer min/max of x and y; lower is better. The "
                  "ideal grid cuts x and y each into equal-count ranges at the data's own quantiles, every cut "
                  "between two distinct values (a run of one value stays in one range); its cells' boxes are the "
                  "min/max of their rows.", ""]
    else:
        lines += ["", f"## 2. Layout quality: share of files a box query opens (x, y; {BOXES} boxes of "
                  f"{int(DOMAIN * BOX_SHARE):,} x {int(DOMAIN * BOX_SHARE):,}, 1% of the domain, seed {SEED})", "",
                  "Judged from each file's Parquet footer min/max of x and y; lower is better.", ""]
    inside, no_edges = ideal_expectation(args.files)
    nx, ny = grid_shape(args.files)
    qrows = []
    ideal_q = opened_share(ideal_boxes, box_list)
    random_q = opened_share(random_boxes, box_list)
    qrows.append(["random order (the input files)", len(random_boxes), pct(random_q["mean"]),
                  f"{random_q['mean'] / ideal_q['mean']:.2f}x", pct(random_q["min"]), pct(random_q["max"]), ""])
    for v in variants:
        runs = xy_results.get(v.key)
        if not runs:
            qrows.append([v.label, "failed", "", "", "", "", ""])
            continue
        q, note = quality_of(runs, box_list)
        qrows.append([v.label, runs[-1].files, pct(q["mean"]), f"{q['mean'] / ideal_q['mean']:.2f}x", pct(q["min"]),
                      pct(q["max"]), note])
    if args.data == "skewed":
        filled = sum(1 for b in ideal_boxes if b is not None)
        qrows.append([f"ideal {nx} x {ny} quantile grid (computed)", f"{args.files} ({filled} not empty)",
                      pct(ideal_q["mean"]), "1.00x", pct(ideal_q["min"]), pct(ideal_q["max"]), ""])
    else:
        qrows.append([f"ideal {nx} x {ny} grid (computed)", args.files, pct(ideal_q["mean"]), "1.00x",
                      pct(ideal_q["min"]), pct(ideal_q["max"]), f"expected {inside:.2f} % for boxes inside the "
                      f"domain; {no_edges:.2f} % without domain edges"])
    lines += md_table(["layout", "files", "mean % opened", "/ ideal", "min %", "max %", "note"], qrows)

    if xs is not None:
        lines += string_section(args, xs, xs_results, s_input_boxes, sorted_s)

    all_errors = {**{f"x,y {k}": v for k, v in errors.items()}, **{f"x,s {k}": v for k, v in string_errors.items()}}
    if all_errors:
        lines += ["", "## Errors (these variants were skipped after failing)", ""]
        for who, text in all_errors.items():
            lines += [f"### {who}", "", "```", text.rstrip(), "```", ""]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report)
        progress(f"wrote {out}")
    return 1 if all_errors else 0


def string_section(args: argparse.Namespace, xs: Setup, xs_results: dict[str, list[Outcome]],
                   s_input_boxes: list[FileBox | None], sorted_s: pa.Array) -> list[str]:
    """Section 3 of the report: the skewed strings."""
    nx, ny = grid_shape(args.files)
    lines = ["", f"## 3. Skewed strings: ZORDER(x, s), s = 'http://www.' + {URL_SUFFIX} random letters "
             f"({args.string_rows:,} rows, {len(xs.inputs)} input files, {args.files} files out)", "",
             f"{BOXES} boxes, each 10% of the x domain by 10% of the rank of s (bounds are actual s values); "
             "footer min/max of s compared as str. One run each (the time is for orientation).", ""]
    s_boxes = string_boxes(sorted_s, 2)
    srows = []
    s_random = opened_share(s_input_boxes, s_boxes)
    srows.append(["random order (the input files)", "", len(s_input_boxes), pct(s_random["mean"])])
    for v in XS_VARIANTS:
        runs = xs_results.get(v.key)
        if not runs:
            srows.append([v.label, "failed", "", ""])
            continue
        q = opened_share(runs[-1].boxes, s_boxes)
        srows.append([v.label, f"{runs[-1].seconds:.2f}", runs[-1].files, pct(q["mean"])])
    s_ideal = opened_share(ideal_string_grid(sorted_s, args.files), s_boxes)
    srows.append([f"ideal {nx} x {ny} grid (x ranges x s quantiles)", "", args.files, pct(s_ideal["mean"])])
    lines += md_table(["layout", "seconds", "files", "mean % opened"], srows)
    direct, sampled = xs_results.get("zorder-direct"), xs_results.get("zorder-sample")
    if direct and sampled:
        d_q = opened_share(direct[-1].boxes, s_boxes)["mean"]
        s_q = opened_share(sampled[-1].boxes, s_boxes)["mean"]
        lines += ["", f"SAMPLE beats DIRECT: {'yes' if s_q < d_q else 'NO'} ({s_q:.2f} % vs {d_q:.2f} %)."]
    return lines


def skewed_facts(x: np.ndarray, y: np.ndarray) -> str:
    """How duplicated the skewed data is: distinct values and the largest run's share, per column."""
    parts = []
    for name, values in (("x", x), ("y", y)):
        _, counts = np.unique(values, return_counts=True)
        top = 100 * counts.max() / len(values)
        parts.append(f"{name}: {len(counts):,} distinct values, the most common holds {top:.1f} %")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
