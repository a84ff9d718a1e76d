"""The "Lake table" extra link of every lake operator's task: its table's page inside the Airflow UI (the Lake view
at <ui>/plugin/lake, showing the page /lake/table?ref=...), if the table is under a configured root (a local path,
or a store URL under a store root: `roots.relative_to_root`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

from airflow_lake.ui.roots import BadTableRef, configured_roots, relative_to_root, resolve

URL_ROUTE = "lake"  # the Lake view's address in the UI (`plugin.URL_ROUTE`)


class LakeTableLink(BaseOperatorLink):
    """Link to the Lake page of the task's table (computed when the task runs, stored in XCom)."""

    name = "Lake table"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """`<api base url>/plugin/lake/lake/table?ref=...`, or "" when the table is outside the configured roots."""
        table = str(getattr(operator, "table", "") or "")
        roots = configured_roots()
        for index, root in enumerate(roots):
            relative = relative_to_root(table, root)
            if relative is not None:
                ref = f"{index}/{relative}"
                try:
                    resolve(ref, roots)
                except BadTableRef:
                    return ""
                return f"{_base_url()}/plugin/{URL_ROUTE}/lake/table?ref={quote(ref, safe='/')}"
        return ""


def _base_url() -> str:
    try:
        from airflow.configuration import conf

        return str(conf.get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:
        return ""
