"""The Lake page for an Airflow whose plugins folder is this directory. The installed airflow-lake package
registers the same plugin through its `airflow.plugins` entry point; then this file defines nothing (Airflow
would report a second plugin of the same name as an import error)."""

from importlib.metadata import entry_points

if not any(ep.value.startswith("airflow_lake.") for ep in entry_points(group="airflow.plugins")):
    from airflow_lake.ui.plugin import LakePlugin

    __all__ = ["LakePlugin"]
