"""Hadoop globs (Spark's `pathGlobFilter`) that match exactly a set of file names.

A snapshot's live files share their directories with replaced files and files of pending instants; a read
names exactly the live ones. Measured (docs/benchmarks.md): a catalog table or file index filtered by such a
glob plans in a fraction of the time of a list of thousands of file paths.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from airflow_lake.lake.errors import LakeError

_GLOB_SPECIAL = set("\\{}[]*?,")


def _escape(name: str) -> str:
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in name)


def name_glob(names: Sequence[str]) -> str:
    """A Hadoop glob matching exactly `names`, shaped as a trie ({a{b,c},d}) so matching stays fast with
    thousands of names (a flat {n1,...,nK} makes every file try every name)."""
    unique = sorted(set(names))
    if not unique:
        raise LakeError("a glob needs at least one file name.")
    return _trie(unique, 0)


def _trie(names: list[str], depth: int) -> str:
    if len(names) == 1:
        return _escape(names[0][depth:])
    prefix = os.path.commonprefix([n[depth:] for n in names])  # noqa: RUF071  (character-wise is meant)
    depth += len(prefix)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name[depth:depth + 1], []).append(name)
    branches = [_trie(group, depth) for _, group in sorted(groups.items())]
    head = _escape(prefix)
    return head + branches[0] if len(branches) == 1 else head + "{" + ",".join(branches) + "}"
