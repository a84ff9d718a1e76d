"""execute_clustering writes the planned number of files, each one stretch of the layout's order, whatever
the data: cuts are taken on the whole curve key, not on its first word (issue 20, item 19)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from airflow_lake.jobs.runner import run
from airflow_lake.lake import LakeTable
from airflow_lake.lake.clustering import curves

MASK = (1 << 64) - 1
MIN_LONG = -(1 << 63)
Key = Callable[[list[tuple[int | None, int | None]]], list[Any]]


def flipped(value: int | None) -> int:
    """The DIRECT coordinate of a bigint: unsigned order = signed order; NULL is the largest."""
    return MASK if value is None else (value ^ MIN_LONG) & MASK


def zorder_keys(rows: list[tuple[int | None, int | None]]) -> list[Any]:
    """Z-order of the full 64-bit coordinates, computed bit by bit (a's bit first at each level)."""
    out = []
    for a, b in rows:
        x, y, key = flipped(a), flipped(b), 0
        for level in range(63, -1, -1):
            key = (key << 2) | (((x >> level) & 1) << 1) | ((y >> level) & 1)
        out.append(key)
    return out


def hilbert_keys(rows: list[tuple[int | None, int | None]]) -> list[Any]:
    """The Hilbert index over the bits that vary (the curve `execute_clustering` uses for DIRECT)."""
    x = np.array([flipped(a) for a, _ in rows], dtype=np.uint64)
    y = np.array([flipped(b) for _, b in rows], dtype=np.uint64)
    bits = max(int(x.min() ^ x.max()).bit_length(), int(y.min() ^ y.max()).bit_length(), 1)
    top = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(MASK)
    words = curves.interleave(curves.hilbert_transpose([x & top, y & top], bits), bits)
    return list(zip(*[w.tolist() for w in words], strict=True))


def linear_keys(rows: list[tuple[int | None, int | None]]) -> list[Any]:
    return [((a is None, a or 0), (b is None, b or 0)) for a, b in rows]


def clustered(spark: Any, path: str, batches: list[list[tuple[int | None, int | None]]], files: int,
              **layout: Any) -> tuple[dict[str, Any], list[list[tuple[int | None, int | None]]]]:
    """Write `batches` as commits, plan one group into `files` files, execute it; the plan and each written
    file's rows."""
    table = LakeTable.create(path, {"schema": "a BIGINT, b BIGINT"})
    for batch in batches:
        table.write(spark.createDataFrame(batch, "a BIGINT, b BIGINT").coalesce(1))
    total = sum(f.bytes for f in table.snapshot().files)
    plan = run(None, "schedule_clustering", {
        "table": path, "min_commits": 0, "small_file_limit_bytes": 10**12, "max_bytes_per_group": 10**12,
        "target_file_max_bytes": -(-total // files), **layout})
    run(spark, "execute_clustering", {"table": path, "plan_id": plan["plan_id"]})
    written = []
    for data_file in table.snapshot().files:
        columns = pq.read_table(table.storage.path(data_file.path), columns=["a", "b"]).to_pydict()
        written.append(list(zip(columns["a"], columns["b"], strict=True)))
    return plan, written


def assert_planned_stretches(plan: dict[str, Any], written: list[list[tuple[int | None, int | None]]],
                             rows: list[tuple[int | None, int | None]], key: Key | None) -> None:
    assert plan["groups"] == 1
    sizes = sorted(len(f) for f in written)
    assert len(written) == plan["output_files"], sizes  # the plan's files, no fewer
    assert sorted(itertools.chain(*written), key=str) == sorted(rows, key=str)  # every row once
    share = len(rows) / plan["output_files"]
    assert 0.5 * share <= sizes[0] and sizes[-1] <= 1.5 * share, sizes  # near equal (cuts snap to cell borders)
    if key is not None:  # each file is one stretch of the order: the files' key ranges do not interleave
        keyed = key(list(itertools.chain(*written)))  # (over all rows: DIRECT trims the bits they share)
        ends = list(itertools.accumulate(len(f) for f in written))
        spans = sorted((min(keyed[e - len(f):e]), max(keyed[e - len(f):e])) for f, e in zip(written, ends, strict=True))
        assert all(high < low for (_, high), (low, _) in itertools.pairwise(spans))


def smallest_case() -> list[list[tuple[int | None, int | None]]]:
    rows: list[tuple[int | None, int | None]] = [(i * 7919 % 10**6, i * 104729 % 10**6) for i in range(1000)]
    return [rows, [(-1, 5)]]


@pytest.mark.parametrize(("layout", "curve", "key"), [
    ("ZORDER", "DIRECT", zorder_keys), ("HILBERT", "DIRECT", hilbert_keys),
    ("ZORDER", "SAMPLE", None), ("HILBERT", "SAMPLE", None), ("LINEAR", "SAMPLE", linear_keys)])
def test_one_outlier_row_does_not_merge_the_planned_files(spark: Any, tmp_path: Any, layout: str, curve: str,
                                                          key: Key | None) -> None:
    batches = smallest_case()
    plan, written = clustered(spark, str(tmp_path / "t"), batches, 4, layout=layout, curve=curve,
                              sort_columns=["a", "b"])
    assert plan["output_files"] == 4
    assert_planned_stretches(plan, written, [*batches[0], *batches[1]], key)


def skewed_rows(count: int, seed: int) -> list[tuple[int | None, int | None]]:
    """Log-uniform values over 0..2**58 (most rows share the top half of the curve's bits), negatives and
    NULLs: a first word of the curve key alone separates only the few largest values."""
    rng = np.random.default_rng(seed)
    a = np.exp(rng.uniform(0, 40, count)).astype(np.int64)
    b = np.exp(rng.uniform(0, 40, count)).astype(np.int64)
    a[::97] *= -1
    rows: list[tuple[int | None, int | None]] = [(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    return [(x, None) if i % 211 == 0 else (x, y) for i, (x, y) in enumerate(rows)]


@pytest.mark.parametrize(("layout", "key"), [("ZORDER", zorder_keys), ("HILBERT", hilbert_keys)])
def test_skewed_direct_curves_write_the_planned_32_files(spark: Any, tmp_path: Any, layout: str, key: Key) -> None:
    batches = [skewed_rows(6000, seed) for seed in range(4)]
    plan, written = clustered(spark, str(tmp_path / "t"), batches, 32, layout=layout, curve="DIRECT",
                              sort_columns=["a", "b"])
    assert plan["output_files"] == 32
    assert_planned_stretches(plan, written, list(itertools.chain(*batches)), key)
