"""The alter_table operation: schema and property changes (`spec.evolution`) as one metadata-only commit.
Imports `lake.commit`, `lake.format`, `lake.spec` and the floor."""
