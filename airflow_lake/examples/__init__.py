"""Definitions shared by the example DAGs in `dags/` (tables, layouts, SQL): importable wherever the package is."""
