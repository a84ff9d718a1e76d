"""The spec's history: every spec a table had, and whether a spec someone gives is one the table reached its
current spec from through the provider's own operations.

A daily DAG's `create_table` task (`if_exists="ignore"`) keeps giving the spec the table was created with, while
a one-off `bucket_rewrite`, an `alter_table` or a write with schema evolution moves the table on. That spec is
accepted when it equals the table's spec at some entry of its log and every entry that changed the spec since is
one of the provider's spec-changing operations; otherwise the refusal names every field that differs.

Reading the history costs one log read per spec change, not a fold of the log: the state indexes the entries
that set the spec (`TableState.spec_changes`, kept in checkpoints). A state from a checkpoint written before
that index has none; then the log is scanned once, raw, parsing only the entries whose text holds a spec.

Once `clean` expired old log entries (`log.retain.hours`), the changes they made are gone from the history
(the create, entry 0, is always kept): a spec the table had only in between is then not recognised, and a change
it cannot read any more is not checked for being one of the provider's operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.errors import LakeTableExists
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.log import LogEntryExpired
from airflow_lake.lake.format.operation_names import same_operation
from airflow_lake.lake.spec.spec_diff import SpecDifference, describe, same_spec, spec_diff
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

# The provider's operations whose commits set a table's spec (`metadata.spec`): the create, alter_table, a
# bucket_rewrite to another bucket spec, a write or upsert with schema evolution, and a restore.
SPEC_OPERATIONS = ("create_table", "alter_table", "bucket_rewrite", "write", "versioned_upsert", "restore")
_SPEC_KEY = b'"spec":'  # how a metadata spec key looks in a log entry (compact JSON: `storage.dumps`)


@dataclass(frozen=True)
class SpecChange:
    """A log entry that set the table's spec."""

    seq: int
    instant: str
    operation: str
    spec: TableSpec

    def to_dict(self) -> dict[str, Any]:
        """JSON form (XCom): where the change is in the log, and what made it."""
        return {"seq": self.seq, "instant": self.instant, "operation": self.operation}


@dataclass(frozen=True)
class SpecReached:
    """A given spec the table's current spec was reached from: the entry that last set it (None: it is the
    current spec), the entries that changed the spec since, and the differences from it to the current spec."""

    since: SpecChange | None
    changes: tuple[SpecChange, ...] = ()
    differences: tuple[SpecDifference, ...] = ()

    def describe(self) -> str:
        """One line for the task log."""
        if not self.differences:
            return "the given spec is the table's current spec"
        made = ", ".join(f"{c.operation} (entry {c.seq}, instant {c.instant})" for c in self.changes)
        assert self.since is not None
        return (f"the given spec was the table's spec as of entry {self.since.seq}; changed since by {made}: "
                f"{describe(self.differences)}")


def spec_changes(table: TableMetadata) -> list[SpecChange]:
    """Every entry that set the table's spec and is still in the log, oldest first (the create is the first)."""
    state = table.state()
    seqs = state.spec_changes if state.spec_changes is not None else _scan(table, state.seq)
    out = []
    for seq in seqs:
        try:
            entry = table.commit_log.read(seq)
        except LogEntryExpired:
            continue  # expired with the log before the retention (module doc)
        out.append(SpecChange(seq, entry.instant, entry.operation, stored_spec(entry.metadata["spec"])))
    return out


def _scan(table: TableMetadata, upto: int) -> list[int]:
    """The seqs of the entries up to `upto` whose metadata holds a spec, from the raw log (a state without the
    index). Only entries whose text holds the key are parsed."""
    start = table.commit_log.start()
    out = [0] if start > 0 else []  # the create, kept when older entries expired
    for seq in range(start, upto + 1):
        if _SPEC_KEY in table.storage.read_bytes(paths.log_file(seq)) and \
                "spec" in table.commit_log.read(seq).metadata:
            out.append(seq)
    return out


def reached_from(table: TableMetadata, given: TableSpec) -> SpecReached:
    """How the table's current spec was reached from `given`; `LakeTableExists` naming every difference when it
    was not: `given` was never the table's spec, or a change since was not one of the provider's operations."""
    current = table.spec
    if same_spec(given, current):
        return SpecReached(None)
    differences = tuple(spec_diff(given, current))
    history = spec_changes(table)
    # the last time the table had the given spec: the changes since are the fewest
    match = next((i for i in range(len(history) - 1, -1, -1) if same_spec(history[i].spec, given)), None)
    fix = (f"Give the table's current spec (`airflow-lake show {table.url}`) or a spec it had before (as created, "
           "or before a bucket_rewrite, alter_table or schema evolution), or use another path.")
    head = (f"a lake table with a different spec exists at {table.url!r}; from the given spec to the table's "
            f"current one, {len(differences)} difference(s): {describe(differences)}.")
    if match is None:
        # a typo in the DAG's spec shows best against the spec nearest to it (often the one it was created with)
        nearest = min(history[:-1], key=lambda c: len(spec_diff(given, c.spec)), default=None)
        near = "" if nearest is None or len(spec_diff(given, nearest.spec)) >= len(differences) else (
            f" Nearest is its spec as of entry {nearest.seq} ({nearest.operation}), from which: "
            f"{describe(spec_diff(given, nearest.spec))}.")
        start = table.commit_log.start()
        known = "was never the table's spec" if start == 0 else \
            f"is none of the table's specs the log still holds (it starts at entry {start}: older ones expired)"
        raise LakeTableExists(f"{head} The given spec {known} (set by "
                              f"{', '.join(f'{c.operation} at entry {c.seq}' for c in history)}).{near} Fix: {fix}")
    since = history[match]
    changes = tuple(c for prior, c in zip(history[match:], history[match + 1:], strict=False)
                    if not same_spec(c.spec, prior.spec))
    foreign = [c for c in changes if not any(same_operation(c.operation, name) for name in SPEC_OPERATIONS)]
    if foreign:
        raise LakeTableExists(f"{head} The given spec was the table's spec as of entry {since.seq}, but entry "
                              f"{foreign[0].seq} (operation {foreign[0].operation!r}, instant {foreign[0].instant}) "
                              f"changed it, which is none of the provider's spec-changing operations "
                              f"({', '.join(SPEC_OPERATIONS)}). Fix: {fix}")
    return SpecReached(since, changes, differences)
