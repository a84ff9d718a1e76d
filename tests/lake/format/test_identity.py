"""One identity per table (issue 33 item 2): a table id from its create entry, kept by every state and checkpoint,
and a canonical URL for tables created before ids — the same for every spelling of the table's URL."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from airflow_lake.lake import LakeTable
from airflow_lake.lake.commit.reads import Pin
from airflow_lake.lake.format import paths
from airflow_lake.lake.format.identity import canonical_url
from tests.lake.lake_core_helpers import append, make_table


def test_canonical_urls_fold_every_spelling_of_one_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "lake" / "t"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "lake")
    monkeypatch.chdir(tmp_path)
    for spelling in (str(real), f"{real}/", f"file://{real}", "lake/t", f"{tmp_path}/link/t", f"{tmp_path}/link/t/",
                     f"{tmp_path}/lake/../link/t"):
        assert canonical_url(spelling) == str(real), spelling
    for spelling in ("s3://b/t", "s3a://b/t/", "S3A://b/t", "s3n://b/t", "s3://b/t//"):
        assert canonical_url(spelling) == "s3://b/t", spelling
    assert canonical_url("gcs://b/t") == canonical_url("GS://b/t/") == "gs://b/t"
    assert canonical_url("abfss://c@a.dfs.core.windows.net/t/") == "abfs://c@a.dfs.core.windows.net/t"
    assert canonical_url("hdfs://nn:8020/w/t/") == "hdfs://nn:8020/w/t"


def test_a_table_has_one_id_from_its_create_entry_whatever_it_is_called(tmp_path: Path) -> None:
    path = tmp_path / "lake" / "t"
    table = make_table(str(path), {"checkpoint.interval": "2"})
    (tmp_path / "link").symlink_to(tmp_path / "lake")
    table_id = table.table_id
    assert isinstance(table_id, str) and len(table_id) == 32
    assert table.commit_log.read(0).metadata["table_id"] == table_id
    for _ in range(5):
        append(table)
    (path / paths.log_file(0)).unlink()  # the create entry expired: the id lives on in the checkpoints
    for spelling in (str(path), f"{path}/", f"file://{path}", str(tmp_path / "link" / "t")):
        reopened = LakeTable.open(spelling)
        assert reopened.table_id == table_id and reopened.identity() == f"id:{table_id}", spelling
    other = make_table(str(tmp_path / "lake" / "u"))
    assert other.table_id != table_id  # (a table created anew at a path gets a new id too)


def test_a_table_created_before_ids_is_known_by_its_canonical_url(tmp_path: Path) -> None:
    path = tmp_path / "lake" / "old"
    make_table(str(path))
    entry = path / paths.log_file(0)
    raw = json.loads(entry.read_text())
    del raw["metadata"]["table_id"]  # as every create entry was before ids
    entry.write_text(json.dumps(raw))
    (tmp_path / "link").symlink_to(tmp_path / "lake")
    old, linked = LakeTable.open(str(path)), LakeTable.open(str(tmp_path / "link" / "old") + "/")
    assert old.table_id is None
    assert old.identity() == linked.identity() == f"url:{os.path.realpath(path)}"
    assert Pin.of(old, old.state()) == Pin.of(linked, linked.state())


def test_a_copy_made_by_copying_files_keeps_the_id_but_not_the_place(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = make_table(str(path))
    shutil.copytree(path, tmp_path / "copy")
    copy = LakeTable.open(str(tmp_path / "copy"))
    pin, copied = Pin.of(table, table.state()), Pin.of(copy, copy.state())
    assert pin.identity == copied.identity and pin.url != copied.url  # so a query naming the copy is refused


def test_s3_and_s3a_name_one_table_on_the_store(s3_root: str) -> None:
    """On moto's S3 server: the spellings Spark and fsspec use for one table give one identity and one pin."""
    table = LakeTable.create(s3_root, {"schema": "id BIGINT"})
    spellings = [s3_root, f"{s3_root}/", "s3a://" + s3_root.removeprefix("s3://"), "S3://" + s3_root[5:] + "/"]
    opened = [LakeTable.open(s) for s in spellings]
    assert {t.identity() for t in opened} == {f"id:{table.table_id}"}
    assert {t.canonical_url for t in opened} == {s3_root}
    assert len({Pin.of(t, t.state()) for t in opened}) == 1
