"""All metadata I/O of the lake core goes through `Storage`, addressed by the table's URL.

Local paths (and `file://` URLs) are served with plain `os` calls: exclusive create is an atomic
`link(2)` of a fully written temporary file, so a reader never sees a half-written instant. Other
URLs go through fsspec (`stores.py`): an exclusive create there is the store's conditional write (S3's
`If-None-Match: *`, GCS's `ifGenerationMatch=0`, Azure's `If-None-Match: *`), a replace is one PUT, and
stores without a conditional write are refused for commits. Nothing on a store relies on a rename, a
directory's existence or a cached listing: a "directory" is a key prefix, and listings are never cached.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from airflow_lake.lake.errors import LakeSpecError, LakeUnsafePath
from airflow_lake.lake.format import no_rename, paths, stores

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
    """Files under one table root. Relative paths use '/' separators.

    Every relative path it is given passes `paths.confined` (area "table": normalized, relative, no scheme, no
    `..`), locally and on a store alike, so no key or file outside the root is ever addressed; locally, what it
    deletes or lists for deletion must also resolve inside the root (`refuse_escapes`): a symlink in the table
    never leads a delete outside it. Paths from metadata are checked for their own area (data) by whoever reads
    them, before this."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.local = is_local(self.url)
        self._fs: Any = None
        self._commits_checked = False
        self._read_options: dict[str, Any] = {}
        self._real_root: str | None = None  # the root with symlinks resolved (local), once needed
        self._s3 = False  # S3 through s3fs: listings and existence checks are single ListObjectsV2 requests
        if not self.local:
            self._fs, self._root = stores.open_fs(self.url)  # listing caches off; LakeSpecError if unknown
            self._s3 = stores.is_s3(self.url, self._fs)
            self._read_options = stores.read_options(self.url, self._fs)
        else:
            self._root = self.url
            if no_rename.enabled():
                no_rename.watch(self._root)

    def check_commits(self, *, probe: bool = False) -> None:
        """Refuse (`LakeError` naming the store, why and the fix) a store on which a commit cannot be atomic: one
        without a conditional write, or an fsspec package too old to send it (`stores.refusal`). `probe` also
        creates one key twice, which catches an S3-compatible server that ignores If-None-Match (run when a table
        is created). Local paths always pass: `link(2)` is the exclusive create there."""
        if self.local:
            return
        if not self._commits_checked:
            stores.check(self.url, self._fs)
            self._commits_checked = True
        if probe:
            stores.probe(self._fs, self._root, self.url)

    # -- paths ---------------------------------------------------------------------------------------
    def path(self, rel: str) -> str:
        """Absolute path (or store path) of `rel`, for Spark and pyarrow; `rel` is checked (`paths.confined`, area
        "table"; a `LakeUnsafePath` if it could leave the root)."""
        if not rel:
            return self._root
        paths.confined((rel,), f"a path asked of the table {self.url}", area="table", directories=True)
        return f"{self._root}/{rel}"

    def uri(self, rel: str) -> str:
        """A URL Spark can read and write: a plain absolute path locally; on a store the URL in the scheme of
        Hadoop's file system for it (`s3a://` for every S3 spelling: `stores.hadoop_url`)."""
        if self.local:
            return self.path(rel)
        self.path(rel)  # the same check
        root = stores.hadoop_url(self.url)
        return f"{root}/{rel}" if rel else root

    def refuse_escapes(self, rels: Iterable[str], source: str) -> None:
        """Raise `LakeUnsafePath` (naming `source`) if deleting one of `rels` could reach outside the table through
        a symlink (locally; a store has no symlinks): a file's directory, or a directory (ending in `/`) itself,
        must resolve inside the root. Callers check every path of one operation first, then delete."""
        if not self.local:
            return
        for rel in rels:
            self._inside(rel[:-1] if rel.endswith("/") else rel, source, whole=rel.endswith("/"))

    def _inside(self, rel: str, source: str, *, whole: bool) -> None:
        """`refuse_escapes` of one path: `whole` resolves the path itself (a directory to walk or remove), else its
        directory (a file to unlink: a symlink as the last segment is removed itself, never followed)."""
        target = self.path(rel)
        real = os.path.realpath(target if whole or not rel else os.path.dirname(target))
        if self._real_root is None:
            self._real_root = os.path.realpath(self._root)
        root = self._real_root
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise LakeUnsafePath(source, rel, f"reaches outside the table through a symlink (it resolves to {real!r})",
                                 paths.UNSAFE_FIX)

    @property
    def filesystem(self) -> Any:
        """The fsspec file system of a store (None locally), for readers that take one (pyarrow)."""
        return self._fs

    # -- reads ---------------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """True if the file or directory exists (on a store: the key, or any key under it as a prefix).

        On S3 one LIST (the key sorts first among the keys it begins; "key/" comes back as a common prefix)
        where s3fs asks twice for a missing key (HEAD, then a LIST for a "directory"): the log's head is
        found by asking for the entry after it, which is missing."""
        if self.local:
            return os.path.exists(self.path(rel))
        if not self._s3:
            return bool(self._fs.exists(self.path(rel)))
        path = self.path(rel).rstrip("/")
        keys, prefixes, truncated = stores.s3_list(self._fs, path, max_keys=2)
        if "" in keys or "/" in prefixes:
            return True
        if not truncated:  # every key beginning with this name was seen: none is it or lies under it
            return False
        return bool(stores.s3_list(self._fs, path + "/", delimiter="", max_keys=1)[0])

    def is_file(self, rel: str) -> bool:
        """True if the file exists: a key on a store, never a "directory" (a prefix other keys begin with).

        On S3 one HEAD (no listing, cheaper than one: the log's head is probed this way); locally a stat."""
        if self.local:
            return os.path.isfile(self.path(rel))
        if not self._s3:
            return bool(self._fs.isfile(self.path(rel)))
        bucket, _, key = self.path(rel).partition("/")
        try:
            self._fs.call_s3("head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return False
        return True

    @property
    def seeks(self) -> bool:
        """True if `list_after` is one listing from its start point (S3), not a full listing filtered."""
        return self._s3

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of a file."""
        if self.local:
            with open(self.path(rel), "rb") as handle:
                return handle.read()
        return bytes(self._fs.cat_file(self.path(rel), **self._read_options))

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
        base = self.path(rel_dir).rstrip("/")
        if self._s3:
            keys, prefixes, _ = stores.s3_list(self._fs, base + "/")  # one delimiter listing (paged)
            return sorted({n.rstrip("/") for n in keys + prefixes} - {""})
        try:  # a delimiter listing of the prefix (never from a cache: `stores.open_fs`)
            listed = self._fs.ls(base, detail=False)
        except FileNotFoundError:
            return []
        names = {p.rstrip("/").rsplit("/", 1)[-1] for p in listed if p.rstrip("/") != base}
        return sorted(names)

    def list_after(self, rel_dir: str, start_after: str) -> list[str]:
        """Names of the entries of a directory that sort after `start_after`, sorted; [] if it does not exist.
        On S3 one listing that starts there (ListObjectsV2 with StartAfter, paged by 1,000), not a full listing;
        elsewhere a full listing, filtered."""
        if not self._s3:
            return [name for name in self.list_dir(rel_dir) if name > start_after]
        keys, prefixes, _ = stores.s3_list(self._fs, self.path(rel_dir).rstrip("/") + "/", start_after=start_after)
        return sorted({n.rstrip("/") for n in keys + prefixes if n.rstrip("/") > start_after})

    def walk_files(self, rel_dir: str, *, markers: bool = False) -> list[str]:
        """Relative paths of all files under a directory (used by recovery, never by readers).

        `markers`: on S3 also the directory markers under it, as `<rel>/`: zero-byte keys ending in '/' that Hadoop's
        S3A connector puts for every directory it creates (a write directory, its magic committer's
        `__magic_job-*/` and task directories) and leaves behind, for whoever deletes a directory."""
        base = self.path(rel_dir)
        out: list[str] = []
        if self.local:
            self._inside(rel_dir.rstrip("/"), f"a listing of the table {self.url}", whole=True)
            for dirpath, _, names in os.walk(base):
                rel = os.path.relpath(dirpath, self._root).replace(os.sep, "/")
                out.extend(f"{rel}/{n}" if rel != "." else n for n in names)
            return sorted(out)
        base = base.rstrip("/")
        if self._s3:  # one listing without delimiter (paged)
            found = [f"{base}/{k}" for k in stores.s3_list(self._fs, base + "/", delimiter="")[0]]
        else:
            found = self._fs.find(base)
        with_markers = markers and self._s3
        return sorted(p[len(self._root) + 1:] for p in found
                      if p.startswith(base + "/") and (with_markers or not p.endswith("/")))

    def mtime(self, rel: str) -> float:
        """Modification time as a UNIX timestamp (on a store: its LastModified, by the store's clock, in
        whole seconds on S3; of a directory marker too, `walk_files(markers=True)`)."""
        if self.local:
            return os.stat(self.path(rel)).st_mtime
        if self._s3 and rel.endswith("/"):  # s3fs would take the key for a directory: asked as the key it is
            return stores.s3_modified(self._fs, self.path(rel))
        modified = self._fs.modified(self.path(rel))
        return float(modified.timestamp())

    def touched_at(self, rel: str) -> float:
        """When a writer last `touch`ed a file, by the writer's clock: its mtime locally; on a store the time
        `touch` wrote into it (a store's LastModified is another machine's clock, to the second), else its
        LastModified."""
        return self.touched(rel)[0]

    def touched(self, rel: str) -> tuple[float, str]:
        """(`touched_at`, a token that changes with every `touch`): locally the mtime and ctime in nanoseconds, on a
        store the file's content (the writer's time and a nonce). Liveness compares tokens, not times: a reader
        sees a writer live when its token changes (`instants.watch`), whatever the writer's clock says."""
        if self.local:
            stat = os.stat(self.path(rel))
            return stat.st_mtime, f"{stat.st_mtime_ns}.{stat.st_ctime_ns}"
        data = self.read_bytes(rel)
        token = data.decode("ascii", errors="replace")
        try:
            return float(token.split(" ", 1)[0]), token
        except ValueError:  # not written by `touch`
            return self.mtime(rel), token

    def size(self, rel: str) -> int:
        """Size of a file in bytes (0 for a directory marker)."""
        if self.local:
            return os.stat(self.path(rel)).st_size
        if rel.endswith("/"):
            return 0
        return int(self._fs.size(self.path(rel)))

    # -- writes --------------------------------------------------------------------------------------
    def makedirs(self, rel_dir: str) -> None:
        """Create a directory and its parents (nothing on a store: a key needs no directory)."""
        if self.local:
            os.makedirs(self.path(rel_dir), exist_ok=True)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace a file atomically (locally: write a temporary file, then rename it over the target; on a
        store: one PUT, which readers see whole or not at all)."""
        if not self.local:
            self._fs.pipe_file(self.path(rel), data)
            return
        target = self.path(rel)
        tmp = _write_temp(target, data)
        os.replace(tmp, target)

    def put_file(self, rel: str, data: bytes) -> None:
        """Write a new data file at its final, unique name, in place (a data file is never renamed: a store has no
        rename; a file cut short by a crash lies in its instant's write directory, which a rollback deletes)."""
        if not self.local:
            self._fs.pipe_file(self.path(rel), data)
            return
        self._inside(rel, f"a write in the table {self.url}", whole=False)
        target = self.path(rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "xb") as out:
            out.write(data)

    def write_json(self, rel: str, obj: Any) -> None:
        """Replace a JSON file atomically."""
        self.write_bytes(rel, dumps(obj))

    def create_json(self, rel: str, obj: Any) -> bool:
        """Create a JSON file only if it does not exist; atomic. Returns False if it already existed.

        On a store this is its conditional write (`stores.create`; refused with a LakeError where there is none).
        A create whose answer was lost and which the client sent again finds the file existing: it is read back,
        and our own bytes are a success (True). So every caller's payload must be unique to its writer (an instant
        id, a nonce): two writers' files never compare equal.
        """
        return self.create_bytes(rel, dumps(obj))

    def create_bytes(self, rel: str, data: bytes) -> bool:
        """`create_json` of bytes already encoded (a caller that keeps what it wrote: `CommitLog.try_append`)."""
        if not self.local:
            self.check_commits()
            return stores.create(self._fs, self.path(rel), data)
        target = self.path(rel)
        tmp = _write_temp(target, data)
        try:
            try:
                os.link(tmp, target)  # atomic, fails if the target exists; readers see all or nothing
            except FileExistsError:
                # on NFS a LINK whose reply was lost is sent again and fails with EEXIST although it was done:
                # then the target is our own temporary file's inode
                if not _same_file(tmp, target):
                    return False
            _fsync_dir(os.path.dirname(target))
            return True
        finally:
            os.unlink(tmp)

    def touch(self, rel: str) -> None:
        """Create an empty file or bump its modification time (on a store: write the time and a nonce into it, so
        every touch changes it even if the clock stood still, see `touched`)."""
        if self.local:
            target = self.path(rel)
            try:
                os.utime(target)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "ab"):
                    pass
        else:
            self._fs.pipe_file(self.path(rel), f"{time.time()!r} {os.urandom(4).hex()}".encode())

    def delete(self, rel: str) -> bool:
        """Delete a file; False if it was already gone (on S3 True either way: deleting a missing key succeeds)."""
        try:
            if self.local:
                self._inside(rel, f"a delete in the table {self.url}", whole=False)
                os.unlink(self.path(rel))
            elif rel.endswith("/"):  # a directory marker (`walk_files(markers=True)`): the key itself, literally
                if self._s3:
                    stores.s3_delete_keys(self._fs, [self.path(rel)])
            else:
                self._fs.rm_file(self.path(rel))
            return True
        except FileNotFoundError:
            return False

    def delete_tree(self, rel_dir: str, *, listed: Iterable[str] | None = None, also: Iterable[str] = ()) -> None:
        """Delete a directory and everything under it, and the files `also` with it; no error if any is gone.

        On a store one listing of the prefix (none if the caller `listed` its files already: `walk_files`, with
        `markers=True` for S3's directory markers to go too), then batch deletes of exactly those keys and `also`
        (1,000 a request). Locally the directory and `also` go one by one."""
        if self.local:
            self._inside(rel_dir.rstrip("/"), f"a delete in the table {self.url}", whole=True)
            shutil.rmtree(self.path(rel_dir), ignore_errors=True)
            for rel in also:
                self.delete(rel)
            return
        rels = list(self.walk_files(rel_dir, markers=True) if listed is None else listed)
        marker_keys = [self.path(rel) for rel in rels if rel.endswith("/")]
        if marker_keys and self._s3:  # S3A's directory markers: left behind, a deleted directory would stay listed
            stores.s3_delete_keys(self._fs, marker_keys)
        keys = [self.path(rel) for rel in [*rels, *also] if not rel.endswith("/")]
        literal = [k for k in keys if not has_magic(k)]  # fsspec would take `[`, `*`, `?` for a glob
        if literal:
            with contextlib.suppress(FileNotFoundError):
                self._fs.rm(literal)
        for key in keys:
            if has_magic(key):
                with contextlib.suppress(FileNotFoundError):
                    self._fs.rm_file(key)


    # -- uploads in progress -----------------------------------------------------------------------
    def incomplete_uploads(self, rel_dir: str = "") -> list[Upload]:
        """The multipart uploads started under a directory and never completed nor aborted: on S3 (Hadoop's S3A
        uploads every file that way, and its magic committer completes them only at job commit: a writer killed
        before leaves them, invisible as objects, their parts billed); [] elsewhere."""
        if not self._s3:
            return []
        base = self.path(rel_dir).rstrip("/") + "/"
        rel_base = base[len(self._root) + 1:]
        return [Upload(rel_base + key, upload_id, initiated)
                for key, upload_id, initiated in stores.s3_uploads(self._fs, base)]

    def abort_upload(self, upload: Upload) -> None:
        """Abort a multipart upload (`incomplete_uploads`): its parts are freed; one gone meanwhile is no error."""
        stores.s3_abort_upload(self._fs, self.path(upload.rel), upload.upload_id)


class Upload(NamedTuple):
    """A multipart upload in progress: the key it will create (relative to the table root), its id, and when it
    was initiated (UNIX time, the store's clock)."""

    rel: str
    upload_id: str
    initiated: float


def has_magic(path: str) -> bool:
    """True if fsspec would expand `path` as a glob pattern (a partition value may hold such characters)."""
    return any(ch in path for ch in "*?[")


def _same_file(one: str, other: str) -> bool:
    """Whether two paths are one file (False if either is gone)."""
    try:
        return os.path.samefile(one, other)
    except FileNotFoundError:
        return False


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


def dumps(obj: Any) -> bytes:
    """The bytes every JSON file of the lake is written as (compact, keys sorted)."""
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
