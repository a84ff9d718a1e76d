"""Operation names as log entries record them, and the names three operations had before issue 21.

Entries written before the rename keep the old name for good (the log is append-only), and a retry of such
a request must still find its entry: compare recorded names with `same_operation`, never with `==`.
"""

from __future__ import annotations

# old name -> new name; the new names are taken from Hudi and Iceberg (docs/api.md, "Names")
RENAMED: dict[str, str] = {
    "vacuum": "remove_orphan_files",
    "rollback": "rollback_pending",
    "compact": "compact_upserts",
}


def current_name(operation: str) -> str:
    """The name `operation` goes by now (itself unless it is an old name)."""
    return RENAMED.get(operation, operation)


def same_operation(recorded: str, operation: str) -> bool:
    """Whether a log entry recorded as `recorded` was made by `operation`, under either of its names."""
    return current_name(recorded) == current_name(operation)
