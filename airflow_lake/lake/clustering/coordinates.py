"""Values as integers that keep their order, as Spark SQL expressions computed in the JVM: the inputs of
the curve coordinates (`keys.py`).

- `sortable_long`: a bigint whose signed order is the values' order (SAMPLE ranks these; strings are
  ranked as strings). For floating point the JVM expression (`double_bits`: log2, powers, divisions; Spark SQL
  has no doubleToLongBits) costs ~0.4 us a row, 10x a cast: SAMPLE passes the doubles themselves and maps
  them in numpy instead (`sortable_doubles`, the same bigints, ~1 ns a row).
- `direct_value`: 64 bits whose *unsigned* order is the values' order (sign flip for integers, the IEEE
  bit trick for floating point, the first 8 UTF-8 bytes for strings): a DIRECT coordinate before its
  common high bits are trimmed; `direct_coordinate` maps NULL to the largest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.spec.types import FLOAT_TYPES, INTEGER_TYPES

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import Column

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


def sortable_doubles(values: np.ndarray) -> np.ndarray:
    """`sortable_long` of doubles in numpy: the same bigints (-0.0 as 0.0, every NaN as Spark's one NaN, the
    largest), from the IEEE bits directly: non-negative values keep their bits, negative ones flip all but
    the sign bit."""
    import numpy as np

    d = np.asarray(values, dtype=np.float64)
    bits = np.where(d == 0.0, 0.0, d).view(np.int64)  # (a new array: -0.0 is 0.0)
    bits[np.isnan(d)] = 0x7FF8 << 48
    return np.asarray(np.where(bits < 0, bits ^ np.int64(~MIN_LONG), bits))


def sortable_array(values: pa.Array) -> pa.Array:
    """A floating point Arrow array as `sortable_doubles` bigints (NULL kept); any other array as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_floating(values.type):
        return values
    numbers = sortable_doubles(pc.fill_null(values, 0.0).to_numpy(zero_copy_only=False))
    return pa.array(numbers, type=pa.int64(), mask=values.is_null().to_numpy(zero_copy_only=False)
                    if values.null_count else None)


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
