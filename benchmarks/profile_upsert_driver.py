"""Same-process A/B of an upsert's driver work before its first Spark job, as issue 37 (helper upsertdrv) changed it.

conform -> observe (the fingerprint) -> delta_rows -> the query's shuffles -> the bucket assignment -> the write's
shuffles, over a BDCI batch file, built by this tree's modules ("branch") and by those of another checkout ("main",
`--before`: e.g. `git worktree add --detach /work/wt-before <commit>`), alternating, 3 warm-ups, then `--rounds`
timed rounds of each. No Spark job runs: it times the Python, the calls into the JVM and the JVM's analysis and
planning that come before an upsert's first job (the rest of an upsert is the same code in both).

    .venv/bin/python benchmarks/profile_upsert_driver.py --before /work/wt-before --rounds 20
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from common import local_spark

from airflow_lake.datagen import bdci
from airflow_lake.jobs.session import DEFAULT_CONF
from airflow_lake.lake.spark import bucket_assign, plan_text, schema
from airflow_lake.lake.spark.file_writer import WRITE_CONF
from airflow_lake.lake.spark.session_conf import session_conf
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.upsert import physical, versions


def _load(name: str, path: Path) -> ModuleType:
    """A module of the other checkout, by path, under its own name (its imports resolve to this tree's)."""
    found = importlib.util.spec_from_file_location(name, path)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    found.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a checkout of the commit before (its modules are loaded)")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    lake = Path(args.before) / "airflow_lake" / "lake"
    old = {name: _load(f"before_{name}", lake / path) for name, path in {
        "physical": "upsert/physical.py", "versions": "upsert/versions.py", "schema": "spark/schema.py",
        "plan_text": "spark/plan_text.py", "bucket_assign": "spark/bucket_assign.py"}.items()}
    work = Path(tempfile.mkdtemp(prefix="lake-profile-upsert-driver-"))
    spark = local_spark("profile-upsert-driver", DEFAULT_CONF, work / "warehouse")
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    files = bdci.generate(work / "src", 1000)
    spec = TableSpec.from_dict(bdci.table_spec(16))
    files_spec = physical.physical_spec(spec)
    present = physical.value_columns(spec)
    columns = TableSpec(columns=tuple(spec.column(c) for c in spec.column_names))
    names = [*spec.primary_key, *present]

    def branch(src: Any) -> int:
        observed = schema.conform(src, columns).observe(
            Observation(), *versions.fingerprint_aggregates(names, "CAST(7 AS BIGINT)"))
        rows = physical.delta_rows(observed, spec, present, "CAST(7 AS BIGINT)")
        chain = plan_text.scan_chain(rows)
        before = 0 if chain else plan_text.query_shuffles(rows)
        out = bucket_assign.assign_buckets(rows, files_spec, "n", "b", None, sort=False, sized_tasks=True,
                                           hashed_like=False if chain else None)
        return 1 if chain else plan_text.shuffles(plan_text.plan_text(out)) - before

    def main_code(src: Any) -> int:
        version = F.lit(7).cast("bigint")
        observed = old["schema"].conform(src, columns).observe(
            Observation(), *old["versions"].fingerprint_aggregates(names, version))
        rows = old["physical"].delta_rows(observed, spec, present, version)
        before = old["plan_text"].query_shuffles(rows)
        out = old["bucket_assign"].assign_buckets(rows, files_spec, "n", "b", None, sort=False, sized_tasks=True)
        return int(old["plan_text"].shuffles(old["plan_text"].plan_text(out))) - int(before)

    ways: dict[str, Callable[[Any], int]] = {"main": main_code, "branch": branch}
    times: dict[str, list[float]] = {name: [] for name in ways}
    try:
        with session_conf(spark, WRITE_CONF):
            for i in range(3 + args.rounds):
                for name in (list(ways) if i % 2 == 0 else list(reversed(ways))):
                    src = spark.read.parquet(str(files[i % len(files)]))
                    started = time.perf_counter()
                    added = ways[name](src)
                    seconds = time.perf_counter() - started
                    assert added == 1, (name, added)  # both plan the write's one shuffle
                    if i >= 3:
                        times[name].append(seconds)
    finally:
        spark.stop()
    load = Path("/proc/loadavg").read_text().split()[:3]
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values) * 1000:.1f} ms, min {min(values) * 1000:.1f} ms "
              f"over {len(values)} rounds")
    ratio = statistics.median(times["branch"]) / statistics.median(times["main"])
    print(f"branch / main (medians): {ratio:.2f}; load average at the end {load}")


if __name__ == "__main__":
    main()
