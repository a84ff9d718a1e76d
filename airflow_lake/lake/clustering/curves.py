"""Space-filling curves as Spark SQL expressions: order-preserving integers, bit interleaving (Z-order) and
the Hilbert index, all computed in the JVM (no Python per row).

A *coordinate* is an unsigned integer of `bits` bits, held in a Spark `bigint` (for 64 bits, the long's
bits read as unsigned). A curve value is a tuple of *words*: non-negative longs of at most 63 bits each,
compared in order, so a plain multi-column sort of the words is a sort along the curve.

- `direct_coordinate`: a value mapped to 64 bits that keep its order (sign flip for integers, the IEEE
  bit trick for floating point, the first 8 UTF-8 bytes for strings); NULL maps to the largest coordinate.
- `interleave`: Z-order. Level by level from the most significant bit, one bit of each coordinate in
  turn (the first coordinate's bit first).
- `hilbert_transpose`: Skilling's transform ("Programming the Hilbert curve", 2004) of the coordinates
  into the transposed Hilbert index; interleaving the result gives the Hilbert index. Each step needs the
  previous step's values more than once, so each is its own projection (Spark keeps chains of projections
  that would repeat non-trivial expressions, and generates code for the whole chain).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.types import FLOAT_TYPES, INTEGER_TYPES

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

WORD_BITS = 63  # bits per word: a non-negative long sorts the same signed or unsigned
MIN_LONG = -(1 << 63)
CURVE_TYPES = frozenset({*INTEGER_TYPES, *FLOAT_TYPES, "boolean", "date", "timestamp", "timestamp_ntz", "string"})


def signed(value: int) -> int:
    """The signed 64-bit integer with the same bits as the unsigned `value`."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _lit(value: int) -> Column:
    from pyspark.sql import functions as F

    return F.lit(signed(value)).cast("bigint")


def curve_type_ok(type_name: str) -> bool:
    """Whether a column of this type can be a curve coordinate."""
    return type_name in CURVE_TYPES or type_name.startswith("decimal(")


def sortable_long(col: Column, type_name: str) -> Column:
    """A bigint whose signed order is the order of the non-null values of `col` (exact, except decimals of
    more than 18 digits, which go through double). Strings are not handled here (see `direct_coordinate`)."""
    from pyspark.sql import functions as F

    if type_name in INTEGER_TYPES or type_name == "boolean":
        return col.cast("int").cast("bigint") if type_name == "boolean" else col.cast("bigint")
    if type_name == "date":
        return F.unix_date(col).cast("bigint")
    if type_name in ("timestamp", "timestamp_ntz"):
        # NTZ values are cast in the session time zone; execution runs with UTC, where the cast is exact.
        return F.unix_micros(col.cast("timestamp") if type_name == "timestamp_ntz" else col)
    if type_name.startswith("decimal("):
        precision, scale = (int(p) for p in type_name[len("decimal("):-1].split(","))
        if precision <= 18:
            return (col * F.lit(10 ** scale)).cast(f"decimal({precision},0)").cast("bigint")
        return double_bits(col.cast("double")).bitwiseXOR(F.lit(MIN_LONG))
    if type_name in FLOAT_TYPES:
        return double_bits(col.cast("double")).bitwiseXOR(F.lit(MIN_LONG))
    raise LakeSpecError("sort_columns", f"type {type_name} cannot be a curve coordinate.",
                        "Use integer, floating point, decimal, date, timestamp or string columns.")


def double_bits(d: Column) -> Column:
    """The IEEE 754 bits of a double turned into a bigint whose *unsigned* order is the numeric order:
    positive values get the sign bit set, negative ones have all bits flipped (-0.0 counts as 0.0, NaN is
    the largest value, as in Spark). Computed arithmetically: Spark SQL has no doubleToLongBits."""
    from pyspark.sql import functions as F

    a = F.abs(d)
    e0 = F.floor(F.log2(a)).cast("int")
    # log2 may be off by one next to powers of two: correct it with exact powers of two
    e = F.when(F.pow(F.lit(2.0), e0) > a, e0 - 1).when(F.pow(F.lit(2.0), e0 + 1) <= a, e0 + 1).otherwise(e0)
    normal = F.shiftleft((e + 1023).cast("bigint"), 52).bitwiseOR(
        ((a / F.pow(F.lit(2.0), e) - F.lit(1.0)) * F.lit(float(1 << 52))).cast("bigint"))
    subnormal = (a * F.lit(2.0 ** 537) * F.lit(2.0 ** 537)).cast("bigint")  # a / 2**-1074, exact
    bits = (F.when(F.isnan(d), F.lit(0x7FF8 << 48))
            .when(a == F.lit(float("inf")), F.lit(0x7FF << 52))
            .when(a == F.lit(0.0), F.lit(0))
            .when(a < F.lit(2.0 ** -1022), subnormal)
            .otherwise(normal)).cast("bigint")
    signed_bits = bits.bitwiseOR(F.lit(MIN_LONG))
    return F.when(d < F.lit(0.0), F.bitwise_not(signed_bits)).otherwise(signed_bits)


