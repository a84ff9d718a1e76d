"""Who may read what on the Lake page: Airflow's auth manager decides, through the API its own views use.

- The page at all (every route): the custom view "Lake", method GET (`is_authorized_custom_view`).
- A table (its row in the list, its page, its JSON, its layout pictures): read access (GET) to the Airflow
  asset of the table, `airflow_lake.assets.table_asset(<its real path>)` (`is_authorized_asset` with that
  asset's id; if several assets share the URI, to each of them). A table that no DAG has declared as an
  asset yet has no asset id: it needs read access to assets as such (`AssetDetails()` without an id, what
  Airflow asks for its own asset list).

A table's page shows its spec, the queries its writes ran (with their literals) and request ids, so seeing
that a table exists under a root is not enough to read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from airflow_lake.ui.roots import TableRef

VIEW = "Lake"  # the custom view's resource name, as an auth manager's permissions name it
_QUERY_BATCH = 500


class Reader:
    """A logged-in Airflow user, and what the auth manager lets them read here."""

    def __init__(self, user: Any, auth_manager: Any = None) -> None:
        if auth_manager is None:
            from airflow.api_fastapi.app import get_auth_manager

            auth_manager = get_auth_manager()
        self.user = user
        self.auth = auth_manager
        self._any_asset: bool | None = None

    def may_open_page(self) -> bool:
        """Whether the user may open the Lake page at all."""
        return bool(self.auth.is_authorized_custom_view(method="GET", resource_name=VIEW, user=self.user))

    def readable(self, refs: Sequence[TableRef]) -> list[TableRef]:
        """The tables of `refs` whose assets the user may read (one database query for all of them)."""
        uris = {ref: table_uri(ref) for ref in refs}
        ids = asset_ids(uris.values())
        return [ref for ref in refs if self._may_read_assets(ids.get(uris[ref], []))]

    def may_read(self, ref: TableRef) -> bool:
        """Whether the user may read table `ref`."""
        return bool(self.readable([ref]))

    def _may_read_assets(self, ids: Sequence[str]) -> bool:
        from airflow.api_fastapi.auth.managers.models.resource_details import AssetDetails

        if not ids:
            if self._any_asset is None:
                self._any_asset = bool(self.auth.is_authorized_asset(method="GET", details=AssetDetails(),
                                                                     user=self.user))
            return self._any_asset
        return all(self.auth.is_authorized_asset(method="GET", details=AssetDetails(id=i), user=self.user)
                   for i in ids)


def table_uri(ref: TableRef) -> str:
    """The URI of the table's asset, as Airflow stores it (the SDK's `Asset` normalizes it)."""
    from airflow_lake.assets import table_asset

    return str(table_asset(ref.path).uri)


def asset_ids(uris: Iterable[str]) -> dict[str, list[str]]:
    """The ids of the assets with these URIs, by URI (URIs without an asset are missing)."""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    wanted = sorted(set(uris))
    found: dict[str, list[str]] = {}
    with create_session() as session:
        for start in range(0, len(wanted), _QUERY_BATCH):
            chunk = wanted[start:start + _QUERY_BATCH]
            for asset_id, uri in session.execute(select(AssetModel.id, AssetModel.uri)
                                                 .where(AssetModel.uri.in_(chunk))):
                found.setdefault(str(uri), []).append(str(asset_id))
    return found
