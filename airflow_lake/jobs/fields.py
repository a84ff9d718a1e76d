"""Reading operation specs field by field, with errors that name the field and the fix.

The reader lives in the lake core (`airflow_lake.lake.spec_reader`) because the table spec and every
operation, present and future, read their nested objects with it; this module keeps the job-side name.
"""

from __future__ import annotations

from airflow_lake.lake.spec_reader import SpecReader

__all__ = ["SpecReader"]
