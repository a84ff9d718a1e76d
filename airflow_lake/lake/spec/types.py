"""Column types: parsing Spark SQL type names and converting values for stats and partition paths."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from typing import Any

from airflow_lake.lake.errors import LakeSpecError

# Canonical Spark SQL type names (as `DataType.simpleString()` prints them) and their aliases.
_ALIASES: dict[str, str] = {
    "boolean": "boolean",
    "bool": "boolean",
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "varchar": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_VARCHAR = re.compile(r"^(?:var)?char\s*\(\s*\d+\s*\)$")
_COMPLEX = re.compile(r"^(?:array|map|struct|variant|interval)\b")
# A DATE literal: exactly ISO `YYYY-MM-DD` (Python 3.11 also parses `20240101`, which Spark does not).
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)

INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})
FLOAT_TYPES = frozenset({"float", "double"})
# Types a partition column may have: each value must print to a path segment and parse back exactly.
PARTITION_TYPES = frozenset({"string", "date", "boolean", *INTEGER_TYPES})
# Types whose min/max are kept per file (binary is compared byte-wise by nobody, so it is left out).
STATS_TYPES = frozenset(
    {"string", "date", "timestamp", "timestamp_ntz", "boolean", *INTEGER_TYPES, *FLOAT_TYPES}
)
STRING_STATS_PREFIX = 64  # longer strings keep a truncated min and no max


def normalize_type(name: str, field: str = "type") -> str:
    """Return the canonical Spark SQL name of a type, or raise a spec error naming the field."""
    text = " ".join(str(name).strip().lower().split())
    if text in _ALIASES:
        return _ALIASES[text]
    match = _DECIMAL.match(text)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise LakeSpecError(field, f"decimal({precision},{scale}) is out of range.",
                                "Use decimal(p,s) with 1 <= p <= 38 and s <= p.")
        return f"decimal({precision},{scale})"
    if text == "decimal":
        return "decimal(10,0)"
    if _VARCHAR.match(text):
        return "string"
    if _COMPLEX.match(text):
        raise LakeSpecError(field, f"complex column type {name!r} is not supported.",
                            "Use scalar columns (e.g. one column per map key, or the value as a JSON string).")
    raise LakeSpecError(
        field,
        f"unsupported column type {name!r}.",
        "Use one of boolean, tinyint, smallint, int, bigint, float, double, decimal(p,s), string, "
        "binary, date, timestamp, timestamp_ntz.",
    )


def is_decimal(type_name: str) -> bool:
    """True for a decimal(p,s) type name."""
    return type_name.startswith("decimal(")


def stats_value(type_name: str, value: Any) -> Any:
    """Encode a Python value of a column for JSON stats (None if it cannot be kept)."""
    if value is None:
        return None
    if type_name in INTEGER_TYPES:
        return int(value)
    if type_name in FLOAT_TYPES:
        number = float(value)
        return None if math.isnan(number) else number  # NaN is not comparable
    if type_name == "boolean":
        return bool(value)
    if type_name == "string":
        return str(value)
    if type_name == "date":
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if type_name in ("timestamp", "timestamp_ntz"):
        return _timestamp_micros(value)
    return None


_EARLIEST_MICROS, _LATEST_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999


def _timestamp_micros(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return int((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    return int(value)


def coerce_literal(type_name: str, value: Any, field: str) -> Any:
    """Convert a filter or partition literal to the comparable form used in stats."""
    if value is None:
        return None
    try:
        if type_name in INTEGER_TYPES:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if type_name in FLOAT_TYPES:
            return float(value)
        if type_name == "boolean":
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ValueError(value)
                return value.lower() == "true"
            return bool(value)
        if type_name == "string":
            if not isinstance(value, str):
                raise ValueError(value)
            return value
        if type_name == "date":
            if isinstance(value, dt.datetime):  # Spark compares it as a timestamp; its ISO text skips files wrongly
                raise ValueError(value)
            if isinstance(value, dt.date):
                return value.isoformat()
            if not isinstance(value, str) or not _ISO_DATE.match(value):
                raise ValueError(value)
            return dt.date.fromisoformat(value).isoformat()
        if type_name in ("timestamp", "timestamp_ntz"):
            if isinstance(value, str):
                value = dt.datetime.fromisoformat(value)
            micros = _timestamp_micros(value)
            if not _EARLIEST_MICROS <= micros <= _LATEST_MICROS:  # no timestamp holds it (years 1 to 9999)
                raise ValueError(value)
            return micros
        if is_decimal(type_name):
            return decimal.Decimal(str(value))
    except (TypeError, ValueError, ArithmeticError) as err:
        hint = "an ISO date such as '2024-01-01'" if type_name == "date" else f"a {type_name} literal"
        raise LakeSpecError(field, f"value {value!r} is not a valid {type_name}.", f"Give {hint}.") from err
    raise LakeSpecError(field, f"values of type {type_name} cannot be compared.",
                        "Filter on another column.")


_INTEGER_TEXT = re.compile(r"^[+-]?[0-9]+$", re.ASCII)
_INTEGER_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


def exact_value(type_name: str, value: Any, field: str) -> Any:
    """`value` (as JSON or a template gives it: often text) as the Python value of a `type_name` column, when the
    conversion is exact: the text "42" is 42 for an integer column; "4.0", "1e3", "abc", 4.5, True or a number
    out of the type's range are refused (`LakeSpecError` naming `field`), never rounded or read another way."""
    if value is None:
        return None

    def refuse(expected: str) -> LakeSpecError:
        return LakeSpecError(field, f"{value!r} is not {expected} (the column is {type_name}).",
                             f"Give {expected}, e.g. {_EXAMPLES.get(type_name, DECIMAL_EXAMPLE)}.")

    if type_name in INTEGER_TYPES:
        if isinstance(value, str) and _INTEGER_TEXT.match(value.strip()) and len(value) < 40:
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse("a whole number written as digits")
        bits = _INTEGER_BITS[type_name]
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise refuse(f"a whole number from {-(2 ** (bits - 1))} to {2 ** (bits - 1) - 1}")
        return value
    if type_name == "string":
        if not isinstance(value, str):
            raise refuse("text (a JSON string)")
        return value
    if type_name == "boolean":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise refuse("true or false")
        return value
    if type_name == "date":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        if not isinstance(value, str) or not _ISO_DATE.match(value.strip()):
            raise refuse("an ISO date")
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError as err:
            raise refuse("an ISO date") from err
    if type_name in ("timestamp", "timestamp_ntz"):
        if isinstance(value, dt.datetime):
            return value
        if not isinstance(value, str):
            raise refuse("an ISO date and time")
        try:
            return dt.datetime.fromisoformat(value.strip())
        except ValueError as err:
            raise refuse("an ISO date and time") from err
    if is_decimal(type_name):
        precision, scale = decimal_parts(type_name)
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise refuse(f"a decimal number as text with at most {scale} digit(s) after the point")
        try:
            number = decimal.Decimal(value.strip() if isinstance(value, str) else value)
        except ArithmeticError as err:
            raise refuse("a decimal number as text") from err
        if not number.is_finite() or "e" in str(value).lower():
            raise refuse("a decimal number written out in digits")
        exponent = number.as_tuple().exponent
        assert isinstance(exponent, int)
        if -exponent > scale and number != number.quantize(decimal.Decimal(1).scaleb(-scale)):
            raise refuse(f"a decimal number with at most {scale} digit(s) after the point")
        quantized = number.quantize(decimal.Decimal(1).scaleb(-scale))
        if len(quantized.as_tuple().digits) > precision:
            raise refuse(f"a decimal number of at most {precision} digit(s)")
        return quantized
    raise LakeSpecError(field, f"values of type {type_name} cannot be given here.", "Use another column.")


