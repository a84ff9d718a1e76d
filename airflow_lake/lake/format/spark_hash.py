"""Spark's row hashes over Arrow columns, in numpy: the SQL `hash(c1, c2, ...)` (Murmur3Hash) and
`xxhash64(c1, c2, ...)` (XxHash64), both with seed 42, and the bucket id Spark gives a row from them.

A writer without Spark (pyarrow in the Airflow task's own process) must put every row in the bucket Spark's
bucketed write would (`pmod(hash(bucket columns), n)`, `HashPartitioning`) and fingerprint an upsert as
Spark does (`upsert.versions.fingerprint_aggregates`: `xxhash64(columns..., version)`), so that a retry
through either engine is recognised as the same data. So this follows Spark's `HashExpression`
(`catalyst/expressions/hash.scala`), `Murmur3_x86_32.java` and `XXH64.java` bit for bit:

- the columns chain: each column's hash is seeded with the running hash of the columns before it, and a
  NULL leaves the running hash as it is;
- boolean, tinyint, smallint, int and date hash as a 32-bit int (`hashInt`; a boolean as 1 / 0), bigint,
  timestamp (microseconds since the epoch) and timestamp_ntz as a 64-bit long (`hashLong`);
- float and double hash their IEEE bits, with -0.0 as 0.0 and every NaN as Java's canonical NaN
  (`floatToIntBits`, `doubleToLongBits`); a decimal of precision <= 18 hashes its unscaled long;
- string (UTF-8) and binary hash their bytes (`hashUnsafeBytes`): Murmur3 mixes the 4-byte words and then
  each tail byte alone, as a SIGNED byte (Spark's legacy, not the reference Murmur3); XXH64 is the standard
  one, little-endian.

Decimals wider than 18 digits (hashed through `BigInteger.toByteArray`) and nested types are not supported.
Everything is vectorized over the rows. Strings are sorted longest first, so the rows that have a k-th word
are a prefix: each word position is one step over that prefix, its words gathered with one fancy index from
an unaligned view of the value buffer (steps: the longest string's words, not one per row or per length).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.types import decimal_parts, normalize_type

SEED = 42  # the seed of Spark's SQL `hash`, `xxhash64` and `HashPartitioning`
MAX_LONG_DIGITS = 18  # Spark's Decimal.MAX_LONG_DIGITS: up to here a decimal hashes as its unscaled long

_INT_TYPES = frozenset({"boolean", "tinyint", "smallint", "int", "date"})
_LONG_TYPES = frozenset({"bigint", "timestamp", "timestamp_ntz"})
_BYTES_TYPES = frozenset({"string", "binary"})
SUPPORTED: frozenset[str] = frozenset(
    {
        *_INT_TYPES,
        *_LONG_TYPES,
        *_BYTES_TYPES,
        "float",
        "double",
        *(f"decimal({p},{s})" for p in range(1, MAX_LONG_DIGITS + 1) for s in range(p + 1)),
    }
)

_U32 = np.uint32
_U64 = np.uint64
_Array: TypeAlias = pa.Array | pa.ChunkedArray
# Rows hashed at once: a block's temporaries stay in the CPU's cache (all 100k rows at once ran ~1.3x slower)
_BLOCK = 16_384
_FLOAT_NAN_BITS = 0x7FC00000  # Java's Float.floatToIntBits(NaN)
_DOUBLE_NAN_BITS = 0x7FF8000000000000  # Java's Double.doubleToLongBits(NaN)


def supported(type_name: str) -> bool:
    """Whether a column of this type (a table spec's type name) can be hashed here as Spark hashes it."""
    try:
        return normalize_type(type_name) in SUPPORTED
    except LakeSpecError:
        return False


def murmur3(columns: Sequence[_Array], types: Sequence[str], seed: int = SEED) -> np.ndarray:
    """Spark's `hash(c1, c2, ...)` of each row, as int32 (a row of NULLs hashes to the seed)."""
    hashes = np.full(_rows(columns, types), seed & 0xFFFFFFFF, dtype=_U32)
    for array, kind in _columns(columns, types):
        _chain(hashes, array, kind, _Murmur3)
    return hashes.view(np.int32)


def xxhash64(columns: Sequence[_Array], types: Sequence[str], seed: int = SEED) -> np.ndarray:
    """Spark's `xxhash64(c1, c2, ...)` of each row, as int64 (a row of NULLs hashes to the seed)."""
    hashes = np.full(_rows(columns, types), seed & 0xFFFFFFFFFFFFFFFF, dtype=_U64)
    for array, kind in _columns(columns, types):
        _chain(hashes, array, kind, _XxHash64)
    return hashes.view(np.int64)


def bucket_ids(columns: Sequence[_Array], types: Sequence[str], count: int) -> np.ndarray:
    """The bucket Spark's bucketed write puts each row in: `pmod(hash(c1, c2, ...), count)`, int32."""
    if count < 1:
        raise ValueError(f"a bucket count is at least 1, not {count!r}")
    # numpy's % takes the divisor's sign, as pmod does for a positive divisor
    return (murmur3(columns, types).astype(np.int64) % count).astype(np.int32)


# --- the columns ------------------------------------------------------------------------------------------------


def _rows(columns: Sequence[_Array], types: Sequence[str]) -> int:
    if len(columns) != len(types):
        raise ValueError(f"{len(columns)} columns but {len(types)} types")
    if not columns:
        raise ValueError("Spark's hash functions take at least one column")
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise ValueError(f"columns of different lengths: {sorted(lengths)}")
    return lengths.pop()


def _kind(type_name: str) -> str:
    """The canonical type name, or a ValueError naming the type (checked for every column before any work)."""
    try:
        name = normalize_type(type_name)
    except LakeSpecError as err:
        raise ValueError(f"Spark's hash of a {type_name!r} column is not supported here: {err}") from err
    if name not in SUPPORTED:
        raise ValueError(
            f"Spark's hash of a {type_name!r} column is not supported here (decimals up to "
            f"{MAX_LONG_DIGITS} digits and the scalar types {', '.join(sorted(t for t in SUPPORTED if '(' not in t))})"
        )
    return name


def _columns(columns: Sequence[_Array], types: Sequence[str]) -> Iterator[tuple[pa.Array, str]]:
    kinds = [_kind(t) for t in types]
    for column, kind in zip(columns, kinds, strict=True):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        yield _as_table_type(array, kind), kind


def _as_table_type(array: pa.Array, kind: str) -> pa.Array:
    """The array in the Arrow type whose buffers we read for `kind` (a cast only when it arrives in another)."""
    t = array.type
    if kind in _BYTES_TYPES:
        ok = (
            pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
        )
        return array if ok else array.cast(pa.string() if kind == "string" else pa.binary())
    if kind in ("timestamp", "timestamp_ntz"):
        # the stored int64 is microseconds since the epoch (UTC) for any time zone
        return array if pa.types.is_timestamp(t) and t.unit == "us" else array.cast(pa.timestamp("us", t.tz))
    if kind.startswith("decimal("):
        precision, scale = decimal_parts(kind)
        return array if t == pa.decimal128(precision, scale) else array.cast(pa.decimal128(precision, scale))
    wanted = {
        "boolean": pa.bool_(),
        "tinyint": pa.int8(),
        "smallint": pa.int16(),
        "int": pa.int32(),
        "date": pa.date32(),
        "bigint": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
    }[kind]
    return array if t == wanted else array.cast(wanted)


def _valid(array: pa.Array) -> np.ndarray | None:
    """The rows that are not NULL (None: all of them)."""
    if array.null_count == 0:
        return None
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _fixed(array: pa.Array, dtype: str) -> np.ndarray:
    """The value buffer of a fixed-width array as numpy, without a copy (NULL slots hold anything)."""
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset : array.offset + len(array)]