def direct_value(col: Column, type_name: str) -> Column:
    """64 bits whose unsigned order is the order of the values (NULL stays NULL): integers with the sign bit
    flipped, floating point by the IEEE trick, strings by their first 8 UTF-8 bytes."""
    from pyspark.sql import functions as F

    if type_name == "string":
        # first 8 bytes of the UTF-8 text, big-endian, zero-padded: conv to base -10 reads 16 hex digits as
        # a signed 64-bit number with those bits
        head = F.rpad(F.substring(F.hex(F.substring(col, 1, 8)), 1, 16), 16, "0")
        return F.conv(head, 16, -10).cast("bigint")
    return sortable_long(col, type_name).bitwiseXOR(F.lit(MIN_LONG))


def direct_coordinate(col: Column, type_name: str) -> Column:
    """64-bit coordinate of a value by direct mapping (`direct_value`; NULL is the largest)."""
    from pyspark.sql import functions as F

    return F.coalesce(direct_value(col, type_name), F.lit(-1).cast("bigint"))


def common_bits(low: int, high: int) -> int:
    """Bits that vary between two unsigned values: every value between them has the same bits above."""
    return (low ^ high).bit_length()


def trimmed(value: Column, bits: int) -> Column:
    """A coordinate cut to its low `bits` bits (the bits above are the same in every row); NULL is the
    largest coordinate."""
    from pyspark.sql import functions as F

    mask = (1 << bits) - 1
    return F.coalesce(value.bitwiseAND(_lit(mask)), _lit(mask))


def interleave(coords: Sequence[Column], bits: int) -> list[Column]:
    """Z-order words of `coords` (each an unsigned `bits`-bit value in a bigint): the bits, most significant
    level first and the first coordinate first within a level, packed into words of at most 63 bits.

    Each output bit is its own small term reading a coordinate column once, so the expression grows linearly
    with the bits (the "magic numbers" way reads its input twice per step: an expression tree that doubles
    per step, and generated code too big for the JIT)."""
    from pyspark.sql import functions as F

    dims = len(coords)
    if dims == 0 or not 1 <= bits <= 64:
        raise ValueError(f"interleave needs coordinates and 1..64 bits, got {dims} and {bits}")
    per_word = WORD_BITS // dims  # levels per word
    words = []
    top = bits
    while top > 0:
        levels = min(per_word, top)
        low = top - levels
        terms = []
        for level in range(top - 1, low - 1, -1):  # most significant level first
            for c, coord in enumerate(coords):
                position = (level - low) * dims + (dims - 1 - c)
                bit = F.shiftrightunsigned(coord, level).bitwiseAND(F.lit(1).cast("bigint"))
                terms.append(F.shiftleft(bit, position) if position else bit)
        words.append(reduce(lambda a, b: a.bitwiseOR(b), terms))
        top = low
    return words


def hilbert_steps(names: Sequence[str], bits: int) -> list[dict[str, str]]:
    """Skilling's transform as a list of projections {column: SQL expression}, each over the previous one's
    output, one per sub-step. Only our own column names and integer literals appear in the SQL. (Merging a
    level into one projection by substitution made the generated code too big for the JIT: 11x slower.)"""
    dims = len(names)

    def lit(value: int) -> str:
        return f"{signed(value)}L"

    steps: list[dict[str, str]] = []
    x0 = names[0]
    q = 1 << (bits - 1)
    while q > 1:
        p = q - 1
        current = {name: name for name in names}  # the level's expressions so far, over its input columns
        for i in range(dims):
            a, b = f"({current[x0]})", f"({current[names[i]]})"
            if i == 0:  # invert the low bits of X[0] where bit q of X[0] is set
                current[x0] = f"CASE WHEN ({a} & {lit(q)}) != 0 THEN {a} ^ {lit(p)} ELSE {a} END"
            else:  # ... where bit q of X[i] is set; else exchange the low bits of X[0] and X[i]
                t = f"(({a} ^ {b}) & {lit(p)})"
                current[x0] = f"CASE WHEN ({b} & {lit(q)}) != 0 THEN {a} ^ {lit(p)} ELSE {a} ^ {t} END"
                current[names[i]] = f"CASE WHEN ({b} & {lit(q)}) != 0 THEN {b} ELSE {b} ^ {t} END"
            steps.append({k: v for k, v in current.items() if v != k})  # one projection per sub-step
            current = {name: name for name in names}
        q >>= 1
    gray = {names[0]: names[0]}
    for i in range(1, dims):  # Gray encode: X[i] ^= X[i-1] (the new X[i-1]), as one projection
        gray[names[i]] = " ^ ".join(names[:i + 1])
    steps.append({k: v for k, v in gray.items() if v != k})
    last = names[-1]
    terms = [f"CASE WHEN ({last} & {lit(1 << k)}) != 0 THEN {lit((1 << k) - 1)} ELSE 0L END"
             for k in range(bits - 1, 0, -1)]
    if terms:
        t_all = "(" + " ^ ".join(terms) + ")"
        steps.append({name: f"{name} ^ {t_all}" for name in names})
    return [step for step in steps if step]


def hilbert_transpose(df: DataFrame, names: Sequence[str], bits: int) -> DataFrame:
    """`df` with the coordinate columns `names` (plain identifiers) replaced by their transposed Hilbert
    index (Skilling); `interleave` of the result is the Hilbert index."""
    from pyspark.sql import functions as F

    for step in hilbert_steps(names, bits):
        df = df.withColumns({name: F.expr(sql) for name, sql in step.items()})
    return df
