"""The bucket rewrite: chosen partitions of a table rewritten into Hive-style buckets Spark reads as buckets.
Imports `lake.commit`, `lake.spark`, `lake.format`, `lake.spec` and the floor (the bucketing itself is `spec.bucketing`)."""
