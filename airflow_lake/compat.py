"""Airflow names that moved between the Airflow versions we support (3.1 to 3.3), imported from one place.

Airflow 3.2 moved `SkipMixin` and `AirflowFailException` into the Task SDK (`airflow.sdk`); 3.1 has them at their
old homes (where 3.2+ warns that they are deprecated). The new home is tried first. Light: imports no pyspark,
so operators and DAG files may import it at parse time. The lake core never imports it (it imports no Airflow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type-checked against the pinned (newest) Airflow
    from airflow.sdk.bases.skipmixin import SkipMixin
    from airflow.sdk.exceptions import AirflowFailException
else:
    try:
        from airflow.sdk.bases.skipmixin import SkipMixin
    except ImportError:  # Airflow 3.1: the standard provider's, as its own ShortCircuitOperator uses there
        from airflow.providers.standard.utils.skipmixin import SkipMixin
    try:
        from airflow.sdk.exceptions import AirflowFailException
    except ImportError:  # Airflow 3.1
        from airflow.exceptions import AirflowFailException

__all__ = ["AirflowFailException", "SkipMixin"]
