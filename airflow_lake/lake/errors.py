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


class LakeCommitConflict(LakeError):
    """A concurrent commit changed what this writer read or replaces. Retryable: run the job again."""

    retryable = True


class LakeInstantRolledBack(LakeCommitConflict):
    """This writer's instant was rolled back by another process (its heartbeat went stale)."""


class LakeSnapshotNotFound(LakeError, LookupError):
    """The requested snapshot does not exist or its files were cleaned."""


class LakePlanAborted(LakeError):
    """A clustering plan cannot run any more (its input files were replaced, or it was rolled back); it was
    rolled back and nothing of it was committed. Schedule a new plan: the files are planned again."""
