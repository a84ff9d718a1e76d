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


def dirs_glob(root: str, directories: Sequence[str]) -> str:
    """A Hadoop glob of exactly `directories` (relative to `root`, a path or URL): `root/{d1,d2}`, every part
    escaped, so partition values and a root with glob characters match only themselves."""
    unique = sorted(set(directories))
    if not unique:
        raise LakeError("a glob needs at least one directory.")
    if "" in unique:  # files at the root itself (an unpartitioned table written before write directories)
        return _escape(root)
    inner = ",".join(_escape(d) for d in unique) if len(unique) > 1 else _escape(unique[0])
    body = "{" + inner + "}" if len(unique) > 1 else inner
    return f"{_escape(root)}/{body}" if body else _escape(root)
