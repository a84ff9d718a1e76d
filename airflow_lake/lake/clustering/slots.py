"""Send rows to chosen shuffle partitions: `df.repartition(n, col)` puts a row in partition
`pmod(murmur3(col, seed 42), n)`, Spark's `HashPartitioning` (the SQL function `hash`). For every partition
`i` we pick a bigint whose hash lands in `i` (`slot_values`); a row whose file slot is `i` is repartitioned
by that bigint. So a sampled cut of the rows into files (`keys.py`) becomes the shuffle directly: no
second sampling pass over the data (which `repartitionByRange` makes, computing the sort keys twice), and
adaptive execution keeps a repartition to a given number of partitions as it is.

`hash_long` is Spark's `Murmur3_x86_32.hashLong`; tests check it against Spark's `hash()`.
"""

from __future__ import annotations

SEED = 42  # HashPartitioning's Murmur3Hash seed
_MASK = 0xFFFFFFFF
MAX_SLOTS = 1 << 16


def _rotl(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & _MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _MASK
    k1 = _rotl(k1, 15)
    return (k1 * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def hash_long(value: int, seed: int = SEED) -> int:
    """Spark's Murmur3 hash of a bigint, as a signed 32-bit int (the SQL `hash(CAST(value AS BIGINT))`)."""
    value &= (1 << 64) - 1
    h1 = _mix_h1(seed & _MASK, _mix_k1(value & _MASK))
    h1 = _fmix(_mix_h1(h1, _mix_k1(value >> 32)), 8)
    return h1 - (1 << 32) if h1 >> 31 else h1


def slot_values(partitions: int) -> list[int]:
    """For each partition `i` of `partitions`, the smallest non-negative bigint `v` with
    `pmod(hash(v), partitions) == i`."""
    if not 1 <= partitions <= MAX_SLOTS:
        raise ValueError(f"1..{MAX_SLOTS} partitions, not {partitions}")
    found: dict[int, int] = {}
    value = 0
    while len(found) < partitions:
        found.setdefault(hash_long(value) % partitions, value)  # Python's % is pmod for a positive divisor
        value += 1
    return [found[i] for i in range(partitions)]
