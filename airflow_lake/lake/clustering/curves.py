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
    a row's choice is a mask of all ones or all zeros."""
    x = [np.array(c, dtype=np.uint64) for c in coords]
    dims = len(x)
    for q in range(bits - 1, 0, -1):
        shift, low = np.uint64(q), np.uint64((1 << q) - 1)
        for i in range(dims):
            on = np.negative((x[i] >> shift) & _ONE)  # all ones where bit q of X[i] is set
            if i == 0:  # invert the low bits of X[0] there
                x[0] ^= on & low
            else:  # ... there; elsewhere exchange the low bits of X[0] and X[i]
                t = (x[0] ^ x[i]) & low & ~on
                x[0] ^= (on & low) | t
                x[i] ^= t
    for i in range(1, dims):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros(len(x[0]), dtype=np.uint64)
    for q in range(bits - 1, 0, -1):
        t ^= np.negative((x[-1] >> np.uint64(q)) & _ONE) & np.uint64((1 << q) - 1)
    return [xi ^ t for xi in x]
