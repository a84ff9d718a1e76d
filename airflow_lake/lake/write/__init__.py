"""The write operation: append and overwrite commits of a DataFrame.
Imports `lake.commit`, `lake.spark`, `lake.format`, `lake.spec` and the floor."""
