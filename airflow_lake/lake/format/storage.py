"""All metadata I/O of the lake core goes through `Storage`, addressed by the table's URL.

Local paths (and `file://` URLs) are served with plain `os` calls: exclusive create is an atomic
`link(2)` of a fully written temporary file, so a reader never sees a half-written instant. Other
URLs go through fsspec; stores without an atomic exclusive create are refused for commits.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlparse

from airflow_lake.lake.errors import LakeError, LakeSpecError

_fast_decode: Callable[[bytes], Any] | None
try:  # installed with Airflow; decodes a log entry of 1,000 files in 2 ms where json takes 6
    from msgspec import DecodeError as _FastDecodeError
    from msgspec.json import decode as _msgspec_decode

    _fast_decode = _msgspec_decode
except ImportError:  # pragma: no cover - a lake core used without Airflow
    _fast_decode = None


def normalize_url(url: str | os.PathLike[str]) -> str:
    """Canonical form of a table URL: an absolute local path, or the URL as given for other schemes."""
    raw = os.fspath(url) if isinstance(url, os.PathLike) else url
    if not isinstance(raw, str):
        raise LakeSpecError("table", f"{url!r} is not a table path.",
                            "Give a directory path or a file:// URL as a string.")
    text = raw.strip()
    if not text:
        raise LakeSpecError("table", f"{raw!r} is an empty table path.", "Give a directory path or a file:// URL.")
    if "\x00" in text:
        raise LakeSpecError("table", f"{raw!r} contains a NUL byte.", "Give a table path without NUL characters.")
    parsed = urlparse(text)
    if parsed.scheme in ("", "file"):
        path = unquote(parsed.path) if parsed.scheme == "file" else text
        return os.path.abspath(os.path.expanduser(path))
    return text.rstrip("/")


def is_local(url: str) -> bool:
    """True for plain paths and file:// URLs."""
    return urlparse(str(url)).scheme in ("", "file") or os.path.isabs(str(url))


