"""The bucket rewrite: chosen partitions rewritten into Hive-style buckets Spark reads as buckets (`spec.bucketing`).
Imports `lake.commit`, `lake.spark`, `lake.format`, `lake.spec` and the floor."""
