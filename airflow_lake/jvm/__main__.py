"""`python -m airflow_lake.jvm`: build the jar of our JVM code now and print its path."""

from airflow_lake.jvm import main

raise SystemExit(main())