class Storage:
    """Files under one table root. Relative paths use '/' separators."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.local = is_local(self.url)
        self._fs: Any = None
        if not self.local:
            import fsspec  # only object stores need it

            try:
                self._fs, self._root = fsspec.core.url_to_fs(self.url)
            except (ImportError, ValueError) as err:  # an unknown protocol, or its package is not installed
                raise LakeSpecError("table", f"cannot open {self.url!r}: {err}",
                                    "Use a local or mounted path (lake tables live on a file system path).") from err
        else:
            self._root = self.url

    # -- paths ---------------------------------------------------------------------------------------
    def path(self, rel: str) -> str:
        """Absolute path (or store path) of `rel`, for Spark and pyarrow."""
        return f"{self._root}/{rel}" if rel else self._root

    def uri(self, rel: str) -> str:
        """A URL Spark can read: a plain absolute path locally, the scheme-qualified URL otherwise."""
        return self.path(rel) if self.local else f"{self.url}/{rel}"

    # -- reads ---------------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """True if the file or directory exists."""
        if self.local:
            return os.path.exists(self.path(rel))
        return bool(self._fs.exists(self.path(rel)))

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of a file."""
        if self.local:
            with open(self.path(rel), "rb") as handle:
                return handle.read()
        return bytes(self._fs.cat_file(self.path(rel)))

    def read_json(self, rel: str) -> Any:
        """Parse a JSON file."""
        return loads(self.read_bytes(rel))

    def list_dir(self, rel_dir: str) -> list[str]:
        """Names of the entries of a directory, sorted; [] if it does not exist."""
        if self.local:
            try:
                return sorted(os.listdir(self.path(rel_dir)))
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self._fs.ls(self.path(rel_dir), detail=False))
        except FileNotFoundError:
            return []

    def walk_files(self, rel_dir: str) -> list[str]:
        """Relative paths of all files under a directory (used by recovery, never by readers)."""
        base = self.path(rel_dir)
        out: list[str] = []
        if self.local:
            for dirpath, _, names in os.walk(base):
                rel = os.path.relpath(dirpath, self._root).replace(os.sep, "/")
                out.extend(f"{rel}/{n}" if rel != "." else n for n in names)
            return sorted(out)
        return sorted(p[len(self._root) + 1:] for p in self._fs.find(base))

    def mtime(self, rel: str) -> float:
        """Modification time as a UNIX timestamp."""
        if self.local:
            return os.stat(self.path(rel)).st_mtime
        modified = self._fs.modified(self.path(rel))
        return float(modified.timestamp())

    def size(self, rel: str) -> int:
        """Size of a file in bytes."""
        if self.local:
            return os.stat(self.path(rel)).st_size
        return int(self._fs.size(self.path(rel)))

    # -- writes --------------------------------------------------------------------------------------
    def makedirs(self, rel_dir: str) -> None:
        """Create a directory and its parents."""
        if self.local:
            os.makedirs(self.path(rel_dir), exist_ok=True)
        else:
            self._fs.makedirs(self.path(rel_dir), exist_ok=True)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace a file atomically (write a temporary file, then rename it over the target)."""
        if not self.local:
            self._fs.pipe_file(self.path(rel), data)
            return
        target = self.path(rel)
        tmp = _write_temp(target, data)
        os.replace(tmp, target)

    def write_json(self, rel: str, obj: Any) -> None:
        """Replace a JSON file atomically."""
        self.write_bytes(rel, _dumps(obj))

    def create_json(self, rel: str, obj: Any) -> bool:
        """Create a JSON file only if it does not exist; atomic. Returns False if it already existed."""
        data = _dumps(obj)
        if not self.local:
            try:
                with self._fs.open(self.path(rel), "xb") as handle:
                    handle.write(data)
                return True
            except FileExistsError:
                return False
            except (ValueError, NotImplementedError) as err:
                raise LakeError(
                    f"the store behind {self.url!r} has no atomic exclusive create, so commits cannot be "
                    "made safe there. Fix: use a local or mounted path for now."
                ) from err
        target = self.path(rel)
        tmp = _write_temp(target, data)
        try:
            os.link(tmp, target)  # atomic, fails if the target exists; readers see all or nothing
            _fsync_dir(os.path.dirname(target))
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def touch(self, rel: str) -> None:
        """Create an empty file or bump its modification time."""
        if self.local:
            target = self.path(rel)
            try:
                os.utime(target)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "ab"):
                    pass
        else:
            self._fs.pipe_file(self.path(rel), str(time.time()).encode())

    def rename(self, src: str, dst: str) -> None:
        """Move a file within the table (atomic on a local file system); creates the target's directory.

        Refuses to replace an existing target: data file names are never reused.
        """
        if not self.local:
            if self._fs.exists(self.path(dst)):
                raise FileExistsError(self.path(dst))
            self._fs.mv(self.path(src), self.path(dst))
            return
        target = self.path(dst)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(self.path(src), target)  # fails if the target exists, unlike rename(2)
        os.unlink(self.path(src))

    def delete(self, rel: str) -> bool:
        """Delete a file; False if it was already gone."""
        try:
            if self.local:
                os.unlink(self.path(rel))
            else:
                self._fs.rm_file(self.path(rel))
            return True
        except FileNotFoundError:
            return False

    def delete_tree(self, rel_dir: str) -> None:
        """Delete a directory and everything under it; no error if it is gone."""
        if self.local:
            shutil.rmtree(self.path(rel_dir), ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                self._fs.rm(self.path(rel_dir), recursive=True)


def _fsync_dir(path: str) -> None:
    """Make a new directory entry durable (a completed commit must survive a power loss)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def loads(data: bytes) -> Any:
    """`json.loads`, faster: what msgspec refuses and json takes (NaN, Infinity and lone surrogates, which
    `json.dumps` writes) or refuses too (a damaged file, whose error json words) goes to json."""
    if _fast_decode is not None:
        try:
            return _fast_decode(data)
        except _FastDecodeError:
            pass
    return json.loads(data)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str).encode()


def _write_temp(target: str, data: bytes) -> str:
    """Write `data` durably to a fresh temporary file beside `target` (made unique), and return its path."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return tmp
