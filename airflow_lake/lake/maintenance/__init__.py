"""Upkeep of a table: `clean` (files no snapshot in the retention needs) and orphan removal.
Imports `lake.commit`, `lake.format`, `lake.publish`, `lake.spec` and the floor."""
