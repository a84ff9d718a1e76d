"""An Airflow auth manager for the Lake page's access tests: Airflow's SimpleAuthManager (its login, tokens and
roles), plus what real auth managers (FAB, Keycloak) can say and the simple one cannot — per-asset read grants
and a custom view some users may not open. Set in the api-server as
AIRFLOW__CORE__AUTH_MANAGER=tests.ui.grants_auth_manager.GrantsAuthManager.

- LAKE_TEST_ASSET_GRANTS: JSON {"user": ["asset uri", ...]}: a user listed there reads those assets only
  (looked up by the asset id Airflow passes); users not listed keep the simple manager's answer.
- LAKE_TEST_NO_CUSTOM_VIEWS: comma-separated users who may open no custom view (the Lake page among them).
"""

from __future__ import annotations

import json
import os
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class GrantsAuthManager(SimpleAuthManager):
    """SimpleAuthManager with per-asset grants and custom-view denials (see the module docstring)."""

    def is_authorized_asset(self, *, method: Any, user: Any, details: Any = None) -> bool:
        grants = json.loads(os.environ.get("LAKE_TEST_ASSET_GRANTS", "{}"))
        if user.get_name() not in grants:
            return bool(super().is_authorized_asset(method=method, user=user, details=details))
        if method != "GET" or details is None or details.id is None:
            return False  # no grant on assets as such
        return _asset_uri(details.id) in grants[user.get_name()]

    def is_authorized_custom_view(self, *, method: Any, resource_name: str, user: Any) -> bool:
        if user.get_name() in os.environ.get("LAKE_TEST_NO_CUSTOM_VIEWS", "").split(","):
            return False
        return bool(super().is_authorized_custom_view(method=method, resource_name=resource_name, user=user))


def _asset_uri(asset_id: str) -> str | None:
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        asset = session.get(AssetModel, int(asset_id))
        return None if asset is None else str(asset.uri)
