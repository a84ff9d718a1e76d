"""A spark-submit application for tests that run many operations: `spark-submit runner_batch.py steps.json`, where
the file holds [[operation, spec], ...]. The steps run one after the other as the runner's command line runs one
operation (`jobs.runner.run` on the session `jobs.session.build_session` makes, its metrics printed as the RESULT
line), all on one session, so a chain pays for one JVM and one SparkContext instead of one per operation. The
first failing step ends the run (its traceback, exit code 1)."""

import json
import sys

from airflow_lake.jobs.protocol import Ending
from airflow_lake.jobs.runner import run
from airflow_lake.jobs.session import build_session

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        steps = json.load(handle)
    spark = build_session("airflow-lake test batch")
    for operation, spec in steps:
        Ending.of(run(spark, operation, spec)).write()
    spark.stop()
