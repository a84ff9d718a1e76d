"""The Lake page's FastAPI app (mounted by the api-server under /lake through the plugin).

Airflow does not authenticate plugin apps: every route here depends on Airflow's own `get_user`, so it needs
the same login as the UI (the UI's `_token` cookie, or a `Authorization: Bearer` token) and answers 401/403
otherwise; then Airflow's auth manager decides what the user may read (`access.py`: 403 otherwise). Table
references from requests are confined to the configured roots (`roots.resolve`). A table whose metadata
cannot be read gets a page (or JSON) naming the table and the problem, with status 500; the list keeps
showing the other tables.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, Response

from airflow_lake.lake.errors import LakeError, LakeSnapshotNotFound, LakeSpecError
from airflow_lake.ui import access, data, pages, roots
from airflow_lake.ui.svg import layout_svg

SVG = "image/svg+xml"
FORBIDDEN_PAGE = "Forbidden: the Lake page needs read access to its custom view 'Lake'."
FORBIDDEN_TABLE = "Forbidden: reading this table needs read access to its Airflow asset."
log = logging.getLogger(__name__)


class Unreadable(Exception):
    """A table whose metadata could not be read (damaged log entry or checkpoint, unreadable files, ...)."""

    def __init__(self, ref: roots.TableRef, err: BaseException) -> None:
        # the lake's own errors are written for people (they name the file and the fix); others get their type
        problem = str(err) if isinstance(err, LakeError) else f"{type(err).__name__}: {err}"
        super().__init__(f"Table {ref.ref} ({ref.path}) cannot be read: {problem}")
        self.ref = ref


def _reader_dependency() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    def reader(user: Any = Depends(get_user)) -> access.Reader:  # noqa: B008 (FastAPI's idiom)
        who = access.Reader(user)
        if not who.may_open_page():
            raise HTTPException(status_code=403, detail=FORBIDDEN_PAGE)
        return who

    return Depends(reader)


def _table(ref: str, reader: access.Reader) -> roots.TableRef:
    try:
        target = roots.resolve(ref, roots.configured_roots())
    except roots.BadTableRef as err:
        raise HTTPException(status_code=404, detail=str(err)) from err
    if not reader.may_read(target):
        raise HTTPException(status_code=403, detail=FORBIDDEN_TABLE)
    return target


def _unreadable(target: roots.TableRef, err: BaseException) -> Unreadable:
    log.exception("Lake page: table %s cannot be read", target.ref, exc_info=err)
    return Unreadable(target, err)


def _tables(reader: access.Reader) -> tuple[list[dict[str, Any]], list[str]]:
    rows, errors = [], []
    for ref in reader.readable(roots.find_tables(roots.configured_roots())):
        try:
            rows.append(data.table_summary(ref))
        except Exception as err:  # one damaged table must not hide the others
            errors.append(str(_unreadable(ref, err)))
    return rows, errors


def _layouts(opened: data.Opened, clustered_at: int | None) -> list[str]:
    pictures = [layout_svg(data.layout(opened.ref, None, opened), "now")]
    if clustered_at:  # (a clustering is never entry 0, the create)
        try:
            before = data.layout(opened.ref, str(clustered_at - 1), opened)
        except LakeSnapshotNotFound:  # older than the log or the files keep (log / clean retention): no picture
            return pictures
        pictures.append(layout_svg(before, "before the last clustering"))
    return pictures


def _detail(target: roots.TableRef, limit: int) -> tuple[data.Opened, dict[str, Any]]:
    try:
        opened = data.Opened.of(target)
        return opened, data.table_detail(target, limit, opened)
    except Exception as err:
        raise _unreadable(target, err) from err


def create_app() -> FastAPI:
    """The app; every route requires an Airflow user whom the auth manager lets read the page."""
    app = FastAPI(title="Lake tables", docs_url=None, redoc_url=None, openapi_url=None)
    reader_dep = _reader_dependency()
    limit_query = Query(data.TIMELINE_PAGE, ge=1, le=data.MAX_TIMELINE_PAGE,
                        description=f"newest log entries to show, at most {data.MAX_TIMELINE_PAGE}")

    @app.get("/", response_class=HTMLResponse)
    def index(reader: access.Reader = reader_dep) -> str:
        rows, errors = _tables(reader)
        return pages.index_page(roots.configured_roots(), rows, errors)

    @app.get("/table", response_class=HTMLResponse)
    def table(ref: str, limit: int = limit_query, reader: access.Reader = reader_dep) -> Response:
        target = _table(ref, reader)
        try:
            opened, detail = _detail(target, limit)
            try:
                html = pages.table_page(detail, _layouts(opened, detail["clustered_at"]))
            except Exception as err:
                raise _unreadable(target, err) from err
        except Unreadable as err:
            return HTMLResponse(pages.error_page(target.relative, str(err)), status_code=500)
        return HTMLResponse(html)

    @app.get("/api/tables")
    def api_tables(reader: access.Reader = reader_dep) -> dict[str, Any]:
        rows, errors = _tables(reader)
        return {"roots": roots.configured_roots(), "tables": rows, "errors": errors}

    @app.get("/api/table")
    def api_table(ref: str, limit: int = limit_query, reader: access.Reader = reader_dep) -> dict[str, Any]:
        target = _table(ref, reader)
        try:
            return _detail(target, limit)[1]
        except Unreadable as err:
            raise HTTPException(status_code=500, detail=str(err)) from err

    @app.get("/api/layout.svg")
    def api_layout(ref: str, as_of: str | None = None, reader: access.Reader = reader_dep) -> Response:
        target = _table(ref, reader)
        try:
            files = data.layout(target, as_of)
        except (LakeSnapshotNotFound, LakeSpecError) as err:  # an unknown as_of: say so
            raise HTTPException(status_code=404, detail=str(err)) from err
        except Exception as err:
            raise HTTPException(status_code=500, detail=str(_unreadable(target, err))) from err
        return Response(layout_svg(files, f"as of {as_of}" if as_of else "now"), media_type=SVG)

    return app


app = create_app()
