"""Spark's row hashes in numpy (`airflow_lake.lake.format.spark_hash`) on a BDCI batch, vs Spark computing them.

What a Spark-free upsert of a small batch needs from the rows, on `--rows` rows of a BDCI batch (uuid key + 7
columns, `airflow_lake.datagen.bdci`, plus the version as a bigint: 9 columns):

- bucket ids: `bucket_ids([uuid], 16)` — Spark's `pmod(hash(uuid), 16)`, the bucket its bucketed write picks;
- the upsert fingerprint: `xxhash64` of the 9 columns, summed and XORed as `upsert.versions.fingerprint_aggregates`
  does — Spark's `DataFrame.agg` of those aggregates;
- a mixed shape too (uuid, ints, bigints, doubles, short names, a date, a decimal; 9 columns): both hashes;
- a payload shape: `--rows` / 10 rows of a uuid, a text of 0-2,000 bytes (every length its own) and the version.

First every row's hashes are checked equal to Spark's (`hash`, `xxhash64`, `pmod`, the fingerprint text); then
ours and Spark's (a warm local[2] session over the same Parquet file) alternate for `--rounds` rounds. Ours is
the whole call from Arrow columns in memory; Spark's includes reading the file (small: the batch it would
upsert). The ratio says what the in-process path saves; ours must stay well under 0.1 s at 100k rows.

    PYTHONPATH=. python benchmarks/bench_spark_hash.py --rows 100000 --rounds 7 [--json-out out.json]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import local_spark, machine_info, median, print_table, progress, ratio, scratch_dir, timed, write_result

from airflow_lake.datagen import bdci
from airflow_lake.lake.format import spark_hash
from airflow_lake.lake.upsert import versions

VERSION = 7
BUCKETS = 16
BDCI_TYPES = ["string", "string", "string", "bigint", "string", "string", "string", "string", "bigint"]
PAYLOAD_TYPES = ["string", "string", "bigint"]
MIXED_TYPES = ["string", "int", "bigint", "double", "double", "string", "string", "date", "decimal(12,2)"]


def bdci_table(rows: int) -> pa.Table:
    """A BDCI batch with its version as a column (what `fingerprint_aggregates` hashes last)."""
    batch = bdci.batch(1, rows, 2 * rows)
    return batch.append_column("version", pa.array(np.full(rows, VERSION), pa.int64()))


def mixed_table(rows: int) -> pa.Table:
    """uuid key, ints, doubles (some NaN / -0.0), short names, a date and a decimal, with NULLs."""
    rng = np.random.default_rng(37)
    uuids = bdci.batch(2, rows, 2 * rows).column("uuid")
    null = rng.random(rows) < 0.05
    doubles = rng.normal(0, 1e6, rows)
    doubles[rng.random(rows) < 0.01] = np.nan
    doubles[rng.random(rows) < 0.01] = -0.0
    return pa.table(
        {
            "uuid": uuids,
            "i": pa.array(rng.integers(-(1 << 31), 1 << 31, rows).astype(np.int32), mask=null),
            "l": pa.array(rng.integers(-(1 << 62), 1 << 62, rows), pa.int64()),
            "d1": pa.array(doubles),
            "d2": pa.array(rng.random(rows), mask=np.roll(null, 1)),
            "name": pa.array(np.array(bdci.NAMES, dtype=object)[rng.integers(0, len(bdci.NAMES), rows)].tolist()),
            "city": pa.array(
                np.array(bdci.CITIES, dtype=object)[rng.integers(0, len(bdci.CITIES), rows)].tolist(),
                mask=np.roll(null, 2),
            ),
            "day": pa.array(rng.integers(0, 20000, rows).astype(np.int32)).view(pa.date32()),
            "amount": decimals(rng.integers(-(10**11), 10**11, rows), pa.decimal128(12, 2)),
        }
    )


def payload_table(rows: int) -> pa.Table:
    """uuid key and a text payload of 0-2,000 bytes (JSON-like, every length its own), a tenth of `rows`."""
    rng = np.random.default_rng(38)
    rows = max(1, rows // 10)
    lengths = rng.integers(0, 2000, rows)
    blob = rng.integers(32, 127, int(lengths.sum()), dtype=np.uint8).tobytes()
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    text = pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(blob)])
    version = pa.array(np.full(rows, VERSION), pa.int64())
    return pa.table({"uuid": bdci.batch(3, rows, 2 * rows).column("uuid"), "payload": text, "version": version})


def decimals(unscaled: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A decimal128 array of these unscaled values (16 little-endian bytes each: the value, its sign extended)."""
    words = np.stack([unscaled, unscaled >> 63], axis=1).astype("<i8")
    return pa.Array.from_buffers(type_, len(unscaled), [None, pa.py_buffer(words.tobytes())])


def fingerprint_of(hashes: np.ndarray) -> str:
    """`versions.fingerprint` of the aggregates `fingerprint_aggregates` computes, from our row hashes."""
    unsigned = hashes.view(np.uint64)
    low = int((unsigned & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))
    high = int((unsigned >> np.uint64(32)).sum(dtype=np.uint64))
    xor = int(np.bitwise_xor.reduce(unsigned)) if len(unsigned) else 0
    return versions.fingerprint({"rows": len(hashes), "low": low, "high": high, "xor": xor})