def _int_values(array: pa.Array, kind: str) -> np.ndarray:
    """What `hashInt` gets: the value sign-extended to 32 bits, as uint32."""
    if kind == "boolean":
        bits = pc.fill_null(array, False).to_numpy(zero_copy_only=False)
        return np.asarray(bits, dtype=_U32)
    dtype = {"tinyint": "<i1", "smallint": "<i2", "int": "<i4", "date": "<i4"}[kind]
    return _fixed(array, dtype).astype(np.int32).view(_U32)


def _long_values(array: pa.Array, kind: str) -> np.ndarray:
    """What `hashLong` gets, as uint64: the long itself, a decimal's unscaled long."""
    if kind.startswith("decimal("):
        # decimal128 is 16 little-endian bytes of two's complement; up to 18 digits the low 8 are the long
        words = np.frombuffer(array.buffers()[1], dtype="<u8")
        return words[2 * array.offset : 2 * (array.offset + len(array)) : 2]
    return _fixed(array, "<i8").view(_U64)


def _float_bits(array: pa.Array) -> np.ndarray:
    values = _fixed(array, "<f4")
    bits = np.where(values == 0, np.float32(0), values).view(_U32)  # -0.0 hashes as 0.0
    return np.where(np.isnan(values), _U32(_FLOAT_NAN_BITS), bits)


