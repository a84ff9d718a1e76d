"""Other engines reading our tables, run in processes of their own (a Spark with Delta's or Iceberg's jars)."""
