"""`LakePlugin`: the Lake page in the Airflow UI's navigation, served by the api-server under /lake.

Registered through the package's `airflow.plugins` entry point (so `pip install airflow-lake` is enough);
`plugins/airflow_lake_plugin.py` does the same for a plugins folder.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_lake.ui.app import app
from airflow_lake.ui.links import LakeTableLink


class LakePlugin(AirflowPlugin):
    """The Lake page (FastAPI app + a navigation entry) and the "Lake table" link of lake operators."""

    name = "airflow_lake"
    fastapi_apps = [{"app": app, "url_prefix": "/lake", "name": "Lake"}]
    external_views = [{"name": "Lake", "href": "lake/", "destination": "nav", "url_route": "lake",
                       "category": "browse"}]
    operator_extra_links = [LakeTableLink()]
