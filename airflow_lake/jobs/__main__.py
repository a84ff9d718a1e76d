"""`python -m airflow_lake.jobs OPERATION --spec ...`: the runner without spark-submit (local Spark)."""

import sys

from airflow_lake.jobs.command_line import main

sys.exit(main())
