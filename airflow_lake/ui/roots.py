"""Where the Lake page may look: the configured roots, and table references confined to them.

A table is named in URLs as "<root index>/<path under the root>" (e.g. "0/dm_work_7d"): never an absolute
path, never "..", and its real path (symlinks resolved) must stay inside its root's real path. The page reads
nothing but the table's `_lake` directory, so that directory must be the table's own: not a link (a link could
show another table, inside the roots or not, under this one's name and this one's access rights), and no link
in it may lead out of it.

A root may also be an object store URL (`s3://bucket/lake`, any store `Storage` serves). There is no real path
there: a reference is checked by its text (no '.', '..' or empty segments, nothing a URL or fsspec would read as
more than a name: '?', '#', '%', '*', '[', ']' or control characters), so that the table's URL is the root's URL
plus '/' plus its path, under the root by construction; a store has no links to escape through. Its tables are the
prefixes whose `_lake/log/` holds a key (`table_roots.store_tables_below`: bounded listings, never a data file).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import table_roots
from airflow_lake.lake.format.identity import canonical_url
from airflow_lake.lake.format.storage import is_local, normalize_url

MAX_DEPTH = 4  # how deep under a root tables are looked for
LAKE_DIR = "_lake"
_NOT_IN_STORE_NAMES = frozenset("?#%*[]\\")  # a URL's query, fragment or escape; fsspec's glob characters
log = logging.getLogger(__name__)


class BadTableRef(ValueError):
    """A table reference that names nothing under the configured roots (or tries to leave them)."""


@dataclass(frozen=True)
class TableRef:
    """A table under root number `root`: its reference as URLs carry it, and its real path (on a store: its
    URL)."""

    root: int
    relative: str
    path: str

    @property
    def ref(self) -> str:
        return f"{self.root}/{self.relative}"


def configured_roots() -> list[str]:
    """The roots from Airflow's `[lake] roots` (else $AIRFLOW_LAKE_ROOT, the example pipeline's root), comma
    separated: local paths (as real paths) or store URLs (as given, without a trailing '/')."""
    raw = os.environ.get("AIRFLOW__LAKE__ROOTS")
    if raw is None:
        try:
            from airflow.configuration import conf

            raw = conf.get("lake", "roots", fallback=None)
        except Exception:  # Airflow not configured (tests of the core): the environment decides
            raw = None
    if not raw:
        raw = os.environ.get("AIRFLOW_LAKE_ROOT", "")
    return [_root(r) for r in raw.split(",") if r.strip()]


def _root(text: str) -> str:
    url = normalize_url(text.strip())
    return canonical_url(url) if is_local(url) else url  # (a store root is shown as configured)


def is_store_root(root: str) -> bool:
    """True if a configured root is an object store URL (not a local path)."""
    return not is_local(root)


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
    if is_store_root(root):
        return _resolve_on_store(ref, int(head), parts, root)
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


def _store_parts_ok(parts: list[str]) -> bool:
    return not any(_NOT_IN_STORE_NAMES.intersection(p) or any(ch < " " or ch == "\x7f" for ch in p) for p in parts)


def _resolve_on_store(ref: str, index: int, parts: list[str], root: str) -> TableRef:
    """`resolve` under a store root: by the reference's text, then one bounded LIST (is `_lake/log/` there?)."""
    if not _store_parts_ok(parts):
        raise BadTableRef(f"{ref!r}: a table path under a store root holds no '?', '#', '%', '*', '[', ']' or control "
                          "characters.")
    relative = "/".join(parts)
    url = f"{root}/{relative}"
    try:
        held = table_roots.store_holds_table(url)
    except FileNotFoundError:  # (no such bucket)
        held = False
    except Exception as err:  # unreachable, no credentials (botocore's own errors), no fsspec package for it
        raise BadTableRef(f"{ref!r}: its store cannot be read ({type(err).__name__}: {err}).") from err
    if not held:
        raise BadTableRef(f"{ref!r} is not a lake table.")
    return TableRef(index, relative, url)


def relative_to_root(table: str, root: str) -> str | None:
    """The path of the table `table` (a path or URL) under `root`, or None if it is not strictly under it: by the
    canonical URLs of both (`format.identity`: real paths locally; a store's scheme aliases taken as one, s3a:// is
    s3://), the one spelling the table's asset and lineage name use too."""
    try:
        url = canonical_url(table)
    except LakeError:  # empty, NUL
        return None
    if is_local(url) != is_local(root):
        return None
    base = canonical_url(root)
    if not is_local(url):
        return url[len(base) + 1:] if url.startswith(base + "/") and len(url) > len(base) + 1 else None
    if os.path.commonpath([url, base]) != base or url == base:
        return None
    return os.path.relpath(url, base)


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


def find_tables(roots: list[str], *, strict: bool = False) -> list[TableRef]:
    """Every lake table under the roots (directories holding `_lake`), not following links out of a root. A store
    root that cannot be searched (unreachable, too broad: `table_roots.store_tables_below`) is logged and skipped,
    or with `strict` its error raised."""
    found: list[TableRef] = []
    for index, root in enumerate(roots):
        if is_store_root(root):
            found += _store_tables(index, root, strict)
            continue
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


def _store_tables(index: int, root: str, strict: bool) -> list[TableRef]:
    """The tables under store root number `index`, as `resolve` would name them (a prefix whose name `resolve`
    refuses is left out)."""
    try:
        relatives = table_roots.store_tables_below(root, MAX_DEPTH)
    except FileNotFoundError:  # (no such bucket)
        return []
    except Exception as err:  # (botocore's own errors too): one store must not hide the other roots' tables
        if strict:
            raise
        log.warning("Lake tables under %s cannot be listed: %s: %s", root, type(err).__name__, err)
        return []
    return [TableRef(index, rel, f"{root}/{rel}") for rel in relatives if _store_parts_ok(rel.split("/"))]
