"""Table references of the Lake page stay inside the configured roots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.ui.roots import BadTableRef, configured_roots, find_tables, resolve


@pytest.fixture
def lake(tmp_path: Path) -> tuple[list[str], Path]:
    root = tmp_path / "lake"
    for name in ("a", "nested/b"):
        LakeTable.create(str(root / name), {"schema": "x BIGINT"})
    outside = tmp_path / "secret"
    LakeTable.create(str(outside), {"schema": "x BIGINT"})
    os.symlink(outside, root / "link")  # a link out of the root
    (root / "plain").mkdir()
    return [os.path.realpath(root)], tmp_path


def test_tables_under_the_roots_resolve(lake: tuple[list[str], Path]) -> None:
    roots, _ = lake
    assert [t.ref for t in find_tables(roots)] == ["0/a", "0/nested/b"]  # not the link, not "plain"
    ref = resolve("0/nested/b", roots)
    assert (ref.root, ref.relative, ref.path) == (0, "nested/b", f"{roots[0]}/nested/b")


@pytest.mark.parametrize("bad", [
    "", "a", "1/a", "x/a", "-1/a", "0/", "0//etc", "0/../secret", "0/a/../../secret", "0/./a", "0/link",
    "0/plain", "0/missing", "0/a\x00", "0/..\\secret", "\u0660/a", "0/" + "/etc/passwd",
])
def test_bad_or_escaping_references_are_refused(lake: tuple[list[str], Path], bad: str) -> None:
    roots, _ = lake
    with pytest.raises(BadTableRef):
        resolve(bad, roots)


def test_roots_come_from_airflow_config_or_the_example_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW__LAKE__ROOTS", f"{tmp_path}/a, {tmp_path}/b/")
    assert configured_roots() == [f"{tmp_path}/a", f"{tmp_path}/b"]
    monkeypatch.delenv("AIRFLOW__LAKE__ROOTS")
    monkeypatch.setenv("AIRFLOW_LAKE_ROOT", str(tmp_path / "c"))
    assert configured_roots() == [f"{tmp_path}/c"]


@pytest.mark.parametrize("planted", ["lake dir out of the roots", "lake dir of another table", "log dir out of it",
                                     "log entry out of it"])
def test_a_table_whose_metadata_is_a_link_is_refused(lake: tuple[list[str], Path], planted: str) -> None:
    """`ROOT/innocent/_lake -> /elsewhere/_lake` (and links deeper in `_lake`) would show another table's
    metadata under this table's name and asset: refused, and not listed."""
    roots, base = lake
    root = Path(roots[0])
    innocent = root / "innocent"
    if planted.startswith("lake dir"):
        innocent.mkdir()
        target = base / "secret" if planted == "lake dir out of the roots" else root / "a"
        os.symlink(target / "_lake", innocent / "_lake")
    else:
        LakeTable.create(str(innocent), {"schema": "x BIGINT"})
        log = innocent / "_lake" / "log"
        if planted == "log dir out of it":
            shutil.rmtree(log)
            os.symlink(base / "secret" / "_lake" / "log", log)
        else:
            entry = next(log.iterdir())
            entry.unlink()
            os.symlink(base / "secret" / "_lake" / "log" / entry.name, entry)
    with pytest.raises(BadTableRef, match="link"):
        resolve("0/innocent", roots)
    assert [t.ref for t in find_tables(roots)] == ["0/a", "0/nested/b"]


def test_links_that_stay_inside_a_tables_lake_dir_are_followed(lake: tuple[list[str], Path]) -> None:
    roots, _ = lake
    lake_dir = Path(roots[0]) / "a" / "_lake"
    os.symlink(lake_dir / "log", lake_dir / "log-alias")
    assert resolve("0/a", roots).relative == "a"
