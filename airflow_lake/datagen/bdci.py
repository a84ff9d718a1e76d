"""Upsert batches in the shape of the CCF BDCI 2022 LakeSoul contest (seed 003).

11 Parquet files `base-0.parquet` .. `base-10.parquet`: base-0 has 5x the rows of each of base-1..10 (the
contest: 10M and 2M). Columns: uuid (string), ip, hostname, requests (bigint), name (sometimes the string
"null"), city, job, phonenum. A uuid repeats across files and within a file. Upserted as versions 0..10
with `requests` summed, `name` the last value that is not "null", other columns the last value.

    python -m airflow_lake.datagen.bdci OUT_DIR --rows 400000     # rows of each of base-1..10
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FILES = 11
BASE_FACTOR = 5  # base-0 has this many times the rows of the others
SCHEMA = "uuid STRING, ip STRING, hostname STRING, requests BIGINT, name STRING, city STRING, job STRING, " \
         "phonenum STRING"
MERGE_OPERATORS = {"requests": "sum", "name": "last_non_null"}
NULL_VALUES = {"name": ["null"]}
CITIES = ["Beijing", "Shanghai", "Shenzhen", "Hangzhou", "Chengdu", "Wuhan", "Xian", "Nanjing"]
JOBS = ["engineer", "teacher", "doctor", "driver", "artist", "farmer", "lawyer", "chef"]
NAMES = ["Li", "Wang", "Zhang", "Liu", "Chen", "Yang", "Zhao", "Huang", "Zhou", "Wu"]


def table_spec(buckets: int = 16) -> dict[str, object]:
    """The lake table the batches upsert into."""
    return {"schema": SCHEMA.replace("uuid STRING", "uuid STRING NOT NULL"), "primary_key": ["uuid"],
            "bucket": {"columns": ["uuid"], "count": buckets}, "merge_operators": dict(MERGE_OPERATORS),
            "null_values": {k: list(v) for k, v in NULL_VALUES.items()}}


def batch(index: int, rows: int, keys: int, seed: int = 3) -> pa.Table:
    """File `index` (0..10): `rows` rows over `keys` distinct uuids (they repeat within and across files)."""
    rng = np.random.default_rng([seed, index])
    ids = rng.integers(0, keys, rows)
    uuid = pa.array([f"{i:08x}-0000-4000-8000-{i * 2654435761 % 10**12:012d}" for i in ids.tolist()])
    ip = pa.array([f"10.{a}.{b}.{c}" for a, b, c in rng.integers(0, 256, (rows, 3)).tolist()])
    host = pa.array([f"host-{h}.example.com" for h in rng.integers(0, 1000, rows).tolist()])
    requests = pa.array(rng.integers(0, 1000, rows), type=pa.int64())
    names = np.array([*NAMES, "null"], dtype=object)[rng.integers(0, len(NAMES) + 1, rows)]
    city = np.array(CITIES, dtype=object)[rng.integers(0, len(CITIES), rows)]
    job = np.array(JOBS, dtype=object)[rng.integers(0, len(JOBS), rows)]
    phone = pa.array([f"1{p:010d}" for p in rng.integers(0, 10**10, rows).tolist()])
    return pa.table({"uuid": uuid, "ip": ip, "hostname": host, "requests": requests,
                     "name": pa.array(names.tolist()), "city": pa.array(city.tolist()),
                     "job": pa.array(job.tolist()), "phonenum": phone})


def generate(directory: str | Path, rows: int, *, keys: int | None = None, seed: int = 3) -> list[Path]:
    """Write the 11 files into `directory` (`rows`: rows of each of base-1..10; uuids drawn from `keys`,
    default 2 x rows, so most keys of a later file are already in base-0). Returns their paths in order."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    keys = keys or max(1, 2 * rows)
    paths = []
    for index in range(FILES):
        path = out / f"base-{index}.parquet"
        pq.write_table(batch(index, rows * (BASE_FACTOR if index == 0 else 1), keys, seed), path)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--rows", type=int, default=400_000, help="rows of each of base-1..10 (base-0: 5x)")
    parser.add_argument("--keys", type=int, default=None, help="distinct uuids (default 2 x rows)")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    for path in generate(args.directory, args.rows, keys=args.keys, seed=args.seed):
        print(path)


if __name__ == "__main__":
    main()
