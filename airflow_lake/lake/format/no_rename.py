"""A storage mode with an object store's semantics on local disk: no rename and no hard link of a data file.

Object stores have neither; the data path writes every file once under its final name and never moves it
(`spark/file_writer.py`). With `AIRFLOW_LAKE_FORBID_RENAME=1` in the environment, every local table root a `Storage`
opens is watched: a rename, replace or hard link (Python's `os` and `shutil`, seen through an audit hook) of a data
file (a `.parquet` file under the root, outside the metadata folders `_lake/` and `_delta_log/`) raises `LakeError`
instead of running, so a test suite run in this mode proves the data path needs neither. Metadata keeps the local
exclusive create (`link(2)`), which stands for a store's conditional write. Spark's own Hadoop committer renames
inside the JVM, where this hook does not reach: on a store the S3A committers write without renames (README, "Tables
on object stores").
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from airflow_lake.lake.errors import LakeError

ENV = "AIRFLOW_LAKE_FORBID_RENAME"
_EVENTS = {"os.rename": 2, "os.link": 2}  # os.replace raises "os.rename" too; event -> leading path arguments
_ROOTS: set[str] = set()
_METADATA = frozenset({"_lake", "_delta_log"})  # metadata folders: our log's, the published Delta log's (checkpoints)
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []  # [True] once the hook is in (audit hooks cannot be removed)


def enabled() -> bool:
    """Whether the environment asks for the mode."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def watch(root: str) -> None:
    """Forbid renames and links of data paths under the local table root `root` (for the rest of the process)."""
    with _LOCK:
        _ROOTS.add(os.path.abspath(root).rstrip(os.sep) + os.sep)
        if not _INSTALLED:
            sys.addaudithook(_hook)
            _INSTALLED.append(True)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    count = _EVENTS.get(event)
    if count is None or not _ROOTS:
        return
    for arg in args[:count]:
        if not isinstance(arg, (str, bytes, os.PathLike)):
            continue
        path = os.path.abspath(os.fsdecode(arg))
        if not path.endswith(".parquet"):
            continue  # not a data file: metadata writes (temporary files), directories
        for root in _ROOTS:
            if path.startswith(root) and not _METADATA.intersection(path[len(root):].split(os.sep)):
                raise LakeError(f"{event} of {path!r}: renames and links of data files are forbidden "
                                f"({ENV}=1, the storage mode with an object store's semantics).")
