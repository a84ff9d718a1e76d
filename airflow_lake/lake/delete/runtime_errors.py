"""A delete's `where` that fails on a row while Spark evaluates it: a clear error naming the predicate.

The guard (`predicate.vet_where`) judges a `where` by its analyzed plan and runs nothing, so an expression that is
well formed but fails on some value — a division by zero under ANSI SQL, `assert_true`, `raise_error`, a cast of
text that is no number — fails only when Spark evaluates it: while the matches are counted (nothing written yet), or
while the files are rewritten (the instant is rolled back: nothing committed). Either way the Java stack that comes
out names neither the field nor the fix; this turns it into a `LakeSpecError` on `where`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.spark.file_writer import DATA_ERROR

# Spark's errors of evaluating an expression on a value (classic and Spark Connect name them alike); an error of
# reading or writing files is none of these
RUNTIME_ERRORS = frozenset({"ArithmeticException", "SparkRuntimeException", "DateTimeException",
                            "NumberFormatException", "ArrayIndexOutOfBoundsException", "SparkNoSuchElementException"})
FIX = ("Make the predicate give TRUE, FALSE or NULL for every row: e.g. try_divide(a, b) instead of a / b, "
       "try_cast instead of cast, and no assert_true or raise_error.")


def runtime_error(err: BaseException, where: str) -> LakeSpecError | None:
    """The clear error for `err`, raised by Spark while it evaluated `where` on the table's rows (None: `err` is
    something else)."""
    if isinstance(err, LakeError) or type(err).__name__ not in RUNTIME_ERRORS or DATA_ERROR in str(err):
        return None
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
    return LakeSpecError("where", f"evaluating {where!r} failed on a row of the table: {first[:500]} Nothing was "
                         "deleted.", FIX)


@contextmanager
def evaluating(where: str | None) -> Iterator[None]:
    """Turn Spark's runtime errors of `where` (None: a delete by `filters`, nothing to turn) into `LakeSpecError`."""
    try:
        yield
    except Exception as err:
        clear = runtime_error(err, where) if where is not None else None
        if clear is None:
            raise
        raise clear from err
