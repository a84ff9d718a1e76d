"""Exceptions of the Airflow shell."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException


class LakeJobError(AirflowException):
    """A lake job failed; the message ends with the tail of the Spark output."""


class LakeJobConflict(LakeJobError):
    """A lake job lost an optimistic-concurrency race; retrying the task is safe."""
