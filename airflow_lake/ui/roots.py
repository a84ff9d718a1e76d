"""Where the Lake page may look: the configured roots, and table references confined to them.

A table is named in URLs as "<root index>/<path under the root>" (e.g. "0/dm_work_7d"): never an absolute
path, never "..", and its real path (symlinks resolved) must stay inside its root's real path. The page reads
nothing but the table's `_lake` directory, so that directory must be the table's own: not a link (a link could
show another table, inside the roots or not, under this one's name and this one's access rights), and no link
in it may lead out of it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 4  # how deep under a root tables are looked for
LAKE_DIR = "_lake"


class BadTableRef(ValueError):
    """A table reference that names nothing under the configured roots (or tries to leave them)."""


@dataclass(frozen=True)
class TableRef:
    """A table under root number `root`: its reference as URLs carry it, and its real path."""

    root: int
    relative: str
    path: str

    @property
    def ref(self) -> str:
        return f"{self.root}/{self.relative}"


def configured_roots() -> list[str]:
    """The roots from Airflow's `[lake] roots` (else $AIRFLOW_LAKE_ROOT, the example pipeline's root)."""
    raw = os.environ.get("AIRFLOW__LAKE__ROOTS")
    if raw is None:
        try:
            from airflow.configuration import conf

            raw = conf.get("lake", "roots", fallback=None)
        except Exception:  # Airflow not configured (tests of the core): the environment decides
            raw = None
    if not raw:
        raw = os.environ.get("AIRFLOW_LAKE_ROOT", "")
    return [os.path.realpath(r.strip()) for r in raw.split(",") if r.strip()]


def resolve(ref: str, roots: list[str]) -> TableRef:
    """The table `ref` names, or `BadTableRef` if it is malformed, escapes its root or is not a lake table."""
    head, sep, relative = (ref or "").partition("/")
    if not sep or not head.isascii() or not head.isdigit() or int(head) >= len(roots):
        raise BadTableRef(f"{ref!r} does not name a configured root: give '<root number>/<table path>'.")
    parts = relative.split("/")
    if not relative or relative.startswith("/") or "\\" in relative or "\x00" in relative \
            or any(p in ("", ".", "..") for p in parts):
        raise BadTableRef(f"{ref!r}: a table path is relative to its root, without '.', '..' or empty parts.")
    root = roots[int(head)]
    real = os.path.realpath(os.path.join(root, *parts))
    if not _inside(real, root) or real == root:
        raise BadTableRef(f"{ref!r} leaves its root.")
    lake = os.path.join(real, LAKE_DIR)
    if not os.path.isdir(lake):
        raise BadTableRef(f"{ref!r} is not a lake table.")
    if os.path.realpath(lake) != lake:
        raise BadTableRef(f"{ref!r}: its {LAKE_DIR} directory is a link, not the table's own.")
    if _link_out_of(lake):
        raise BadTableRef(f"{ref!r}: a link in its {LAKE_DIR} directory leads out of it.")
    return TableRef(int(head), "/".join(parts), real)


def _inside(path: str, directory: str) -> bool:
    return os.path.commonpath([path, directory]) == directory


def _link_out_of(lake: str) -> bool:
    """Whether a symlink anywhere under `lake` (a real path) resolves outside it. A writer makes no links
    there; the walk reads entry kinds from the directory listings (no stat per file: logs hold 10,000s)."""
    stack = [lake]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        if not _inside(os.path.realpath(entry.path), lake):
                            return True
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:  # unreadable: reading the table fails later, with its own message
            continue
    return False


def find_tables(roots: list[str]) -> list[TableRef]:
    """Every lake table under the roots (directories holding `_lake`), not following links out of a root."""
    found: list[TableRef] = []
    for index, root in enumerate(roots):
        if not os.path.isdir(root):
            continue
        stack = [(Path(root), 0)]
        while stack:
            directory, depth = stack.pop()
            try:
                children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError:
                continue
            for child in children:
                relative = child.relative_to(root).as_posix()
                if (child / LAKE_DIR).is_dir():
                    with contextlib.suppress(BadTableRef):  # (a link out of the root, a `_lake` not its own)
                        found.append(resolve(f"{index}/{relative}", roots))
                elif depth + 1 < MAX_DEPTH and not child.is_symlink():
                    stack.append((child, depth + 1))
    return sorted(found, key=lambda t: (t.root, t.relative))
