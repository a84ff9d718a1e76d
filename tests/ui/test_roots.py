"""Table references of the Lake page stay inside the configured roots."""

from __future__ import annotations

import os
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
