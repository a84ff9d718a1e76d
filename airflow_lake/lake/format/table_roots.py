"""Where tables lie: a table never lies inside or above another table.

A table root is a directory whose `_lake/log` holds a log entry. A table inside another one (`outer/dt=x`)
or above one mixes their files: each table's vacuum takes the other's live files for orphans (its log
does not hold them) and deletes them, and the other's reads then silently miss their rows. So
`LakeTable.create` refuses both (`check_new_root`), and vacuum never deletes a file under a subdirectory
that holds a `_lake` of its own (`nested_roots`, for tables made by hand or before this check).

On an object store a "directory" is a key prefix: `store_holds_table` asks whether `<url>/_lake/log/` holds a
key (one bounded LIST), and `store_tables_below` finds the tables under a prefix (the roots of the Lake page and
`airflow-lake ls`) with one delimiter listing per prefix it visits and one bounded LIST per child prefix. It never
lists a table's own prefix, so a table's data files (and log) are never walked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format import paths, stores
from airflow_lake.lake.format.storage import Storage

MAX_DIRS_CHECKED = 10_000  # a new table's directory is new or small: more than this is not one
MAX_PREFIXES_LISTED = 1_000  # prefixes `store_tables_below` lists (a request or more each) before it gives up


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


# -- object stores -------------------------------------------------------------------------------------------------
def store_holds_table(url: str) -> bool:
    """True if the store URL `url` is a table root: a key lies under its `_lake/log/` (one bounded LIST on S3)."""
    return Storage(url).exists(paths.LOG)


def store_tables_below(url: str, max_depth: int, limit: int = MAX_PREFIXES_LISTED) -> list[str]:
    """The tables under the store URL `url`, as paths relative to it ('a', 'ods/daily'), sorted: child prefixes
    whose `_lake/log/` holds a key, at most `max_depth` levels below `url`. Prefixes starting with '.' and `_lake`
    are skipped; a table's prefix is not descended into (a table never lies inside another), nor is `url` if it is
    a table itself, so no data file of a table is listed. More than `limit` prefixes to list raise a
    `LakeSpecError` (each costs a request): the root is then too broad to search."""
    storage = Storage(url)
    if store_holds_table(url):
        return []
    found: list[str] = []
    stack = [("", 0)]
    listed = 0
    while stack:
        rel, depth = stack.pop()
        listed += 1
        if listed > limit:
            raise LakeSpecError("root", f"{url!r} holds more than {limit} prefixes within {max_depth} levels, too "
                                "many to search for lake tables (each is a request).",
                                "Give a URL closer to the tables, e.g. the prefix that holds them.")
        for name in _child_prefixes(storage, rel):
            if name.startswith(".") or name == paths.META:
                continue
            child = f"{rel}/{name}" if rel else name
            if storage.exists(f"{child}/{paths.LOG}"):
                found.append(child)
            elif depth + 1 < max_depth:
                stack.append((child, depth + 1))
    return sorted(found)


def check_new_store_root(url: str, max_depth: int = 8) -> None:
    """Refuse to create a table at the store URL `url` inside another table or above one (nothing is written): one
    bounded LIST per enclosing prefix (`s3://b`, `s3://b/lake`, ...), and a search below `url` that stops at
    tables (one request when nothing lies under `url`, the usual case for a new table)."""
    scheme, _, rest = url.partition("://")
    parts = rest.split("/")
    for depth in range(1, len(parts)):
        outer = f"{scheme}://{'/'.join(parts[:depth])}"
        if store_holds_table(outer):
            raise LakeSpecError("table", f"{url!r} lies inside the lake table {outer!r}: the two would share files, "
                                "and a vacuum of either would delete the other's data.",
                                "Create the table under a prefix outside every other table.")
    inner = store_tables_below(url, max_depth)
    if inner:
        more = f" (and {len(inner) - 1} more)" if len(inner) > 1 else ""
        raise LakeSpecError("table", f"{url!r} holds the lake table {url}/{inner[0]}{more}: the two would share "
                            "files, and a vacuum of either would delete the other's data.",
                            "Create the table under a prefix that holds no table, e.g. a sibling of it.")


def _child_prefixes(storage: Storage, rel: str) -> list[str]:
    """Names of the "directories" right under `rel` of a store table root (the common prefixes of a delimiter
    listing; keys right under it are not returned), sorted; [] if there are none."""
    fs, root = stores.open_fs(storage.url)  # (the instance `Storage` uses: fsspec caches it, listings uncached)
    base = f"{root}/{rel}".rstrip("/") if rel else root
    if stores.is_s3(storage.url, fs):
        _, prefixes, _ = stores.s3_list(fs, base + "/")
        return sorted({p.rstrip("/") for p in prefixes} - {""})
    try:
        listed = fs.ls(base, detail=True)
    except FileNotFoundError:
        return []
    names = {str(item["name"]).rstrip("/").rsplit("/", 1)[-1] for item in listed
             if item.get("type") == "directory" and str(item["name"]).rstrip("/") != base}
    return sorted(names)
