"""Spark SQL text built from names and values safely: quoted identifiers, literals that need no escaping, type
names checked against the canonical ones.

Projections with many columns are built as SQL text and parsed by Spark in one call (`selectExpr`, `expr`):
built from DataFrame functions, every `col`, `when`, `cast` and `alias` is a call into the JVM (an upsert's
projections took ~1,250 of them, a quarter of a second on a quiet driver). Whatever comes from a user (a column
name, a null value) goes in only through these functions: identifiers in backticks with backticks doubled,
strings as the hex of their UTF-8 bytes, whole numbers checked as such, types checked against the canonical names.
"""

from __future__ import annotations

import re

_TYPE = re.compile(r"^(?:boolean|tinyint|smallint|int|bigint|float|double|string|binary|date|timestamp|timestamp_ntz"
                   r"|decimal\([0-9]{1,2},[0-9]{1,2}\))$")


def ident(name: str) -> str:
    """A column name as a quoted SQL identifier (backticks, any backtick in it doubled)."""
    return "`" + name.replace("`", "``") + "`"


def text(value: str) -> str:
    """A SQL string of `value` that needs no escaping, whatever it holds and however the session parses string
    literals (`spark.sql.parser.escapedStringLiterals`): its UTF-8 bytes in hex, cast back to a string (a
    constant: Spark folds it into the literal)."""
    return f"CAST(unhex('{value.encode().hex()}') AS STRING)"


def whole(value: int) -> str:
    """A BIGINT literal of a whole number (64-bit; checked, never text)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"not a 64-bit whole number: {value!r}")
    return f"CAST({int(value)} AS BIGINT)"  # (the lowest one parses as a decimal: its cast is exact)


def type_name(name: str) -> str:
    """A canonical column type name (`spec.types.normalize_type`), checked to be one before it goes into SQL."""
    if not _TYPE.match(name):
        raise ValueError(f"not a canonical column type: {name!r}")
    return name


def null_of(type_: str) -> str:
    """A typed NULL."""
    return f"CAST(NULL AS {type_name(type_)})"
