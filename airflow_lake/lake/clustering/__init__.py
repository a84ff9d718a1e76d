"""Clustering (Hudi-style): `schedule` stores a plan once enough commits happened; `execute` rewrites its groups
(LINEAR, ZORDER, HILBERT) as one replace commit. Imports `lake.commit`, `lake.spark`, `lake.format`, `lake.spec`."""
