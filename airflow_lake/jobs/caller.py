"""The spec's `airflow` field: the Airflow task instance that submitted the job, recorded by its commits.

    {"table": ..., "request_id": ..., "airflow": {"dag_id": "lake_daily", "run_id": "scheduled__2024-03-01...",
                                                  "task_id": "load", "map_index": -1, "try_number": 1}}

Optional and the same for every operation, so it is read here, before the operation parses the rest: it is not
an input of the request (never in its fingerprint: a retry with try_number 2 is the same request), it only says
who asked. Every log entry (and pending instant) the operation writes records it in its metadata under
`airflow` (`lake.format.commit_info`), which the timeline, the CLI and the Lake page read.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.format.commit_info import recorded_with
from airflow_lake.lake.spec.strict import MAX_EXACT_INT

FIELD = "airflow"  # also the key of the log entry's metadata
TEXT_KEYS = ("dag_id", "run_id", "task_id")
NUMBER_KEYS = ("map_index", "try_number")  # map_index -1: not mapped
_LOWEST = {"map_index": -1, "try_number": 0}
_FIX = ('Give {"dag_id": str, "run_id": str, "task_id": str, "map_index": int, "try_number": int} (what '
        "LakeOperator sends), or leave `airflow` out.")


def split(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """The spec without its `airflow` field, and that field checked (None when it is left out or null)."""
    if not isinstance(spec, Mapping) or FIELD not in spec:
        return spec, None
    body = {k: v for k, v in spec.items() if k != FIELD}
    raw = spec[FIELD]
    return body, None if raw is None else check(raw)


def check(raw: Any) -> dict[str, Any]:
    """The task instance a spec names, every key present with its type (a typo must not go unrecorded)."""
    if not isinstance(raw, Mapping):
        raise LakeSpecError(FIELD, f"expected an object, got {raw!r}.", _FIX)
    unknown = sorted(set(raw) - {*TEXT_KEYS, *NUMBER_KEYS}, key=str)
    if unknown:
        raise LakeSpecError(f"{FIELD}.{unknown[0]}", "unknown field.", _FIX)
    out: dict[str, Any] = {}
    for key in TEXT_KEYS:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise LakeSpecError(f"{FIELD}.{key}", f"expected a non-empty string, got {value!r}.", _FIX)
        out[key] = value
    for key in NUMBER_KEYS:
        value = raw.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON written by other tools may carry 1.0
        if isinstance(value, bool) or not isinstance(value, int) or not _LOWEST[key] <= value <= MAX_EXACT_INT:
            raise LakeSpecError(f"{FIELD}.{key}", f"expected a whole number >= {_LOWEST[key]}, got {value!r}.", _FIX)
        out[key] = value
    return out


def recorded(caller: Mapping[str, Any] | None) -> AbstractContextManager[None]:
    """A block in which every commit records `caller` (nothing when None)."""
    return nullcontext() if caller is None else recorded_with({FIELD: dict(caller)})


__all__ = ["FIELD", "check", "recorded", "split"]
