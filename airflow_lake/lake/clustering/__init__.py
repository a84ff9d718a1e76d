"""Clustering (Hudi-style): `schedule` stores a plan as a requested replace instant once enough commits
happened; `execute` rewrites each group of small files in the plan's layout (LINEAR, ZORDER, HILBERT) and
completes the plan in one replace commit. `timeline` answers "how many commits since the last clustering"
and "which plans are pending" without Spark."""
