"""The one check of paths taken from metadata (`paths.confined`, issue 33 item 3), and `Storage` refusing any path that
could leave the table root: the same rule for local paths and store keys, and locally no delete through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_lake.lake.errors import LakeError, LakeUnsafePath
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.storage import Storage

GOOD_DATA = [
    "part-20240101000000000-0000.parquet",  # an older unpartitioned table: files at the root
    "dt=2024-01-01/part-20240101000000000-0000_00003.parquet",  # older partitioned: partition directories
    "data/20261126000000000-0badcafe-b4/dt=d1/part-00000-0f1e_00007.c000.snappy.parquet",
    "data/20261126000000000-0badcafe/_c=1/k=a:b/x y/part-0.parquet",  # `_` with `=` (Spark's rule), `:` and spaces
    "dt=__HIVE_DEFAULT_PARTITION__/p.parquet",
    "dt=%2E%2E/p.parquet",  # Spark's escape of a partition value `..`: a literal name
    "x/a..b/c...d",
    "dt=é/π.parquet",
]
BAD = {  # path -> the words the error uses
    "": "empty",
    "../victim/a.parquet": "climbs out",
    "data/x/../../../victim": "climbs out",
    "..": "climbs out",
    "/tmp/victim/a.parquet": "absolute",
    "//host/share/a": "absolute",
    "file:///tmp/victim/a.parquet": "URL",
    "file:/tmp/victim": "URL",
    "s3://bucket/victim/a.parquet": "URL",
    "s3a://bucket/k": "URL",
    "gs://bucket/k": "URL",
    "C:/victim/a.parquet": "drive",
    "c:victim": "drive",
    "..\\victim\\a.parquet": "backslash",
    "dt=a\\..\\..\\x": "backslash",
    "a//b": "not normalized",
    "a/./b": "not normalized",
    "./a": "not normalized",
    "a/": "not normalized",
    "a\x00b": "control character",
    "a\nb": "control character",
}
BAD_DATA_ONLY = {  # inside the table, but not where data files lie
    "_lake/log/00000000000000000000.json": "metadata directory",
    "_LAKE/log/x.json": "metadata directory",
    "_lake/staging/20261126000000000/dt=a/p.parquet": "metadata directory",
    "data/x/_temporary/0/part-0.parquet": "data area",
    "dt=a/_SUCCESS": "data area",
    "dt=a/.part-0.parquet.crc": "data area",
    ".hidden": "data area",
    "sub/_lake/log/x.json": "data area",  # another table's metadata, below this one
}


@pytest.mark.parametrize("rel", GOOD_DATA)
def test_data_paths_pass_and_come_back_as_given(rel: str) -> None:
    assert paths.confined([rel], "log entry X") == [rel]
    assert paths.confined([rel], "log entry X", area="table") == [rel]


@pytest.mark.parametrize(("rel", "words"), sorted({**BAD, **BAD_DATA_ONLY}.items()))
def test_a_bad_path_is_refused_naming_its_source_the_path_and_the_problem(rel: str, words: str) -> None:
    with pytest.raises(LakeUnsafePath) as caught:
        paths.confined(["dt=a/ok.parquet", rel], "log entry /t/_lake/log/00000000000000000007.json (removed)")
    err = caught.value
    assert isinstance(err, LakeError) and not isinstance(err, ValueError)  # never swallowed as a parse error
    assert err.source == "log entry /t/_lake/log/00000000000000000007.json (removed)" and err.path == rel
    assert words in err.problem
    message = str(err)
    assert message.startswith("log entry /t/_lake/log/00000000000000000007.json (removed) names the path")
    assert "Nothing was read or deleted" in message and "Fix: Restore that file from a backup" in message


@pytest.mark.parametrize("rel", sorted(BAD))
def test_the_table_area_refuses_what_leaves_the_root(rel: str) -> None:
    with pytest.raises(LakeUnsafePath):
        paths.confined([rel], "x", area="table")


@pytest.mark.parametrize("rel", sorted(BAD_DATA_ONLY))
def test_the_table_area_holds_the_metadata_and_hidden_files(rel: str) -> None:
    assert paths.confined([rel], "x", area="table", directories=True) == [rel]


def test_directories_end_in_one_slash_only_where_allowed() -> None:
    assert paths.confined(["data/x/"], "manifest M", directories=True) == ["data/x/"]
    with pytest.raises(LakeUnsafePath, match="not normalized"):
        paths.confined(["data/x/"], "log entry E")
    for rel in ("data/x//", "/", "../", "_lake/"):
        with pytest.raises(LakeUnsafePath):
            paths.confined([rel], "manifest M", directories=True)


@pytest.mark.parametrize("value", [None, 5, ["a"], {"path": "a"}, b"a"])
def test_what_is_no_string_is_no_path(value: object) -> None:
    with pytest.raises(LakeUnsafePath, match="not a path"):
        paths.confined([value], "manifest M")


def test_the_storage_refuses_every_path_that_leaves_the_root(tmp_path: Path) -> None:
    """Local paths and store keys alike: every method checks its path before any I/O."""
    root = tmp_path / "t"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "a.parquet").write_bytes(b"victim")
    for url in (str(root), "memory://bucket/t"):
        storage = Storage(url)
        for rel in ("../victim/a.parquet", "../victim", "x/../../victim/a.parquet", "/etc/passwd", "file:///etc",
                    "s3://b/k", "a\\b"):
            for method, args in (("read_bytes", ()), ("exists", ()), ("delete", ()), ("delete_tree", ()),
                                 ("walk_files", ()), ("list_dir", ()), ("write_bytes", (b"x",)), ("uri", ()),
                                 ("path", ())):
                with pytest.raises(LakeUnsafePath, match="a path asked of the table"):
                    getattr(storage, method)(rel, *args)
    assert (victim / "a.parquet").read_bytes() == b"victim"


def test_local_deletes_and_listings_never_go_through_a_symlink_out_of_the_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    victim = tmp_path / "victim"
    (victim / "dt=a").mkdir(parents=True)
    (victim / "dt=a" / "p.parquet").write_bytes(b"victim")
    (root / "data").mkdir(parents=True)
    os.symlink(victim, root / "data" / "w")  # a directory of the table that is a symlink out of it
    os.symlink(victim / "dt=a" / "p.parquet", root / "link.parquet")  # a file that is one
    storage = Storage(str(root))
    for call in (lambda: storage.delete("data/w/dt=a/p.parquet"), lambda: storage.delete_tree("data/w"),
                 lambda: storage.walk_files("data/w"), lambda: storage.refuse_escapes(["data/w/"], "manifest M"),
                 lambda: storage.refuse_escapes(["data/w/dt=a/p.parquet"], "manifest M")):
        with pytest.raises(LakeUnsafePath, match="reaches outside the table through a symlink"):
            call()
    assert storage.delete("link.parquet")  # a symlink inside the table is removed itself, never followed
    assert not os.path.lexists(root / "link.parquet")
    assert (victim / "dt=a" / "p.parquet").read_bytes() == b"victim"
    # a table reached through a symlink of its own is still inside itself
    os.symlink(root, tmp_path / "alias")
    alias = Storage(str(tmp_path / "alias"))
    (root / "dt=b").mkdir()
    (root / "dt=b" / "q.parquet").write_bytes(b"ours")
    alias.refuse_escapes(["dt=b/q.parquet", "dt=b/"], "manifest M")
    assert alias.walk_files("dt=b") == ["dt=b/q.parquet"] and alias.delete("dt=b/q.parquet")
