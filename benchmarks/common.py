"""Helpers shared by the benchmarks: timing, medians, machine facts, a local SparkSession, JSON output."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]


def progress(message: str) -> None:
    """Progress goes to stderr; stdout holds the report only."""
    print(message, file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run `fn` once; return (seconds, its result)."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def median(values: list[float]) -> float:
    """Median of a non-empty list."""
    return float(statistics.median(values))


def ratio(ours: float, baseline: float) -> float:
    """ours / baseline, rounded for reports (inf if the baseline took no time)."""
    return round(ours / baseline, 3) if baseline > 0 else float("inf")


@contextmanager
def scratch_dir(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A temporary directory, deleted afterwards unless `keep`."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            print(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def _command_output(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False, timeout=10).stdout.strip()
    except OSError:
        return ""


def machine_info() -> dict[str, Any]:
    """Where and when a benchmark ran: cores, memory, CPU, load, versions, git revision."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str] = {"python": platform.python_version()}
    for module in ("pyspark", "pyarrow"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = "not installed"
    memory = next((line.split()[1] for line in _command_output(["free", "-h"]).splitlines()
                   if line.startswith("Mem:")), "")
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "nproc": os.cpu_count(),
        "memory": memory,
        "cpu": cpu,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": versions,
        "git_revision": _command_output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
    }


def local_spark(app_name: str, conf: Mapping[str, str], warehouse: Path) -> SparkSession:
    """A local[2] SparkSession using this Python for workers, with `conf` on top of the benchmark defaults."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "4g")
    )
    conf = dict(conf)
    try:
        from airflow_lake import jvm
        ours = jvm.curve_jar()  # our JVM code, as a job's session has it (jobs/session.py; the hook: --jars)
    except ImportError:  # (a peer's own environment)
        ours = None
    if ours is not None:
        conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars", ""), str(ours)) if j)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def dir_bytes(path: Path, suffix: str = ".parquet") -> int:
    """Total size of the files under `path` whose names end with `suffix`."""
    return sum(p.stat().st_size for p in path.rglob(f"*{suffix}") if p.is_file())


def write_result(path: str | None, payload: Mapping[str, Any]) -> None:
    """Write the JSON result file if a path was given."""
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    """A plain fixed-width table on stdout."""
    cells = [headers, *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
