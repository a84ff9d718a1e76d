"""Spark's row hashes in numpy (`lake/format/spark_hash.py`) against Spark's own `hash`, `xxhash64` and
`pmod(hash(...), 16)`, row by row: one Parquet file written by pyarrow, read by Spark with the table's schema."""

from __future__ import annotations

import itertools
import random
import struct
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.lake.format import spark_hash
from airflow_lake.lake.format.pyarrow_read import arrow_type

HALF = 90  # rows of edge values (all string byte lengths 0..70, and longer); then the same values with NULLs
_I64 = (-(1 << 63), (1 << 63) - 1)


def _float32(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def _float64(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def _text(rng: random.Random, size: int) -> str:
    """A string of exactly `size` UTF-8 bytes, with multi-byte characters (bytes >= 0x80 in the tails too)."""
    out, left = [], size
    while left:
        char = rng.choice([c for c in ("a", "Z", "~", "é", "€", "😀", "\x00") if len(c.encode()) <= left])
        out.append(char)
        left -= len(char.encode())
    return "".join(out)


def _edges(rng: random.Random) -> dict[str, list[Any]]:
    """Per column type, its edge values, then random ones up to HALF rows."""
    nan_payload = _float32(0x7FC00001)  # a NaN that is not Java's canonical one
    edges: dict[str, tuple[list[Any], Any]] = {
        "boolean": ([True, False], lambda: rng.random() < 0.5),
        "tinyint": ([0, -1, 1, -128, 127], lambda: rng.randint(-128, 127)),
        "smallint": ([0, -1, 1, -32768, 32767], lambda: rng.randint(-32768, 32767)),
        "int": ([0, -1, 1, -(1 << 31), (1 << 31) - 1], lambda: rng.randint(-(1 << 31), (1 << 31) - 1)),
        "bigint": ([0, -1, 1, *_I64, 1 << 32, -(1 << 32)], lambda: rng.randint(*_I64)),
        "float": (
            [
                0.0,
                -0.0,
                1.0,
                -1.0,
                float("nan"),
                nan_payload,
                float("inf"),
                float("-inf"),
                _float32(0x7F7FFFFF),
                _float32(1),
            ],
            lambda: rng.uniform(-1e6, 1e6),
        ),
        "double": (
            [
                0.0,
                -0.0,
                1.0,
                -1.0,
                float("nan"),
                _float64(0x7FF8000000000001),
                _float64(0xFFF8000000000000),
                float("inf"),
                float("-inf"),
                1.7976931348623157e308,
                5e-324,
            ],
            lambda: rng.uniform(-1e12, 1e12),
        ),
        "date": ([0, -1, 1, 2932896, -719162], lambda: rng.randint(-719162, 2932896)),  # days: 0001-01-01..9999-12-31
        "timestamp": ([0, -1, 1, 253402300799999999, -62135596800000000], lambda: rng.randint(-(1 << 60), 1 << 60)),
        "timestamp_ntz": ([0, -1, 1, 253402300799999999, -62135596800000000], lambda: rng.randint(-(1 << 60), 1 << 60)),
        "decimal(1,0)": ([Decimal(0), Decimal(9), Decimal(-9), Decimal(-1)], lambda: Decimal(rng.randint(-9, 9))),
        "decimal(10,2)": (
            [Decimal("0.00"), Decimal("-0.01"), Decimal("99999999.99"), Decimal("-99999999.99")],
            lambda: Decimal(rng.randint(-(10**10) + 1, 10**10 - 1)).scaleb(-2),
        ),
        "decimal(18,4)": (
            [Decimal("99999999999999.9999"), Decimal("-99999999999999.9999"), Decimal("-0.0001")],
            lambda: Decimal(rng.randint(-(10**18) + 1, 10**18 - 1)).scaleb(-4),
        ),
        "string": (
            ["", "a", "é", "€", "😀", "Straße 東京"] + [_text(rng, n) for n in (*range(71), 96, 131, 200, 257)],
            lambda: _text(rng, rng.randint(0, 40)),
        ),
        "binary": (
            [b"", b"\x80", b"\xff\xfe", bytes(range(256))] + [rng.randbytes(n) for n in (*range(71), 96, 131, 200)],
            lambda: rng.randbytes(rng.randint(0, 40)),
        ),
    }
    out = {}
    for name, (values, more) in edges.items():
        assert len(values) <= HALF
        out[name] = values + [more() for _ in range(HALF - len(values))]
    return out


def _arrow(name: str, values: list[Any]) -> pa.Array:
    if name in ("date", "timestamp", "timestamp_ntz"):  # given as days / microseconds
        storage = pa.array(values, pa.int32() if name == "date" else pa.int64())
        return storage.view(arrow_type(name))
    if name == "float":
        return pa.array(np.array(values, dtype=np.float32))
    return pa.array(values, arrow_type(name))


@pytest.fixture(scope="module")
def table() -> pa.Table:
    """The edge values (rows 0..HALF-1), then the same values shuffled with NULLs at a different place in each
    column (rows HALF..): so every chain meets NULLs between non-NULL columns."""
    rng = random.Random(37)
    columns = {}
    for i, (name, values) in enumerate(_edges(rng).items()):
        shuffled = values[:]
        rng.shuffle(shuffled)
        nulls = [None if (row * 3 + i) % 5 == 0 else v for row, v in enumerate(shuffled)]
        columns[name] = pa.concat_arrays([_arrow(name, values), _arrow(name, nulls)])
    return pa.table({_col(n): a for n, a in columns.items()})


def _col(type_name: str) -> str:
    return "c_" + type_name.replace("(", "_").replace(",", "_").replace(")", "")


@pytest.fixture(scope="module")
def spark_hashes(spark: Any, table: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """Spark's `hash`, `xxhash64`, `pmod(hash, 16)` of each column alone, of all columns, and of the pairs."""
    path = tmp_path_factory.mktemp("spark_hash") / "edges.parquet"
    pq.write_table(table.append_column("id", pa.array(range(table.num_rows), pa.int64())), path)
    ddl = ", ".join(f"{_col(t)} {t}" for t in _types(table)) + ", id bigint"
    exprs = {}
    for label, cols in _selections(table).items():
        args = ", ".join(cols)
        exprs[f"m:{label}"] = f"hash({args})"
        exprs[f"x:{label}"] = f"xxhash64({args})"
        exprs[f"b:{label}"] = f"pmod(hash({args}), 16)"
    frame = spark.read.schema(ddl).parquet(str(path))
    rows = frame.selectExpr("id", *(f"{e} AS `{k}`" for k, e in exprs.items())).orderBy("id").collect()
    assert [r["id"] for r in rows] == list(range(table.num_rows))
    return {key: [r[key] for r in rows] for key in exprs}


def _types(table: pa.Table) -> list[str]:
    names = {_col(t): t for t in spark_hash.SUPPORTED}
    return [names[c] for c in table.column_names]


def _selections(table: pa.Table) -> dict[str, list[str]]:
    """Each column alone, all of them, all in reverse, and each with its neighbour (NULLs in between)."""
    cols = table.column_names
    out = {c: [c] for c in cols}
    out["all"] = cols
    out["reversed"] = cols[::-1]
    out.update({f"{a}+{b}": [a, b] for a, b in itertools.pairwise(cols)})
    return out


@pytest.mark.parametrize("fn", ["m", "x", "b"])
def test_every_type_and_chain_hashes_as_spark_does(
    table: pa.Table, spark_hashes: dict[str, list[Any]], fn: str
) -> None:
    types = dict(zip(table.column_names, _types(table), strict=True))
    wrong = []
    for label, cols in _selections(table).items():
        columns, col_types = [table.column(c) for c in cols], [types[c] for c in cols]
        if fn == "m":
            ours = spark_hash.murmur3(columns, col_types)
            assert ours.dtype == np.int32
        elif fn == "x":
            ours = spark_hash.xxhash64(columns, col_types)
            assert ours.dtype == np.int64
        else:
            ours = spark_hash.bucket_ids(columns, col_types, 16)
            assert ours.dtype == np.int32
        theirs = spark_hashes[f"{fn}:{label}"]
        bad = [row for row, (a, b) in enumerate(zip(ours.tolist(), theirs, strict=True)) if a != b]
        if bad:
            wrong.append(
                f"{label}: {len(bad)} rows differ, first row {bad[0]}: ours {ours[bad[0]]}, "
                f"Spark {theirs[bad[0]]}, value {table.column(cols[0])[bad[0]]!r}"
            )
    assert not wrong, "\n".join(wrong)


def test_arrays_in_other_layouts_hash_the_same(table: pa.Table, spark_hashes: dict[str, list[Any]]) -> None:
    """Chunks, slices (a non-zero array offset), large_string / large_binary, a timestamp in another unit,
    strings all of one byte length (hashed without grouping)."""
    half = HALF + 3
    for row in (6 + 36, 6 + 37):  # a 36-byte string (a uuid's length) and a 37-byte one
        same = pa.array([table.column("c_string")[row].as_py()] * 3)
        assert spark_hash.murmur3([same], ["string"]).tolist() == [spark_hashes["m:c_string"][row]] * 3
        assert spark_hash.xxhash64([same], ["string"]).tolist() == [spark_hashes["x:c_string"][row]] * 3
    string, binary = table.column("c_string"), table.column("c_binary")
    chunked = pa.chunked_array([string.combine_chunks()[:half], string.combine_chunks()[half:]])
    assert spark_hash.murmur3([chunked], ["string"]).tolist() == spark_hashes["m:c_string"]
    large = [string.cast(pa.large_string()), binary.cast(pa.large_binary())]
    assert spark_hash.xxhash64(large, ["string", "binary"]).tolist() == spark_hashes["x:c_string+c_binary"]
    cols = ["c_decimal_18_4", "c_string", "c_date", "c_tinyint", "c_boolean", "c_double", "c_float"]
    sliced = [table.column(c).combine_chunks()[half:] for c in cols]
    types = ["decimal(18,4)", "string", "date", "tinyint", "boolean", "double", "float"]
    for fn, key in ((spark_hash.murmur3, "m"), (spark_hash.xxhash64, "x")):
        for col, array, type_name in zip(cols, sliced, types, strict=True):
            assert fn([array], [type_name]).tolist() == spark_hashes[f"{key}:{col}"][half:], (key, col)
    micros = table.column("c_timestamp_ntz").combine_chunks()
    rows = [i for i, v in enumerate(micros.cast(pa.int64()).to_pylist()) if v is not None and abs(v) < 9 * 10**15]
    nanos = pa.array([micros.cast(pa.int64())[i].as_py() * 1000 for i in rows], pa.int64()).view(pa.timestamp("ns"))
    expected = spark_hashes["x:c_timestamp_ntz"]
    assert spark_hash.xxhash64([nanos], ["timestamp_ntz"]).tolist() == [expected[i] for i in rows]


def test_strings_hashed_in_blocks_hash_the_same(
    table: pa.Table, spark_hashes: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are hashed in cache-sized blocks (16k); blocks of 7 rows here, so block edges fall everywhere."""
    monkeypatch.setattr(spark_hash, "_BLOCK", 7)
    for label, types in (
        ("c_string", ["string"]),
        ("c_binary", ["binary"]),
        ("c_string+c_binary", ["string", "binary"]),
    ):
        columns = [table.column(c) for c in label.split("+")]
        assert spark_hash.murmur3(columns, types).tolist() == spark_hashes[f"m:{label}"], label
        assert spark_hash.xxhash64(columns, types).tolist() == spark_hashes[f"x:{label}"], label


def test_null_rows_keep_the_seed(spark: Any) -> None:
    nulls = pa.array([None, None], pa.int32())
    names = pa.array([None, "x"], pa.string())
    theirs = spark.sql(
        "SELECT hash(CAST(NULL AS INT), CAST(NULL AS STRING)), xxhash64(CAST(NULL AS INT), 'x')"
    ).collect()[0]
    assert spark_hash.murmur3([nulls, names], ["int", "string"])[0] == theirs[0] == 42
    assert spark_hash.xxhash64([nulls, names], ["int", "string"])[1] == theirs[1]


@pytest.mark.parametrize("type_name", ["array<int>", "decimal(38,2)", "decimal(19,0)", "map<string,int>", "void"])
def test_unsupported_types_are_refused_by_name(type_name: str) -> None:
    assert not spark_hash.supported(type_name)
    with pytest.raises(ValueError, match=type_name.replace("(", r"\(").replace(")", r"\)")):
        spark_hash.murmur3([pa.array([1, 2])], [type_name])
    with pytest.raises(ValueError, match="not supported"):
        spark_hash.xxhash64([pa.array([1]), pa.array([1])], ["int", type_name])


def test_supported_names_and_arguments() -> None:
    assert all(
        spark_hash.supported(t)
        for t in ("int", "integer", "long", "decimal(18,0)", "decimal(10, 2)", "varchar(8)", "timestamp_ltz", "binary")
    )
    with pytest.raises(ValueError, match="at least one column"):
        spark_hash.xxhash64([], [])
    with pytest.raises(ValueError, match="different lengths"):
        spark_hash.murmur3([pa.array([1]), pa.array([1, 2])], ["bigint", "bigint"])
    with pytest.raises(ValueError, match="at least 1"):
        spark_hash.bucket_ids([pa.array([1])], ["bigint"], 0)
