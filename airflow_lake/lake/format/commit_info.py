"""Commit info: what every log entry and pending instant written in a context records about who wrote it.

    with recorded_with({"airflow": {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1,
                                    "try_number": 1}}):
        table.write(df)  # its log entry's metadata holds "airflow"

Kept in the context, not passed down each operation: every writer of the log (transactions, the small entries
of rollback / clean / orphan removal, table creation) and of pending instants (clustering plans) gets it in the
one place they all pass (`CommitLog.try_append`, `instants.request`), so no operation can forget it. Delta's
commitInfo records the job and notebook that made a commit the same way. A context variable, so two threads
(or tasks) committing at once each record their own; a thread started inside the context does not inherit it.

What it holds is the caller's business (the job runner puts the Airflow task instance under "airflow"); it is
never part of a request's fingerprint, so a retry (another try number) is still the same request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

_NOTHING: Mapping[str, Any] = MappingProxyType({})
_CURRENT: ContextVar[Mapping[str, Any]] = ContextVar("airflow_lake_commit_info", default=_NOTHING)


@contextmanager
def recorded_with(info: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, every log entry and pending instant written records `info`'s keys in its metadata
    (added to what an enclosing block records)."""
    token = _CURRENT.set(MappingProxyType({**_CURRENT.get(), **info}))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> dict[str, Any]:
    """What an entry written now records (empty outside `recorded_with`)."""
    return dict(_CURRENT.get())


def stamp(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """`metadata` with the context's info added; a key the writer set itself is kept as it set it."""
    return {**_CURRENT.get(), **metadata}


__all__ = ["current", "recorded_with", "stamp"]
