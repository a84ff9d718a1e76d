"""`LakePlugin`: the Lake page as a view of the Airflow UI, served by the api-server under /lake.

The page is an external view with destination "nav" and a `url_route`: the UI shows it inside its own shell (its
navigation bar on the left, the page in the content area, at `<ui>/plugin/lake`), with its own entry at the top
level of the navigation (`nav_top_level`), not in a menu. Pages inside keep their own address there
(`<ui>/plugin/lake/lake/table?ref=0/sales`), so they can be bookmarked and linked. External views came with
Airflow 3.1; a UI older than `nav_top_level` (checked with 3.3) lists the entry under its Plugins menu instead.
A React app (`react_apps`) would render without a frame, but needs a JavaScript bundle built against the UI's
React, which a Python package should not have to build and ship.

Registered through the package's `airflow.plugins` entry point (so `pip install airflow-lake` is enough);
`plugins/airflow_lake_plugin.py` does the same for a plugins folder.
"""

from __future__ import annotations

from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin

from airflow_lake.ui.app import app
from airflow_lake.ui.links import URL_ROUTE, LakeTableLink

# The navigation icon, inline (no request, no login): a table over a water line. An image cannot take the text
# colour as the UI's own icons do (dark, and white on the selected entry), so it brings its own backdrop.
_ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><rect width="24" height="24" rx="5" '
         'fill="{}"/><g fill="none" stroke="{}" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round">'
         '<rect x="5" y="4" width="14" height="10" rx="1.5"/><path d="M5 7.5h14M5 10.8h14M10 4v10"/>'
         '<path d="M3.5 18.5c1.4 1.1 2.8 1.1 4.2 0s2.8-1.1 4.2 0 2.8 1.1 4.2 0 2.8-1.1 4.2 0"/></g></svg>')


def icon(backdrop: str, colour: str) -> str:
    """The navigation icon as a data URL: `colour` lines on a `backdrop` square."""
    return "data:image/svg+xml," + quote(_ICON.format(backdrop, colour))


class LakePlugin(AirflowPlugin):
    """The Lake page (FastAPI app + its view in the UI's navigation) and the "Lake table" link of lake operators."""

    name = "airflow_lake"
    fastapi_apps = [{"app": app, "url_prefix": "/lake", "name": "Lake"}]
    external_views = [{"name": "Lake", "href": "lake/", "destination": "nav", "url_route": URL_ROUTE,
                       "nav_top_level": True, "icon": icon("#ffffff", "#1f5f99"),
                       "icon_dark_mode": icon("#27272a", "#8cc4f0")}]
    operator_extra_links = [LakeTableLink()]
