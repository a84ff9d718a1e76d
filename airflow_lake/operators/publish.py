"""`LakePublishOperator`: catch a table's open-format metadata up with its log, so other engines (DuckDB, polars,
Trino, Spark without this package) read its newest snapshot."""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_lake.operators.base import LakeOperator


class LakePublishOperator(LakeOperator):
    """Publish every commit of a table that other engines do not see yet (its Delta Lake log `_delta_log/`), with
    the `publish` operation, in the task's own process (metadata only, no Spark). Every commit publishes itself
    once it lands; this catches up what a failed or killed publish left behind, and publishes a table created
    before publishing existed for the first time (what `airflow-lake publish PATH` does from a shell).

    Returns (XCom) `published_seq` (the newest published Delta version, = our log's seq), `unpublished_commits`
    (0 once caught up), `delta_versions_written`, `publish_seconds` and, for a primary-key table, `hidden_files`
    and `hidden_commits` (what other engines see only after the next `compact_upserts`). A publish that fails fails
    the task with the error (our log, the truth, is untouched); a retry publishes what is still missing.

    :param table: path or URL of the lake table (templated).
    """

    operation: ClassVar[str] = "publish"

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The publish spec: the table alone."""
        return {}
