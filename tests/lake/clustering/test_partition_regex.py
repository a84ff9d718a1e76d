"""`partition_regex` matched by an automaton: the same answers as Python's `re`, in bounded time."""

from __future__ import annotations

import random
import re
import time

import pytest

from airflow_lake.lake.clustering.partition_regex import MAX_STATES, PartitionPattern
from airflow_lake.lake.errors import LakeSpecError

ATOMS = ["a", "b", "x", "A", "1", ".", "[ab]", "[^a]", "[a-c]", "[A-Z]", r"\d", r"\w", r"\W", r"\s", r"\n", "=",
         r"\b", r"\B", "^", "$", r"\A", r"\Z", "(?:a|bc)", "(a|)", "[-=]"]
QUANTIFIERS = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "*?", "{0,2}", "{2,}", "+?"]
FLAGS = ["", "(?i)", "(?s)", "(?m)", "(?a)", "(?im)", "(?x)"]


def random_pattern(rng: random.Random, depth: int = 0) -> str:
    out = ""
    for _ in range(rng.randint(1, 4)):
        if depth < 2 and rng.random() < 0.25:
            inner = random_pattern(rng, depth + 1)
            if rng.random() < 0.5:
                inner += "|" + random_pattern(rng, depth + 1)
            out += f"({inner})" + rng.choice(QUANTIFIERS)
        else:
            out += rng.choice(ATOMS) + rng.choice(QUANTIFIERS)
    return out


def test_answers_as_python_re_on_random_patterns_and_texts() -> None:
    rng = random.Random(20)
    alphabet = "abxA1 _\n=-"
    checked = 0
    for _ in range(1500):
        pattern = rng.choice(FLAGS) + random_pattern(rng)
        try:
            expected = re.compile(pattern)
        except re.error:
            continue
        ours = PartitionPattern(pattern)
        for _ in range(15):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))
            assert ours.fullmatch(text) == bool(expected.fullmatch(text)), (pattern, text)
            checked += 1
    assert checked > 10_000


def test_partition_paths_match_as_documented() -> None:
    pattern = PartitionPattern(r"dt=2024-0[1-6]-\d{2}/region=(eu|us)")
    assert pattern.fullmatch("dt=2024-03-15/region=eu")
    assert not pattern.fullmatch("dt=2024-07-15/region=eu")
    assert not pattern.fullmatch("dt=2024-03-15/region=eu/x")  # a full match
    assert PartitionPattern("(?i)DT=.*").fullmatch("dt=__HIVE_DEFAULT_PARTITION__")


@pytest.mark.parametrize("pattern", ["dt=(a|a)*c", "dt=(a+)+c", "dt=(a|aa)*c", "dt=(.*a){12}c",
                                     "dt=" + ".*" * 30 + "c", r"dt=(\w|\d)*c"])
def test_patterns_that_make_re_backtrack_stay_fast(pattern: str) -> None:
    texts = ["dt=" + "a" * n for n in range(0, 400, 7)]
    started = time.monotonic()
    matcher = PartitionPattern(pattern)
    assert not any(matcher.fullmatch(t) for t in texts)
    assert time.monotonic() - started < 3


def test_work_past_the_cap_is_refused_not_run() -> None:
    matcher = PartitionPattern(r"(?:\b.*){300}x")  # anchors inside: no shortcut, every step counted
    started = time.monotonic()
    with pytest.raises(LakeSpecError, match="too costly") as err:
        for n in range(2000):
            matcher.fullmatch("dt=" + "a" * (n % 300))
    assert err.value.field == "partition_regex" and time.monotonic() - started < 10
    with pytest.raises(LakeSpecError, match=f"more than {MAX_STATES}"):
        PartitionPattern("(?:(?:a{100}){100}){100}")
