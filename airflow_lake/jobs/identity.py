"""Which airflow_lake a Spark Python worker runs: what a Spark Connect client checks before it relies on
the server running our per-partition code (`mapInArrow` functions are pickled by reference to this package)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

IDENTITY_SCHEMA = "version string, file string"


def package_identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` function: one row with the worker's `airflow_lake.__version__` and `__file__`."""
    import pyarrow as pa

    import airflow_lake

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"version": [airflow_lake.__version__], "file": [str(airflow_lake.__file__)]})


def worker_identity(spark: Any) -> tuple[str, str]:
    """(version, file) of the airflow_lake that `spark`'s Python workers import."""
    row = spark.range(1).mapInArrow(package_identity, IDENTITY_SCHEMA).collect()[0]
    return str(row["version"]), str(row["file"])
