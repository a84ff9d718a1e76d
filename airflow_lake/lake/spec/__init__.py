"""The table spec: columns and types, partitions, buckets, merge operators, read strictly.
Imports only `lake.errors`."""
