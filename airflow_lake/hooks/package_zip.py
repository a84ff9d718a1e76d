"""A zip of the airflow_lake package for `--py-files` and Spark Connect artifacts, so executors import the same
code.

Whatever that zip holds runs on the driver and on every executor, so no one else may choose its bytes. It is
kept in a directory only this user can write (`private_dir`: `$AIRFLOW_LAKE_CACHE_DIR`, else
`$XDG_CACHE_HOME/airflow-lake` or `~/.cache/airflow-lake`, checked to be ours, not a symlink, not writable by
others; else a fresh `mkdtemp` directory for this process), and a zip found there is used only if its bytes
are exactly those this installation builds: the build is deterministic and cheap (about 30 ms for the whole
package), so each call builds it in memory and compares; a missing, stale or tampered file is replaced.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import airflow_lake

PACKAGE_DIR = Path(airflow_lake.__file__).parent
CACHE_ENV = "AIRFLOW_LAKE_CACHE_DIR"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same sources give the same bytes
UNUSED_DAYS = 7
log = logging.getLogger(__name__)
_lock = threading.Lock()
_process_dir: list[Path] = []  # the fallback directory of this process, once made


def package_zip() -> str:
    """Path of a zip of the installed package, in a private directory, holding exactly this package's sources."""
    data = build_package_zip()
    name = f"airflow_lake-{hashlib.sha256(data).hexdigest()[:16]}.zip"  # content-addressed: a name means one content
    target = private_dir() / name
    if _read_own_file(target) == data:
        with contextlib.suppress(OSError):
            os.utime(target)  # in use: kept by `_prune`
    else:
        _write_atomically(target, data)
        _prune(target)
    return str(target)


def build_package_zip() -> bytes:
    """The zip's bytes: every `.py` file of the package and `py.typed`, in a fixed order with fixed times."""
    sources = sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in [*sources, PACKAGE_DIR / "py.typed"]:
            info = zipfile.ZipInfo(str(Path("airflow_lake") / path.relative_to(PACKAGE_DIR)), _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def private_dir() -> Path:
    """A directory that only this user can write: the per-user cache if it is one, else a fresh temporary
    directory for this process (removed at exit)."""
    configured = os.environ.get(CACHE_ENV)
    try:
        base = Path(configured) if configured else (
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-lake")
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = not_private(base)
    except (OSError, RuntimeError) as err:  # RuntimeError: no home directory
        problem = str(err)
    if problem is None:
        return base
    log.warning("not using %s for the package zip: %s; using a temporary directory of this process", base,
                problem)
    return _temporary_dir()


def not_private(path: Path) -> str | None:
    """Why others could write in directory `path` (None if they cannot): it must be a real directory of
    this user, writable by no one else, in a parent others cannot rename it out of."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to this user ({os.geteuid()})"
    if st.st_mode & 0o022:
        return f"others can write in it (mode {stat.S_IMODE(st.st_mode):o})"
    parent = os.stat(path.parent)
    if parent.st_mode & 0o002 and not parent.st_mode & stat.S_ISVTX:
        return f"others can replace it: {path.parent} is writable by all and not sticky"
    return None


def _temporary_dir() -> Path:
    with _lock:
        if not _process_dir or not _process_dir[0].is_dir():
            made = Path(tempfile.mkdtemp(prefix="airflow-lake-"))  # mode 0700, a name no one chose
            atexit.register(shutil.rmtree, str(made), True)
            _process_dir[:] = [made]
        return _process_dir[0]


def _read_own_file(path: Path) -> bytes | None:
    """The bytes of regular file `path` (not through a symlink), None if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read() if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _prune(keep: Path) -> None:
    """Delete the zips of other builds that no one has used for `UNUSED_DAYS` (a job still running with one
    re-reads it on every import, so recent ones stay)."""
    cutoff = time.time() - UNUSED_DAYS * 86400
    for old in keep.parent.glob("airflow_lake-*.zip"):
        with contextlib.suppress(OSError):
            if old != keep and old.lstat().st_mtime < cutoff:
                old.unlink()


def _write_atomically(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".airflow_lake-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # a reader of the old file (a running job) keeps it whole
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
