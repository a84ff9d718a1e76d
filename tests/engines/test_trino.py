"""The Trino helper's own failures: without the server (or the Java it needs), CI fails and elsewhere the Trino
tests skip, each saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import trino
from tests.engines.trino import require_trino


def test_without_the_server_ci_fails_and_elsewhere_skips(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the real fetch, failing: its cache directory cannot be made (a file is in the way)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    server, why = trino._fetched.__wrapped__()
    assert server is None and ".ci/fetch_trino failed (1)" in why and "not-a-directory" in why
    monkeypatch.setattr(trino, "_fetched", lambda: (server, why))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"Trino cannot run: \.ci/fetch_trino failed"):
        require_trino()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Trino cannot run"):
        require_trino()


def test_without_java_24_the_fetch_refuses_before_downloading(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TRINO_JAVA_HOME", str(tmp_path / "no-jdk"))
    server, why = trino._fetched.__wrapped__()
    assert server is None and "needs Java 24 or newer" in why and "no-jdk" in why
    assert [p.name for p in (tmp_path / "cache" / "airflow-lake" / "trino").iterdir()] == [".lock"]  # nothing fetched
