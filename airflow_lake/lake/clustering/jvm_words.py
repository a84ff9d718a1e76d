"""The curve words computed in the JVM (`airflow_lake/jvm/CurveWords.java`, a Java UDF) instead of Spark's Python
workers: the same words as `CurveKeys.words`, bit for bit, without each row's sort columns going to Python and
back (0.3-0.45 us a row: ZORDER / HILBERT cost 1.12-1.28x a range sort with it).

`encode` writes a `CurveKeys` model as the bytes the Java class reads (big-endian); `words_column` registers the
UDF in the session and returns the column, or None where the class is not on the session's class path (the jar
was not built: no javac; a Connect server started without it) or there are more sort columns than it takes —
then `keys.py` uses the Arrow UDF.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from airflow_lake.lake.clustering import curves, sample
from airflow_lake.lake.clustering.layout import HILBERT
from airflow_lake.lake.spec.types import FLOAT_TYPES

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

    from airflow_lake.lake.clustering.keys import CurveKeys

log = logging.getLogger(__name__)
MAGIC = 0x4C4B4301  # CurveWords.MAGIC
CLASS_PREFIX = "airflowlake.jvm.CurveWords"
MAX_COLUMNS = 8  # CurveWords.Of1 .. Of8
DIRECT, LONGS, DOUBLES, BYTES = 0, 1, 2, 3


def input_kinds(model: CurveKeys, types: Sequence[str]) -> list[int]:
    """How each sort column reaches the UDF (see `sample.sample_keys` and `coordinates.direct_value`)."""
    kinds = []
    for coordinate, type_name in zip(model.coordinates, types, strict=True):
        if coordinate.bounds is None:
            kinds.append(DIRECT)
        elif isinstance(coordinate.bounds, sample.StringBounds):
            kinds.append(BYTES)
        else:
            kinds.append(DOUBLES if type_name in FLOAT_TYPES else LONGS)
    return kinds


def encode(model: CurveKeys, kinds: Sequence[int]) -> bytes:
    """The model as `CurveWords(byte[])` reads it."""
    widths = model.widths
    out = [struct.pack(">iBBBB", MAGIC, 1 if model.kind == HILBERT else 0, model.bits, model.slot_bits, len(widths)),
           bytes(widths), struct.pack(">i", len(model.coordinates))]
    for coordinate, kind in zip(model.coordinates, kinds, strict=True):
        out.append(struct.pack(">B", kind))
        if kind == DIRECT:
            continue
        bounds = coordinate.bounds
        if isinstance(bounds, sample.StringBounds):
            out.append(struct.pack(">i", len(bounds.texts)))
            out.extend(struct.pack(">i", len(t)) + t for t in bounds.texts)
            count = len(bounds.texts)
        else:
            assert bounds is not None
            count = len(bounds)
            out.append(struct.pack(">i", count) + np.asarray(bounds, dtype=">i8").tobytes())
        at = np.arange(coordinate.ranges, dtype=np.uint64) if coordinate.positions is None else coordinate.positions
        spread = (at << np.uint64(model.bits)) // np.uint64(coordinate.ranges)  # as `Coordinate.of`
        out.append(np.asarray(spread[:count + 1], dtype=np.uint64).astype(">u8").tobytes())
    cuts = model.cuts if model.slot_bits and model.cuts is not None else np.zeros((0, len(widths)), np.int64)
    out.append(struct.pack(">i", len(cuts)) + np.asarray(cuts, dtype=">i8").tobytes())
    return b"".join(out)


def available(spark: SparkSession, dims: int) -> bool:
    """Whether the JVM computes the words of `dims` sort columns in this session: the class is on its class path
    (registered once per session and number of words), not switched off (`jvm.DISABLE_ENV`), at most
    `MAX_COLUMNS` columns."""
    return _registered(spark, dims, 1)


def _registered(spark: SparkSession, dims: int, words: int) -> bool:
    from airflow_lake import jvm

    if not jvm.enabled() or not 1 <= dims <= MAX_COLUMNS:
        return False
    name = _name(dims, words)
    try:
        if not spark.catalog.functionExists(name):  # (once per session: registering again logs a warning)
            spark.udf.registerJavaFunction(name, f"{CLASS_PREFIX}$Of{dims}", curves.words_type(words))
    except Exception as err:  # the class is not on this session's class path (any Spark error)
        log.info("Curve words in Python workers: the JVM class is not on the session's class path (%s)",
                 str(err).splitlines()[0][:200] if str(err) else type(err).__name__)
        return False
    return True


def _name(dims: int, words: int) -> str:
    return f"__lake_curve_words_{dims}_{words}"


def words_column(spark: SparkSession, model: CurveKeys, inputs: Sequence[Column], types: Sequence[str]) -> \
        Column | None:
    """The UDF's column of the words (a bigint, or a struct of `w0`.. like the Arrow UDF's), or None where the
    JVM cannot compute them here."""
    from pyspark.sql import functions as F

    if not _registered(spark, len(inputs), len(model.widths)):
        return None
    kinds = input_kinds(model, types)
    columns = [c.cast("binary") if kind == BYTES else c for c, kind in zip(inputs, kinds, strict=True)]
    return F.call_function(_name(len(inputs), len(model.widths)), F.lit(bytearray(encode(model, kinds))), *columns)


__all__ = ["MAX_COLUMNS", "available", "encode", "input_kinds", "words_column"]
