"""The tests' JVM class-data archive (tests/jvm_archive.py) is read only from a directory that is the user's own:
an archive is code every test JVM maps, so one planted in a shared or foreign directory must never be used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import jvm_archive


def test_the_cache_directory_is_created_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = jvm_archive.cache_dir()
    assert path == tmp_path / "cache" / "airflow-lake" / "jvm"
    assert os.stat(path).st_mode & 0o777 == 0o700


def test_a_directory_others_can_write_or_a_symlink_is_refused(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared" / "airflow-lake" / "jvm"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "shared"))
    assert jvm_archive.cache_dir() is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "linked" / "airflow-lake").mkdir(parents=True)
    (tmp_path / "linked" / "airflow-lake" / "jvm").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "linked"))
    assert jvm_archive.cache_dir() is None
    # and then the JVMs get the flags without an archive (nothing is built either)
    assert jvm_archive.jvm_options("-XX:+UseSerialGC") == "-XX:+UseSerialGC"
    assert not list(elsewhere.iterdir())


def test_the_archive_is_named_by_the_jvm_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    assert jvm_archive.archive_key("-XX:+UseSerialGC") != jvm_archive.archive_key("-XX:+UseParallelGC")
    monkeypatch.setenv("AIRFLOW_LAKE_TEST_CDS", "0")
    assert jvm_archive.jvm_options("-XX:+UseSerialGC") == "-XX:+UseSerialGC"
