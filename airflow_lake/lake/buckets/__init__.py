"""Hive-style buckets read as buckets by Spark: layouts per partition, bucketed reads, bucket rewrites."""
