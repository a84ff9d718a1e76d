"""Defaults of the lake hook: the Spark connection lake tasks submit with unless told otherwise (the Spark
provider's own default), and the largest upsert source run without Spark."""

from __future__ import annotations

DEFAULT_CONN_ID = "spark_default"
# An upsert whose source is plain Parquet files up to this size runs with pyarrow in the task's own process, not on
# Spark (`LakeHook(in_process_max_bytes=...)`, the operator's parameter; 0: always on Spark)
DEFAULT_IN_PROCESS_MAX_BYTES = 64 << 20
