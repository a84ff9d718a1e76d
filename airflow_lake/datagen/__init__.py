"""Sample data generators for tests, benchmarks and the example DAGs (numpy + pyarrow; no Spark, no downloads)."""
