"""The curve words in the JVM (`CurveWords.java`) are the Arrow UDF's words, bit for bit: every column type a
curve takes, NULLs, -0.0 / NaN / infinities, strings sharing long prefixes and beyond the BMP, multi-word keys,
file slots; and where the class is missing the Python workers compute them."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pytest

from airflow_lake.lake.clustering import jvm_words, keys
from airflow_lake.lake.clustering.layout import Layout
from airflow_lake.lake.spec.table_spec import TableSpec

SCHEMA = "a BIGINT, d DOUBLE, s STRING, t TIMESTAMP, day DATE, m DECIMAL(10,2), i INT, f FLOAT, b BOOLEAN"
PREFIX = "https://example.com/" + "x" * 60  # longer than a string key's 64 bytes


def _rows(count: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(7)
    doubles = [0.0, -0.0, float("nan"), float("inf"), -float("inf"), 5e-324, -5e-324, 1e308, -1.5, None]
    texts = ["", "a", "a\x00", "a\x01", "é", "€", "\U0001f600", "\ufffd", PREFIX, PREFIX + "a", PREFIX + "b",
             PREFIX + "ab", None]
    longs = [-(2**63), 2**63 - 1, 0, -1, None]
    rows = []
    for n in range(count):
        pick = rng.integers(0, 4)
        a = longs[n % len(longs)] if pick == 0 else int(rng.integers(-(2**62), 2**62))
        d = doubles[n % len(doubles)] if pick == 1 else float(rng.lognormal(0, 3)) * (1 if n % 2 else -1)
        s = texts[n % len(texts)] if pick == 2 else f"{PREFIX if n % 3 else ''}{int(rng.zipf(1.5)) % 500}"
        t = None if n % 97 == 0 else dt.datetime(2020, 1, 1) + dt.timedelta(seconds=int(rng.integers(0, 10**8)))
        day = None if n % 89 == 0 else dt.date(1970, 1, 1) + dt.timedelta(days=int(rng.integers(-9000, 20000)))
        m = None if n % 83 == 0 else decimal.Decimal(int(rng.integers(-10**9, 10**9))) / 100
        i = None if n % 79 == 0 else int(rng.zipf(1.3)) % 1000
        f = None if n % 73 == 0 else float(np.float32(rng.normal(0, 100)))
        rows.append((a, d, s, t, day, m, i, f, None if n % 71 == 0 else bool(n % 2)))
    return rows


@pytest.fixture(scope="module")
def frame(spark: Any) -> Any:
    return spark.createDataFrame(_rows(6000), SCHEMA).repartition(3).cache()


@pytest.mark.parametrize("case", [
    ("ZORDER", "SAMPLE", ("a", "d"), 1, 1024),
    ("HILBERT", "SAMPLE", ("a", "d"), 8, 1024),
    ("ZORDER", "SAMPLE", ("s", "i", "d"), 5, 64),  # few ranges: many values per rank, heavy values
    ("HILBERT", "SAMPLE", ("s", "t", "day", "m", "i", "f", "b"), 16, 256),
    ("HILBERT", "SAMPLE", ("s", "a"), 3, 2),
    ("HILBERT", "SAMPLE", ("a", "d", "i"), 64, 1024),  # three in one word, 63 cuts (a power of two padded)
    ("ZORDER", "DIRECT", ("a", "d", "s"), 1, 1024),  # 3 x 64 bits: four words
    ("HILBERT", "DIRECT", ("a", "d", "s", "t"), 12, 1024),
    ("ZORDER", "DIRECT", ("i", "day"), 8, 1024),
])
def test_the_jvm_words_are_the_arrow_udf_words(frame: Any, case: tuple[str, str, tuple[str, ...], int, int]) -> None:
    kind, curve, columns, files, ranges = case
    spec = TableSpec.from_dict({"schema": SCHEMA})
    layout = Layout(kind, columns, curve, ranges)
    model, inputs = keys.curve_model(frame, layout, spec, files=files, seed=5)
    types = [spec.column(c).type for c in columns]
    jvm, where = keys.words_column(frame, model, inputs, types)
    python, elsewhere = keys.words_column(frame, model, inputs, types, jvm=False)
    assert (where, elsewhere) == ("the JVM", "Python workers (an Arrow UDF)")
    both = frame.select(jvm.alias("jvm"), python.alias("python"))
    plan = both._jdf.queryExecution().executedPlan().toString()
    assert plan.count("ArrowEvalPython") == 1  # (the Python one only)
    got = both.collect()
    assert len(got) == 6000
    mismatched = [(r["jvm"], r["python"]) for r in got if r["jvm"] != r["python"]]
    assert not mismatched, mismatched[:5]
    assert len({r["jvm"] for r in got}) > (100 if ranges > 2 else 3)  # words that tell rows apart
    if model.files > 1:  # the slots are used
        first = [r["jvm"] if isinstance(r["jvm"], int) else r["jvm"]["w0"] for r in got]
        assert len({w >> (63 - model.slot_bits) for w in first}) == model.files


def test_the_encoded_model_is_what_the_class_reads(frame: Any) -> None:
    spec = TableSpec.from_dict({"schema": SCHEMA})
    model, _ = keys.curve_model(frame, Layout("HILBERT", ("s", "d"), "SAMPLE", 16), spec, files=4, seed=1)
    kinds = jvm_words.input_kinds(model, ["string", "double"])
    assert kinds == [jvm_words.BYTES, jvm_words.DOUBLES]
    encoded = jvm_words.encode(model, kinds)
    assert encoded[:4] == bytes.fromhex("4c4b4301") and encoded[4] == 1  # magic, Hilbert
    assert model.cuts is not None and encoded.endswith(np.asarray(model.cuts, dtype=">i8").tobytes())


def test_without_the_class_the_python_workers_compute_the_words(frame: Any, monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    spec = TableSpec.from_dict({"schema": SCHEMA})
    layout = Layout("ZORDER", ("a", "i"), "SAMPLE", 64)
    monkeypatch.setattr(jvm_words, "CLASS_PREFIX", "airflowlake.jvm.NoSuchClass")
    frame.sparkSession.sql("DROP TEMPORARY FUNCTION IF EXISTS __lake_curve_words_2_1")  # (registered above)
    assert not jvm_words.available(frame.sparkSession, 2)
    with caplog.at_level("INFO"):
        keyed, names, _ = keys.add_keys(frame, layout, spec, files=1, seed=2)
    assert "not on the session's class path" in caplog.text
    assert "curve words computed in Python workers" in caplog.text
    plan = keyed._jdf.queryExecution().executedPlan().toString()
    assert plan.count("ArrowEvalPython") == 1
    monkeypatch.undo()
    monkeypatch.setenv("AIRFLOW_LAKE_JVM_CURVES", "0")  # switched off: Python workers too
    keyed, _, _ = keys.add_keys(frame, layout, spec, files=1, seed=2)
    assert keyed._jdf.queryExecution().executedPlan().toString().count("ArrowEvalPython") == 1
    assert not jvm_words.available(frame.sparkSession, 2)
    monkeypatch.delenv("AIRFLOW_LAKE_JVM_CURVES")
    assert jvm_words.available(frame.sparkSession, 2) and not jvm_words.available(frame.sparkSession, 9)
    keyed, _, _ = keys.add_keys(frame, layout, spec, files=1, seed=2)
    assert "ArrowEvalPython" not in keyed._jdf.queryExecution().executedPlan().toString()
    assert len(names) == 1