def _double_bits(array: pa.Array) -> np.ndarray:
    values = _fixed(array, "<f8")
    bits = np.where(values == 0, np.float64(0), values).view(_U64)
    return np.where(np.isnan(values), _U64(_DOUBLE_NAN_BITS), bits)


class _Bytes:
    """A string or binary array's bytes, read as words at any byte position (unaligned views of a padded copy)."""

    def __init__(self, array: pa.Array) -> None:
        large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
        _, offsets_buffer, data_buffer = array.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype="<i8" if large else "<i4")
        offsets = offsets[array.offset : array.offset + len(array) + 1].astype(np.int64)
        self.starts = offsets[:-1]
        self.lengths = np.diff(offsets)
        end = int(offsets[-1]) if len(offsets) else 0
        data = np.zeros(end + 8, dtype=np.uint8)  # 8 bytes of padding: a word view never reads past the end
        if data_buffer is not None and end:
            data[:end] = np.frombuffer(data_buffer, dtype=np.uint8)[:end]
        self.u8 = data
        self.u32 = np.ndarray((end + 5,), dtype="<u4", buffer=data, strides=(1,))
        self.u64 = np.ndarray((end + 1,), dtype="<u8", buffer=data, strides=(1,))

    def longest_first(self, valid: np.ndarray | None) -> np.ndarray:
        """The non-NULL rows, longest first: then the rows that still have a k-th word are a prefix."""
        rows = np.arange(len(self.lengths)) if valid is None else np.flatnonzero(valid)
        if not len(rows):
            return rows
        lengths = self.lengths[rows]
        shortest, longest = int(lengths.min()), int(lengths.max())
        if shortest == longest:  # keys of one width (uuids, codes): no sort
            return rows
        if longest - shortest < 1 << 16:  # a stable sort of 16-bit keys is numpy's radix sort
            return rows[np.argsort((longest - lengths).astype(np.uint16), kind="stable")]
        return rows[np.argsort(-lengths, kind="stable")]


def _prefixes(counts: np.ndarray, steps: int) -> np.ndarray:
    """For counts sorted descending: how many of them exceed 0, 1, ..., steps - 1."""
    return np.searchsorted(-counts, -np.arange(steps), side="left")


def _groups(keys: np.ndarray, sorted_from: int | None = None) -> Iterator[tuple[int, slice | np.ndarray]]:
    """(key, the positions holding it) for small non-negative keys (a tail's length: < 32). From `sorted_from`
    on the keys are in descending order: there each key's positions are a run, given as a slice (no copy)."""
    cut = len(keys) if sorted_from is None else sorted_from
    head = keys[:cut]
    if len(head) and int(head.min()) == int(head.max()):
        yield int(head[0]), slice(0, cut)
    elif len(head):
        small = head.astype(np.uint8)
        order = np.argsort(small, kind="stable")  # numpy's radix sort for 8-bit keys
        for part in np.split(order, np.flatnonzero(np.diff(small[order])) + 1):
            yield int(keys[part[0]]), part
    edges = [cut, *(cut + np.flatnonzero(np.diff(keys[cut:])) + 1).tolist(), len(keys)]
    for start, end in itertools.pairwise(edges):
        if end > start:
            yield int(keys[start]), slice(start, end)


# --- the hash functions -----------------------------------------------------------------------------------------


def _rotl32(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U32(r)) | (x >> _U32(32 - r))


def _rotl64(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))