def check(spark: Any, path: Path, table: pa.Table, types: list[str]) -> None:
    """Every row's hash, xxhash64 and bucket equal to Spark's, and the fingerprint text equal."""
    cols = [f"`{c}`" for c in table.column_names]
    ddl = ", ".join(f"`{c}` {t}" for c, t in zip(table.column_names, types, strict=True))
    frame = spark.read.schema(ddl + ", `_id` bigint").parquet(str(path))
    args = ", ".join(cols)
    rows = (
        frame.selectExpr("_id", f"hash({args})", f"xxhash64({args})", f"pmod(hash({cols[0]}), {BUCKETS})")
        .orderBy("_id")
        .collect()
    )
    columns = [table.column(c) for c in table.column_names]
    assert spark_hash.murmur3(columns, types).tolist() == [r[1] for r in rows], "hash differs"
    assert spark_hash.xxhash64(columns, types).tolist() == [r[2] for r in rows], "xxhash64 differs"
    assert spark_hash.bucket_ids(columns[:1], types[:1], BUCKETS).tolist() == [r[3] for r in rows], "bucket differs"
    observed = (
        frame.agg(*versions.fingerprint_aggregates(table.column_names[:-1], f"`{table.column_names[-1]}`"))
        .collect()[0]
        .asDict()
    )
    assert versions.fingerprint(observed) == fingerprint_of(spark_hash.xxhash64(columns, types)), "fingerprint"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json-out", default=None, help="write the results here")
    args = parser.parse_args(argv)
    info = machine_info()
    progress(f"load at start: {info['load_average']}")
    shapes = {
        "bdci": (bdci_table(args.rows), BDCI_TYPES),
        "mixed": (mixed_table(args.rows), MIXED_TYPES),
        "payload": (payload_table(args.rows), PAYLOAD_TYPES),
    }
    results: dict[str, Any] = {"machine": info, "rows": args.rows, "rounds": args.rounds, "cases": {}}
    with scratch_dir("bench-spark-hash-") as tmp:
        spark = local_spark("bench-spark-hash", {"spark.sql.shuffle.partitions": "2"}, tmp / "warehouse")
        try:
            cases: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
            for shape, (table, types) in shapes.items():
                path = tmp / f"{shape}.parquet"
                pq.write_table(table.append_column("_id", pa.array(np.arange(table.num_rows), pa.int64())), path)
                check(spark, path, table, types)
                progress(f"{shape}: every row's hashes and the fingerprint equal Spark's")
                columns = [table.column(c) for c in table.column_names]
                names = [f"`{c}`" for c in table.column_names]
                frame = spark.read.parquet(str(path))
                aggregates = versions.fingerprint_aggregates(table.column_names[:-1], names[-1])
                cases[f"{shape} {table.num_rows // 1000}k: bucket ids of the key"] = (
                    lambda c=columns, t=types: np.bincount(spark_hash.bucket_ids(c[:1], t[:1], BUCKETS), None, BUCKETS),
                    lambda f=frame, n=names: (
                        f.selectExpr(f"pmod(hash({n[0]}), {BUCKETS}) AS b").groupBy("b").count().collect()
                    ),
                )
                cases[f"{shape} {table.num_rows // 1000}k: fingerprint (xxhash64 of {len(types)} columns)"] = (
                    lambda c=columns, t=types: fingerprint_of(spark_hash.xxhash64(c, t)),
                    lambda f=frame, a=aggregates: f.agg(*a).collect(),
                )
                cases[f"{shape} {table.num_rows // 1000}k: hash of {len(types)} columns"] = (
                    lambda c=columns, t=types: spark_hash.murmur3(c, t),
                    lambda f=frame, n=names: f.selectExpr(f"sum(hash({', '.join(n)}))").collect(),
                )
            timings: dict[str, dict[str, list[float]]] = {k: {"ours": [], "spark": []} for k in cases}
            for ours, theirs in cases.values():  # a warm-up of each
                ours()
                theirs()
            for round_ in range(args.rounds):
                for case, (ours, theirs) in cases.items():
                    first, second = (
                        (("ours", ours), ("spark", theirs)) if round_ % 2 == 0 else (("spark", theirs), ("ours", ours))
                    )
                    for label, fn in (first, second):
                        timings[case][label].append(timed(fn)[0])
        finally:
            spark.stop()
    table_rows = []
    for case, times in timings.items():
        ours_s, spark_s = median(times["ours"]), median(times["spark"])
        results["cases"][case] = {"ours_s": times["ours"], "spark_s": times["spark"], "ratio": ratio(ours_s, spark_s)}
        table_rows.append([case, ours_s * 1000, spark_s * 1000, ratio(ours_s, spark_s)])
    results["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"--rows {args.rows:,}, median of {args.rounds} rounds (alternating); load {info['load_average']} -> "
        f"{results['load_average_end']}"
    )
    print_table(["case", "numpy ms", "Spark ms", "ratio"], table_rows)
    write_result(args.json_out, results)


if __name__ == "__main__":
    main()
