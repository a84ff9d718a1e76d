"""`LakeSubmitHook`: the Spark provider's `SparkSubmitHook`, reading the job's own word from its output.

The job (`airflow_lake.jobs.command_line`) prints its process group when it starts and its result or
failure when it ends (`airflow_lake.jobs.outcome`). This subclass reads those lines as they stream by, so
the caller learns the outcome from the job itself, not from the text of the provider's exception. In
cluster deploy mode the driver's output never reaches spark-submit: `outcome` then stays empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_lake.jobs.outcome import Outcome


class LakeSubmitHook(SparkSubmitHook):
    """A SparkSubmitHook that collects the job's STARTED / RESULT / FAILED lines into `outcome`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcome = Outcome()

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        super()._process_spark_submit_log(self._watch(itr))

    def _watch(self, itr: Iterator[Any]) -> Iterator[Any]:
        for line in itr:
            self.outcome.feed(str(line))
            yield line
