"""The published Delta log's layout: `_delta_log/<version:020d>.json`, one version per entry of our log (Delta
version = our sequence number, so `VERSION AS OF n` means the same snapshot everywhere), and how far it goes.

Versions are written in order and exclusively (Delta's put-if-absent, our `Storage.create_bytes`), each only after
the one before it exists, so the published versions are always a run without gaps: the newest is found by a binary
search of a few existence checks, from the newest Delta checkpoint on (versions before it may be cleaned up).
"""

from __future__ import annotations

import json
from typing import Any

from airflow_lake.lake.format.storage import Storage

DELTA_LOG = "_delta_log"
LAST_CHECKPOINT = f"{DELTA_LOG}/_last_checkpoint"


def version_file(version: int) -> str:
    """The file of Delta version `version`."""
    return f"{DELTA_LOG}/{version:020d}.json"


def encode(actions: list[dict[str, Any]]) -> bytes:
    """A version file's bytes: one action per line."""
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def version_of(name: str) -> int | None:
    """The version a file of `_delta_log/` belongs to (a version, a checkpoint), or None."""
    head, _, rest = name.partition(".")
    if len(head) != 20 or not head.isdigit() or rest not in ("json", "checkpoint.parquet"):
        return None
    return int(head)


def checkpoint_version(storage: Storage) -> int:
    """The version `_last_checkpoint` names (-1: none, or unreadable: the search then starts at the beginning)."""
    try:
        raw = storage.read_json(LAST_CHECKPOINT)
        version = raw["version"]
    except (OSError, KeyError, ValueError, TypeError):  # missing, a damaged `_delta_log` (a file), not JSON
        return -1
    return version if isinstance(version, int) and not isinstance(version, bool) and version >= 0 else -1


def checkpoint_file(version: int) -> str:
    """The checkpoint file of `version`."""
    return f"{DELTA_LOG}/{version:020d}.checkpoint.parquet"


def newest(storage: Storage, head: int) -> tuple[int, bytes | None]:
    """`published_upto`, cheaper in the usual case (after a commit, only its own entry is new): the version `head`,
    else `head - 1`, read outright (a GET each on a store, where an existence check costs a LIST), with the bytes of
    the version found when it was read (None when found otherwise)."""
    for version in (head, head - 1):
        if version < 0:
            return -1, None
        try:
            return version, storage.read_bytes(version_file(version))
        except FileNotFoundError:
            continue
    return published_upto(storage, head - 2), None


def published_upto(storage: Storage, head: int) -> int:
    """The newest published version at or before `head` (-1: none). The log may start at a checkpoint (versions
    before it cleaned up, or never written: `delta_checkpoint.py`)."""
    if head < 0:
        return -1
    if storage.exists(version_file(head)):
        return head
    low = min(checkpoint_version(storage), head - 1)  # published (or -1); `head` is not
    if low >= 0 and not (storage.exists(checkpoint_file(low)) or storage.exists(version_file(low))):
        low = -1  # a checkpoint pointer beyond the versions (a damaged or foreign pointer): search them all
    high = head
    while high - low > 1:
        middle = (low + high) // 2
        if storage.exists(version_file(middle)):
            low = middle
        else:
            high = middle
    return low
