"""Where tables lie: a table never lies inside or above another table.

A table root is a directory whose `_lake/log` holds a log entry. A table inside another one (`outer/dt=x`)
or above one mixes their files: each table's vacuum takes the other's live files for orphans (its log
does not hold them) and deletes them, and the other's reads then silently miss their rows. So
`LakeTable.create` refuses both (`check_new_root`), and vacuum never deletes a file under a subdirectory
that holds a `_lake` of its own (`nested_roots`, for tables made by hand or before this check).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format import paths

MAX_DIRS_CHECKED = 10_000  # a new table's directory is new or small: more than this is not one


def holds_table(directory: str) -> bool:
    """True if the local `directory` is a table root (its `_lake/log` holds a log entry)."""
    try:
        with os.scandir(os.path.join(directory, paths.LOG)) as entries:
            return any(paths.seq_of(entry.name) is not None for entry in entries)
    except OSError:  # no such directory (the usual case), or one we may not read: no table of ours there
        return False


def enclosing_table(path: str) -> str | None:
    """The table root that `path` (absolute, local) lies in, if any: the nearest parent that holds a table,
    as written and with symlinks resolved (where the files really go)."""
    for start in dict.fromkeys((path, os.path.realpath(path))):
        current = start
        while True:
            parent = os.path.dirname(current)
            if parent == current:
                break
            if holds_table(parent):
                return parent
            current = parent
    return None


def tables_below(path: str, limit: int = MAX_DIRS_CHECKED) -> list[str]:
    """Subdirectories of the local directory `path` that hold a `_lake` (a table, or the metadata of one),
    sorted; symlinks are not followed (nothing of ours reads or deletes through them). More than `limit`
    directories under `path` raise a `LakeSpecError`: the answer would take too long to be sure of."""
    found: list[str] = []
    for seen, (dirpath, dirnames, _) in enumerate(os.walk(path, followlinks=False), start=1):
        if seen > limit:
            raise LakeSpecError("table", f"{path!r} holds more than {limit} directories, too many to check that no "
                                "lake table lies inside it.", "Create the table in a new or empty directory.")
        if paths.META in dirnames:
            dirnames.remove(paths.META)  # metadata, not tables
            if dirpath != path:
                found.append(dirpath)
                dirnames.clear()
    return sorted(found)


def check_new_root(path: str) -> None:
    """Refuse to create a table at the local `path` inside another table or above one (nothing is written)."""
    outer = enclosing_table(path)
    if outer is not None:
        raise LakeSpecError("table", f"{path!r} lies inside the lake table {outer!r}: the two would share files, "
                            f"and a vacuum of either would delete the other's data.",
                            "Create the table in a directory outside every other table.")
    if not os.path.isdir(path):
        return
    inner = tables_below(path)
    if inner:
        more = f" (and {len(inner) - 1} more)" if len(inner) > 1 else ""
        raise LakeSpecError("table", f"{path!r} holds the lake table {inner[0]!r}{more}: the two would share files, "
                            "and a vacuum of either would delete the other's data.",
                            "Create the table in a directory that holds no table, e.g. a sibling of it.")


def nested_roots(files: Iterable[str]) -> set[str]:
    """The subdirectories (relative to a table root, not the root itself) that hold a `_lake` of their own,
    found in a listing of the root's files (relative paths, '/'-separated)."""
    roots: set[str] = set()
    marker = f"/{paths.META}/"
    for rel in files:
        at = rel.find(marker)
        if at > 0 and not rel.startswith(f"{paths.META}/"):  # (not the root's own metadata)
            roots.add(rel[:at])
    return roots
