"""The jar of our JVM code: built from source with javac into the user's private cache, named by the source and
Spark's version, and skipped (the curve words then come from Python workers) where no javac is found."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from airflow_lake import jvm, store_jars


def test_the_jar_is_built_into_the_users_cache_with_every_arity(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = jvm.curve_jar()
    assert path is not None and path == jvm.jar_path(store_jars.spark_jars_dir())
    assert path.parent == tmp_path / "cache" / "airflow-lake" / "jars"
    names = zipfile.ZipFile(path).namelist()
    assert {f"airflowlake/jvm/CurveWords$Of{n}.class" for n in range(1, 9)} <= set(names)
    assert (path.parent.stat().st_mode & 0o077) == 0  # private
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".build-")]  # no half-built leftovers
    stamp = path.stat().st_mtime_ns
    assert jvm.curve_jar() == path and path.stat().st_mtime_ns == stamp  # built once


def test_without_javac_nothing_is_built_and_the_reason_is_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    with caplog.at_level("INFO"):
        assert jvm.curve_jar() is None
    assert "no javac on PATH" in caplog.text and "Python workers" in caplog.text
    monkeypatch.setenv(jvm.DISABLE_ENV, "0")
    assert jvm.curve_jar() is None and not jvm.enabled()
