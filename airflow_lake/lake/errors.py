"""Errors of the lake core. Every error says what is wrong and how to fix it."""

from __future__ import annotations


class LakeError(Exception):
    """Base class of every lake error."""


class LakeSpecError(LakeError, ValueError):
    """A spec (table spec or operation spec) is invalid; raised before anything is written."""

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f" Fix: {fix}"
        super().__init__(message)


class LakeSchemaError(LakeError, ValueError):
    """Data does not match the table's schema; raised before anything is committed."""


class LakeTableNotFound(LakeError, FileNotFoundError):
    """No lake table exists at the given path."""


class LakeTableExists(LakeError, FileExistsError):
    """A lake table already exists at the given path."""


class LakeUnsafePath(LakeError):
    """A path taken from table metadata (a log entry, checkpoint, manifest, marker, plan) is not a normalized path
    inside the table's data area, or reaches outside the table through a symlink. Raised before anything is read,
    listed or deleted; nothing of the operation happened. `source` names the metadata file (or field) that holds
    the path."""

    def __init__(self, source: str, path: object, problem: str, fix: str = "") -> None:
        self.source = source
        self.path = path
        self.problem = problem
        text = path if isinstance(path, str) and len(path) <= 200 else repr(path)[:200]
        message = (f"{source} names the path {text!r}, which {problem}. Nothing was read or deleted: a path from "
                   "table metadata must be relative, normalized and inside the table's data area.")
        super().__init__(f"{message} Fix: {fix}" if fix else message)


class LakeCommitConflict(LakeError):
    """A concurrent commit changed what this writer read or replaces. Retryable: run the job again."""

    retryable = True


class LakeInstantRolledBack(LakeCommitConflict):
    """This writer's instant was rolled back by another process (its heartbeat went stale)."""


class LakeSnapshotNotFound(LakeError, LookupError):
    """The requested snapshot does not exist or its files were cleaned."""


class LakeChangesUnavailable(LakeSnapshotNotFound):
    """The changes asked for start before the oldest snapshot changes can start from: `clean` deleted files or
    expired log entries the window needs. `oldest` is the oldest start that works (`start=-1`, the whole table
    as inserts, always does)."""

    def __init__(self, message: str, start: int, oldest: int) -> None:
        super().__init__(message)
        self.start = start
        self.oldest = oldest


class LakePlanAborted(LakeError):
    """A clustering plan cannot run any more (its input files were replaced, or it was rolled back); it was
    rolled back and nothing of it was committed. Schedule a new plan: the files are planned again."""


class LakeShuffleError(LakeError):
    """A write that must stay shuffle-free (`max_exchanges`) would shuffle; raised before anything is written."""

    def __init__(self, query: int, write: int, allowed: int, plan: str) -> None:
        self.query_exchanges = query
        self.write_exchanges = write
        self.allowed = allowed
        exchanges = [line.strip(" :+-*") for line in plan.splitlines()
                     if "Exchange" in line and "BroadcastExchange" not in line and "ReusedExchange" not in line]
        super().__init__(
            f"the plan has {query + write} shuffle Exchange(s) ({query} in the query, {write} added by the write), "
            f"more than max_exchanges={allowed}: {' | '.join(exchanges)[:1500]}. Fix: read the inputs as "
            "bucketed lake tables with the same bucket columns (or counts that are multiples of each other) and "
            "join / group by those columns, write into a table bucketed the same way, or raise max_exchanges.")
