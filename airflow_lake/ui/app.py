"""The Lake page's FastAPI app (mounted by the api-server under /lake through the plugin).

Airflow does not authenticate plugin apps: every route here depends on Airflow's own `get_user`, so it needs
the same login as the UI (the UI's `_token` cookie, or a `Authorization: Bearer` token) and answers 401/403
otherwise. Table references from requests are confined to the configured roots (`roots.resolve`).
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, Response

from airflow_lake.ui import data, pages, roots
from airflow_lake.ui.svg import layout_svg

SVG = "image/svg+xml"


def _authenticated() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


def _table(ref: str) -> roots.TableRef:
    try:
        return roots.resolve(ref, roots.configured_roots())
    except roots.BadTableRef as err:
        raise HTTPException(status_code=404, detail=str(err)) from err


def _tables() -> tuple[list[dict[str, Any]], list[str]]:
    rows, errors = [], []
    for ref in roots.find_tables(roots.configured_roots()):
        try:
            rows.append(data.table_summary(ref))
        except Exception as err:  # one damaged table must not hide the others
            errors.append(f"{ref.ref}: {err}")
    return rows, errors


def _layouts(ref: roots.TableRef, clustered_at: int | None) -> list[str]:
    pictures = [layout_svg(data.layout(ref, None), "now")]
    if clustered_at:
        pictures.append(layout_svg(data.layout(ref, str(clustered_at - 1)), "before the last clustering"))
    return pictures


def create_app() -> FastAPI:
    """The app; every route requires an authenticated Airflow user."""
    app = FastAPI(title="Lake tables", dependencies=[_authenticated()], docs_url=None, redoc_url=None,
                  openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        rows, errors = _tables()
        return pages.index_page(roots.configured_roots(), rows, errors)

    @app.get("/table", response_class=HTMLResponse)
    def table(ref: str, limit: int = Query(data.TIMELINE_PAGE, ge=1, le=100_000)) -> str:
        target = _table(ref)
        detail = data.table_detail(target, limit)
        return pages.table_page(detail, _layouts(target, detail["clustered_at"]))

    @app.get("/api/tables")
    def api_tables() -> dict[str, Any]:
        rows, errors = _tables()
        return {"roots": roots.configured_roots(), "tables": rows, "errors": errors}

    @app.get("/api/table")
    def api_table(ref: str, limit: int = Query(data.TIMELINE_PAGE, ge=1, le=100_000)) -> dict[str, Any]:
        return data.table_detail(_table(ref), limit)

    @app.get("/api/layout.svg")
    def api_layout(ref: str, as_of: str | None = None) -> Response:
        target = _table(ref)
        try:
            files = data.layout(target, as_of)
        except Exception as err:  # an unknown as_of: say so
            raise HTTPException(status_code=404, detail=str(err)) from err
        return Response(layout_svg(files, f"as of {as_of}" if as_of else "now"), media_type=SVG)

    return app


app = create_app()
