"""airflow-lake: an Apache Airflow provider that keeps Spark Parquet lake tables fast and cheap."""

from __future__ import annotations

__version__ = "0.1.0"
