"""The Spark connection lake tasks submit with unless told otherwise: the Spark provider's own default."""

from __future__ import annotations

DEFAULT_CONN_ID = "spark_default"