class _Murmur3:
    """`Murmur3_x86_32` over uint32 arrays (numpy's unsigned arithmetic wraps as Java's int does)."""

    C1, C2 = _U32(0xCC9E2D51), _U32(0x1B873593)

    @classmethod
    def mix_k1(cls, k1: np.ndarray) -> np.ndarray:
        return _rotl32(k1 * cls.C1, 15) * cls.C2

    @staticmethod
    def mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
        return _rotl32(h1 ^ k1, 13) * _U32(5) + _U32(0xE6546B64)

    @staticmethod
    def fmix(h1: np.ndarray, length: np.ndarray | int) -> np.ndarray:
        h1 = h1 ^ (length.astype(_U32) if isinstance(length, np.ndarray) else _U32(length))
        h1 ^= h1 >> _U32(16)
        h1 *= _U32(0x85EBCA6B)
        h1 ^= h1 >> _U32(13)
        h1 *= _U32(0xC2B2AE35)
        return h1 ^ (h1 >> _U32(16))

    @classmethod
    def hash_int(cls, value: np.ndarray, seed: np.ndarray) -> np.ndarray:
        return cls.fmix(cls.mix_h1(seed, cls.mix_k1(value)), 4)

    @classmethod
    def hash_long(cls, value: np.ndarray, seed: np.ndarray) -> np.ndarray:
        low = (value & _U64(0xFFFFFFFF)).astype(_U32)
        high = (value >> _U64(32)).astype(_U32)
        return cls.fmix(cls.mix_h1(cls.mix_h1(seed, cls.mix_k1(low)), cls.mix_k1(high)), 8)

    @classmethod
    def hash_bytes(cls, source: _Bytes, rows: np.ndarray, seed: np.ndarray) -> np.ndarray:
        """`hashUnsafeBytes` of `rows` (longest first) with their seeds: each 4-byte word position in one step
        over the rows that have it (a prefix), then the 0-3 tail bytes by their count."""
        starts, lengths = source.starts[rows], source.lengths[rows]
        h1 = seed
        words = lengths >> 2
        for at, count in enumerate(_prefixes(words, int(words[0]) if len(words) else 0).tolist()):
            if count == len(rows):  # every row: no copy back
                h1 = cls.mix_h1(h1, cls.mix_k1(source.u32[starts + 4 * at]))
            else:  # a prefix, in place (in our own array, not the caller's seeds)
                h1 = h1.copy() if h1 is seed else h1
                h1[:count] = cls.mix_h1(h1[:count], cls.mix_k1(source.u32[starts[:count] + 4 * at]))
        tail_starts = starts + 4 * words
        for tail, part in _groups(lengths & 3):  # Spark's legacy tail: one signed byte at a time
            if tail:
                h1 = h1.copy() if h1 is seed else h1
                at, h = tail_starts[part], h1[part]
                for i in range(tail):
                    h = cls.mix_h1(h, cls.mix_k1(source.u8[at + i].view(np.int8).astype(np.int32).view(_U32)))
                h1[part] = h
        return cls.fmix(h1, lengths)


