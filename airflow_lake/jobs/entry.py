"""The application file spark-submit runs: `spark-submit .../entry.py OPERATION --spec JSON|@file`."""

import sys

from airflow_lake.jobs.command_line import main

if __name__ == "__main__":
    sys.exit(main())
