"""`partition_regex`, matched in time linear in the text, whatever the pattern.

The schedule step runs in the Airflow process (it reads only the timeline), where Python's backtracking
`re` takes exponential time on a pattern like `dt=(a|a)*c` and cannot be interrupted. So the pattern is
parsed by Python's own regex parser (the same syntax, the same syntax errors) and run as a Thompson
automaton: each character of a partition path moves a set of states forward, nothing is ever retried.
What is not a regular language — backreferences, lookarounds, atomic groups, possessive repeats — is
refused, naming the field. Counted repeats are unrolled up to `MAX_STATES` states, and the work of one
schedule is capped at `MAX_STEPS`: past either, the pattern is refused instead of run.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from airflow_lake.lake.errors import LakeSpecError

# The parser behind `re` (private, but the module `re` itself is built on it; `sre_parse` is its deprecated
# alias). Anything it yields that this module does not know is refused, never guessed.
_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

FIELD = "partition_regex"
MAX_LENGTH = 1000
MAX_STATES = 20_000
MAX_STEPS = 1_000_000  # about a second of pure Python: a pattern needing more is refused
_CACHE_LIMIT = 50_000
_CHAR, _SPLIT, _ASSERT, _MATCH = 0, 1, 2, 3
_ASCII_SPACE = frozenset(" \t\n\r\f\v")
_FIX = "Give a plain pattern such as 'dt=2024-0[1-6]-.*' (no backreferences or lookarounds), or list the " \
       "partitions in `partitions`."


class _TooComplex(Exception):
    pass


class PartitionPattern:
    """A compiled `partition_regex`: `fullmatch(text)` in O(len(text) x states), with a cap on total work."""

    def __init__(self, pattern: str, field: str = FIELD) -> None:
        """Parse and compile `pattern`; raises `LakeSpecError` naming `field` if it is not usable."""
        self.pattern = pattern
        self.field = field
        if len(pattern) > MAX_LENGTH:
            raise LakeSpecError(field, f"the pattern is {len(pattern)} characters long.",
                                f"Keep it under {MAX_LENGTH} characters.")
        try:
            parsed = _parser.parse(pattern)
        except re.error as err:
            raise LakeSpecError(field, f"{pattern!r} is not a regular expression ({err}).",
                                "Give a Python regular expression, e.g. 'dt=2024-.*'.") from None
        except RecursionError:
            raise LakeSpecError(field, f"{pattern!r} nests groups too deeply.", _FIX) from None
        self._kind: list[int] = []
        self._arg: list[Any] = []
        self._out: list[list[int]] = []
        self._has_asserts = False
        try:
            self._start = self._sequence(list(parsed), int(parsed.state.flags), self._node(_MATCH, None, []))
        except _TooComplex as err:
            raise LakeSpecError(field, f"{pattern!r} {err}", _FIX) from None
        except RecursionError:
            raise LakeSpecError(field, f"{pattern!r} nests groups too deeply.", _FIX) from None
        self._steps = 0
        self._cache: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    # -- compiling: the parser's tree into states, built back to front -------------------------------------
    def _node(self, kind: int, arg: Any, out: list[int]) -> int:
        if len(self._kind) >= MAX_STATES:
            raise _TooComplex(f"unrolls into more than {MAX_STATES} automaton states (large counted repeats).")
        self._kind.append(kind)
        self._arg.append(arg)
        self._out.append(out)
        return len(self._kind) - 1

    def _sequence(self, items: Sequence[Any], flags: int, nxt: int) -> int:
        for op, av in reversed(items):
            nxt = self._item(op, av, flags, nxt)
        return nxt

    def _item(self, op: Any, av: Any, flags: int, nxt: int) -> int:
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return self._node(_CHAR, _char_test(op, av, flags), [nxt])
        if op is _c.BRANCH:
            return self._node(_SPLIT, None, [self._sequence(alt, flags, nxt) for alt in av[1]])
        if op is _c.SUBPATTERN:
            _group, add, remove, items = av
            if add & (re.ASCII | re.UNICODE):  # a scoped (?a:...) or (?u:...) replaces the other, as in `re`
                flags &= ~(re.ASCII | re.UNICODE)
            return self._sequence(items, (flags | add) & ~remove, nxt)
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):  # lazy or greedy: the same set of matched texts
            low, high, items = av
            if high == _c.MAXREPEAT:
                loop = self._node(_SPLIT, None, [])
                self._out[loop].extend([self._sequence(items, flags, loop), nxt])
                start = loop
            else:
                start = nxt
                for _ in range(high - low):
                    start = self._node(_SPLIT, None, [self._sequence(items, flags, start), nxt])
            for _ in range(low):
                start = self._sequence(items, flags, start)
            return start
        if op is _c.AT:
            self._has_asserts = True
            return self._node(_ASSERT, (av, flags), [nxt])
        names = {_c.GROUPREF: "a backreference", _c.GROUPREF_EXISTS: "a conditional group",
                 _c.ASSERT: "a lookahead or lookbehind", _c.ASSERT_NOT: "a negative lookahead or lookbehind",
                 _c.ATOMIC_GROUP: "an atomic group", _c.POSSESSIVE_REPEAT: "a possessive repeat"}
        raise _TooComplex(f"uses {names.get(op, str(op))}, which only a backtracking matcher can run (in "
                          "unbounded time).")

    # -- matching ----------------------------------------------------------------------------------------
    def fullmatch(self, text: str) -> bool:
        """Whether the whole of `text` matches (as `re.fullmatch`)."""
        current = self._closure([self._start], text, 0)
        for i, char in enumerate(text):
            if not current:
                return False
            key = (current, char)
            cached = None if self._has_asserts else self._cache.get(key)
            if cached is not None:
                current = cached
                continue
            moved = [self._out[n][0] for n in current if self._kind[n] == _CHAR and self._arg[n](char)]
            current = self._closure(moved, text, i + 1)
            if not self._has_asserts:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[key] = current
        return any(self._kind[n] == _MATCH for n in current)

    def _closure(self, starts: list[int], text: str, pos: int) -> frozenset[int]:
        """The states reachable from `starts` without reading a character at `pos`: those that read one,
        and the final one."""
        stack, seen, found = list(starts), set(), []
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            kind = self._kind[node]
            if kind == _SPLIT:
                stack.extend(self._out[node])
            elif kind == _ASSERT:
                code, flags = self._arg[node]
                if _at(code, flags, text, pos):
                    stack.append(self._out[node][0])
            else:
                found.append(node)
        self._steps += len(seen)
        if self._steps > MAX_STEPS:
            raise LakeSpecError(self.field, f"{self.pattern!r} is too costly to match against the table's "
                                f"partitions (over {MAX_STEPS:,} automaton steps).", _FIX)
        return frozenset(found)


def _char_test(op: Any, av: Any, flags: int) -> Callable[[str], bool]:
    """A test of one character for LITERAL, NOT_LITERAL, ANY or a class IN [...]."""
    fold = bool(flags & re.IGNORECASE)
    if op is _c.ANY:
        return (lambda ch: True) if flags & re.DOTALL else (lambda ch: ch != "\n")
    if op in (_c.LITERAL, _c.NOT_LITERAL):
        same = _literal_test(chr(av), fold)
        return same if op is _c.LITERAL else (lambda ch: not same(ch))
    negate = bool(av) and av[0][0] is _c.NEGATE
    tests = [_class_item(item_op, item_av, flags, fold) for item_op, item_av in (av[1:] if negate else av)]
    if negate:
        return lambda ch: not any(t(ch) for t in tests)
    return lambda ch: any(t(ch) for t in tests)


def _literal_test(literal: str, fold: bool) -> Callable[[str], bool]:
    if not fold:
        return lambda ch: ch == literal
    forms = {literal, literal.lower(), literal.upper()}
    return lambda ch: ch in forms or ch.lower() in forms or ch.upper() in forms


def _class_item(op: Any, av: Any, flags: int, fold: bool) -> Callable[[str], bool]:
    if op is _c.LITERAL:
        return _literal_test(chr(av), fold)
    if op is _c.RANGE:
        low, high = av
        if not fold:
            return lambda ch: low <= ord(ch) <= high
        return lambda ch: any(len(f) == 1 and low <= ord(f) <= high for f in (ch, ch.lower(), ch.upper()))
    if op is _c.CATEGORY:
        return _category(av, ascii_only=not flags & re.UNICODE)
    raise _TooComplex(f"uses the character class item {op}, which is not supported.")


def _ascii_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def _unicode_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _category(code: Any, *, ascii_only: bool) -> Callable[[str], bool]:
    tests: dict[Any, Callable[[str], bool]] = {
        _c.CATEGORY_DIGIT: (lambda ch: "0" <= ch <= "9") if ascii_only else str.isdecimal,
        _c.CATEGORY_SPACE: (lambda ch: ch in _ASCII_SPACE) if ascii_only else str.isspace,
        _c.CATEGORY_WORD: _ascii_word if ascii_only else _unicode_word,
    }
    negated = {_c.CATEGORY_NOT_DIGIT: _c.CATEGORY_DIGIT, _c.CATEGORY_NOT_SPACE: _c.CATEGORY_SPACE,
               _c.CATEGORY_NOT_WORD: _c.CATEGORY_WORD}
    if code in tests:
        return tests[code]
    if code in negated:
        test = tests[negated[code]]
        return lambda ch: not test(ch)
    raise _TooComplex(f"uses the character class {code}, which is not supported.")


def _at(code: Any, flags: int, text: str, pos: int) -> bool:
    """Anchors and word boundaries at `pos` (between text[pos - 1] and text[pos]), as `re` decides them."""
    end = len(text)
    multiline = bool(flags & re.MULTILINE)
    if code is _c.AT_BEGINNING_STRING:
        return pos == 0
    if code is _c.AT_BEGINNING:
        return pos == 0 or (multiline and text[pos - 1] == "\n")
    if code is _c.AT_END_STRING:
        return pos == end
    if code is _c.AT_END:
        return pos == end or (pos < end and text[pos] == "\n" and (multiline or pos == end - 1))
    if code in (_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY):
        if end == 0:
            return False
        word = _unicode_word if flags & re.UNICODE else _ascii_word
        before = pos > 0 and word(text[pos - 1])
        after = pos < end and word(text[pos])
        return (before != after) == (code is _c.AT_BOUNDARY)
    raise _TooComplex(f"uses the anchor {code}, which is not supported.")


def compile_pattern(pattern: str, field: str = FIELD) -> PartitionPattern:
    """`PartitionPattern(pattern)`: checks a pattern when a spec is read (raises `LakeSpecError`)."""
    return PartitionPattern(pattern, field)


__all__ = ["FIELD", "MAX_STATES", "MAX_STEPS", "PartitionPattern", "compile_pattern"]