_EXAMPLES = {"tinyint": "42", "smallint": "42", "int": "42", "bigint": "42", "string": '"abc"',
             "boolean": "true", "date": '"2024-01-01"', "timestamp": '"2024-01-01T10:00:00"',
             "timestamp_ntz": '"2024-01-01T10:00:00"'}
DECIMAL_EXAMPLE = '"12.34"'


# Integer types by width: each reads the narrower ones' values unchanged.
_INTEGER_ORDER = ("tinyint", "smallint", "int", "bigint")
# Digits left of the point each integer type needs, for widening to a decimal.
_INTEGER_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}


def decimal_parts(type_name: str) -> tuple[int, int]:
    """(precision, scale) of a decimal(p,s) type name."""
    precision, scale = type_name[len("decimal("):-1].split(",")
    return int(precision), int(scale)


def widening_problem(old: str, new: str) -> str | None:
    """Why a column of type `old` cannot become `new` with its files left as they are (None: it can).

    Allowed are the widenings Spark 4's Parquet readers (vectorized and not) apply to old files themselves,
    each checked on real files (tests/lake/spec/test_widening_spark.py): a wider integer, an integer or float
    to double, a decimal with no fewer digits on either side of the point, an integer to a decimal that holds
    it, a date to timestamp_ntz.
    """
    if old == new:
        return f"the column is already {new}"
    if old in _INTEGER_ORDER and new in _INTEGER_ORDER:
        if _INTEGER_ORDER.index(new) > _INTEGER_ORDER.index(old):
            return None
        return f"{new} is narrower than {old}: values would not fit"
    if new == "double" and old in ("tinyint", "smallint", "int", "float"):
        return None
    if is_decimal(old) and is_decimal(new):
        (p, s), (p2, s2) = decimal_parts(old), decimal_parts(new)
        if p2 - s2 >= p - s and s2 >= s:
            return None
        return (f"{new} keeps {p2 - s2} digit(s) before the point and {s2} after it, fewer than {old} "
                f"({p - s} and {s}): values would be cut")
    if old in _INTEGER_DIGITS and is_decimal(new) and old != "bigint":
        p2, s2 = decimal_parts(new)
        if p2 - s2 >= _INTEGER_DIGITS[old]:
            return None
        return f"{new} keeps {p2 - s2} digit(s) before the point; {old} needs {_INTEGER_DIGITS[old]}"
    if old == "date" and new == "timestamp":
        return ("Spark cannot read the DATE values of the table's files as TIMESTAMP (with the session time zone); "
                "it reads them as TIMESTAMP_NTZ (midnight, no time zone)")
    if old == "date" and new == "timestamp_ntz":
        return None
    return f"{old} does not widen to {new}"
