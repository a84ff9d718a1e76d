"""The airflow_lake zip that LakeHook ships to Spark (`--py-files`, Spark Connect artifacts) runs on the driver and
every executor: a zip someone else planted, where it used to be looked for or in the cache, never runs; the job runs
this installation's package."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.hooks.lake import LakeHook
from airflow_lake.hooks.package_zip import CACHE_ENV, PACKAGE_DIR, build_package_zip, not_private, package_zip
from airflow_lake.lake import LakeTable
from airflow_lake.lake.format.instants import pending
from tests.support import write_source

NOBODY = 65534


def former_zip_path() -> Path:
    """Where the zip used to be built and reused if present: the shared temp directory, under a name anyone
    can compute from the public sources."""
    digest = hashlib.sha256()
    for path in sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return Path(tempfile.gettempdir()) / f"airflow_lake-{digest.hexdigest()[:16]}.zip"


def plant(path: Path, mark: Path) -> None:
    """A zip whose airflow_lake, once imported, leaves `mark` behind (and then fails the import)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("airflow_lake/__init__.py", f"import pathlib\npathlib.Path({str(mark)!r}).write_text("
                                                     "'planted code ran')\nraise ImportError('planted')\n")


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own stand-in for the machine's shared temp directory (so nothing is planted in the real one),
    and a cache directory of this user."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir(mode=0o1777)
    os.chmod(shared, 0o1777)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return shared


def planted(path: Path) -> bool:
    with zipfile.ZipFile(path) as archive:
        return archive.namelist() == ["airflow_lake/__init__.py"]


def plant_and_tamper(mark: Path) -> None:
    """Plant a zip at the former predictable path and one in place of the cached zip (that the latter is rebuilt
    is asserted below, where no spark job runs between planting and checking)."""
    plant(former_zip_path(), mark)
    plant(Path(package_zip()), mark)


def write_spec(table: str, source: str) -> dict[str, Any]:
    return {"table": table, "source": {"path": source}}


@pytest.mark.slow
def test_spark_submit_never_runs_a_planted_package(shared_tmp: Path, tmp_path: Path) -> None:
    mark = tmp_path / "planted-code-ran"
    plant_and_tamper(mark)
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    metrics = LakeHook().submit("write", write_spec(table, write_source(tmp_path / "a.parquet", range(7), "a")))
    assert not mark.exists()  # neither zip was imported by the driver
    assert metrics["rows_added"] == 7 and LakeTable.open(table).snapshot().rows == 7
    assert planted(former_zip_path())  # still there, never used


@pytest.mark.slow
def test_spark_connect_never_ships_a_planted_package(shared_tmp: Path, tmp_path: Path, connect_conn_id: str) -> None:
    mark = tmp_path / "planted-code-ran"
    plant_and_tamper(mark)
    table = str(tmp_path / "t")
    LakeTable.create(table, {"schema": "id BIGINT, dt STRING, v DOUBLE"})
    metrics = LakeHook(connect_conn_id).submit("write", write_spec(table, write_source(tmp_path / "a.parquet",
                                                                                        range(5), "a")))
    assert not mark.exists()  # the server's Python workers imported the real package
    assert metrics["rows_added"] == 5 and pending(LakeTable.open(table).storage) == []


def test_a_cache_zip_is_used_only_with_the_bytes_this_package_builds(shared_tmp: Path, tmp_path: Path) -> None:
    first = Path(package_zip())
    assert first.read_bytes() == build_package_zip() and not_private(first.parent) is None
    assert build_package_zip() == build_package_zip()  # deterministic: a cached copy can be compared
    for tamper in (lambda p: plant(p, tmp_path / "mark"),
                   lambda p: p.write_bytes(p.read_bytes()[:-10]),  # cut short
                   lambda p: (p.unlink(), p.symlink_to(tmp_path / "elsewhere.zip"))):
        (tmp_path / "elsewhere.zip").write_bytes(b"not a zip")
        tamper(first)
        assert package_zip() == str(first)
        assert not first.is_symlink() and first.read_bytes() == build_package_zip()
    assert (tmp_path / "elsewhere.zip").read_bytes() == b"not a zip"  # a symlink was replaced, not followed


def test_a_cache_directory_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    link = tmp_path / "link"
    link.symlink_to(private)
    cases = [open_to_all, link]
    if os.geteuid() == 0:  # only root can give a directory to another user
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, NOBODY, NOBODY)
        cases.append(foreign)
    for directory in cases:
        monkeypatch.setenv(CACHE_ENV, str(directory))
        used = Path(package_zip())
        assert not_private(directory) is not None
        assert used.parent.resolve() != directory.resolve(), directory
        assert not_private(used.parent) is None and used.read_bytes() == build_package_zip()
    assert os.listdir(open_to_all) == [] and os.listdir(private) == []


def test_zips_of_other_builds_unused_for_a_week_are_removed(shared_tmp: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    stale, recent = cache / "airflow_lake-0000000000000000.zip", cache / "airflow_lake-1111111111111111.zip"
    for old in (stale, recent):
        old.write_bytes(b"an older build")
    week_ago = time.time() - 8 * 86400
    os.utime(stale, (week_ago, week_ago))
    current = Path(package_zip())  # built now: the cache is tidied
    assert sorted(p.name for p in cache.glob("*.zip")) == sorted([recent.name, current.name])
    os.utime(current, (week_ago, week_ago))
    assert package_zip() == str(current) and current.stat().st_mtime > week_ago + 86400  # used: kept fresh