class _XxHash64:
    """`XXH64` over uint64 arrays."""

    P1, P2, P3 = _U64(0x9E3779B185EBCA87), _U64(0xC2B2AE3D27D4EB4F), _U64(0x165667B19E3779F9)
    P4, P5 = _U64(0x85EBCA77C2B2AE63), _U64(0x27D4EB2F165667C5)

    @classmethod
    def fmix(cls, h: np.ndarray) -> np.ndarray:
        h = h ^ (h >> _U64(33))
        h *= cls.P2
        h ^= h >> _U64(29)
        h *= cls.P3
        out: np.ndarray = h ^ (h >> _U64(32))
        return out

    @classmethod
    def hash_int(cls, value: np.ndarray, seed: np.ndarray) -> np.ndarray:
        h = seed + cls.P5 + _U64(4)
        h ^= value.astype(_U64) * cls.P1  # (input & 0xFFFFFFFFL): the uint32 widened without its sign
        return cls.fmix(_rotl64(h, 23) * cls.P2 + cls.P3)

    @classmethod
    def hash_long(cls, value: np.ndarray, seed: np.ndarray) -> np.ndarray:
        h = seed + cls.P5 + _U64(8)
        h ^= _rotl64(value * cls.P2, 31) * cls.P1
        return cls.fmix(_rotl64(h, 27) * cls.P1 + cls.P4)

    @classmethod
    def _round(cls, acc: np.ndarray, word: np.ndarray) -> np.ndarray:
        return _rotl64(acc + word * cls.P2, 31) * cls.P1

    @classmethod
    def _mix(cls, word: np.ndarray) -> np.ndarray:
        return _rotl64(word * cls.P2, 31) * cls.P1

    @classmethod
    def _tail(cls, source: _Bytes, at: np.ndarray, tail: int, h: np.ndarray) -> np.ndarray:
        """What follows the stripes: `tail` (< 32) bytes at `at`, as 8-byte words, a 4-byte word, bytes."""
        done = 0
        while done + 8 <= tail:
            h = _rotl64(h ^ cls._mix(source.u64[at + done]), 27) * cls.P1 + cls.P4
            done += 8
        if done + 4 <= tail:
            h = _rotl64(h ^ source.u32[at + done].astype(_U64) * cls.P1, 23) * cls.P2 + cls.P3
            done += 4
        for i in range(done, tail):
            h = _rotl64(h ^ source.u8[at + i].astype(_U64) * cls.P5, 11) * cls.P1
        return h

    @classmethod
    def hash_bytes(cls, source: _Bytes, rows: np.ndarray, seed: np.ndarray) -> np.ndarray:
        """`hashUnsafeBytes` of `rows` (longest first) with their seeds: each 32-byte stripe position in one step
        over the rows that have it (a prefix), then the rest by its length (< 32: words, a 4-byte word, bytes)."""
        starts, lengths = source.starts[rows], source.lengths[rows]
        h = seed + cls.P5
        stripes = lengths >> 5
        striped = int(np.count_nonzero(stripes))  # rows of 32 bytes or more: a prefix
        if striped:
            s = seed[:striped]
            v1, v2, v3, v4 = s + cls.P1 + cls.P2, s + cls.P2, s.copy(), s - cls.P1
            for at, count in enumerate(_prefixes(stripes[:striped], int(stripes[0])).tolist()):
                base = starts[:count] + 32 * at
                if count < striped:
                    v1[:count] = cls._round(v1[:count], source.u64[base])
                    v2[:count] = cls._round(v2[:count], source.u64[base + 8])
                    v3[:count] = cls._round(v3[:count], source.u64[base + 16])
                    v4[:count] = cls._round(v4[:count], source.u64[base + 24])
                else:  # every striped row: no copy back
                    v1, v2 = cls._round(v1, source.u64[base]), cls._round(v2, source.u64[base + 8])
                    v3, v4 = cls._round(v3, source.u64[base + 16]), cls._round(v4, source.u64[base + 24])
            merged = _rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)
            for v in (v1, v2, v3, v4):
                merged = (merged ^ cls._mix(v)) * cls.P1 + cls.P4
            h[:striped] = merged
        h += lengths.astype(_U64)
        tail_starts = starts + 32 * stripes
        # the same steps for every row of one tail length; past the striped rows the tail is the whole string,
        # so the tails are in (descending) order there
        for tail, part in _groups(lengths & 31, striped):
            if tail:
                h[part] = cls._tail(source, tail_starts[part], tail, h[part])
        return cls.fmix(h)


_Hash: TypeAlias = type[_Murmur3] | type[_XxHash64]


def _chain(hashes: np.ndarray, array: pa.Array, kind: str, fn: _Hash) -> None:
    """Fold one column into the running hashes, in place; NULL rows keep theirs."""
    valid = _valid(array)
    wide = _U32 if fn is _Murmur3 else _U64
    if kind in _BYTES_TYPES:
        source = _Bytes(array)
        rows = source.longest_first(valid)
        for at in range(0, len(rows), _BLOCK):  # each block is longest first too
            block = rows[at : at + _BLOCK]
            hashes[block] = fn.hash_bytes(source, block, hashes[block])
        return
    hash_of: Callable[[np.ndarray, np.ndarray], np.ndarray]
    if kind in _INT_TYPES:
        values, hash_of = _int_values(array, kind), fn.hash_int
    elif kind == "float":
        values, hash_of = _float_bits(array), fn.hash_int
    elif kind == "double":
        values, hash_of = _double_bits(array), fn.hash_long
    else:  # bigint, timestamps, decimals up to 18 digits
        values, hash_of = _long_values(array, kind), fn.hash_long
    hashed = hash_of(values, hashes).astype(wide, copy=False)
    if valid is None:
        hashes[:] = hashed
    else:
        np.copyto(hashes, hashed, where=valid)
