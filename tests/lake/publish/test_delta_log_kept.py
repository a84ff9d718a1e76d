"""`clean` and `remove_orphan_files` never delete the published Delta log: its versions, a Delta checkpoint
(Parquet, under `_delta_log/`) and `_last_checkpoint` all stay byte for byte, however old, and the table reads
the same through delta-rs afterwards."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from deltalake import DeltaTable

from airflow_lake.lake.publish import delta_log
from tests.lake.publish.arrow_commits import commit, delta_rows, make_table, rows


def log_files(path: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(path, delta_log.DELTA_LOG).rglob("*")) if p.is_file()}


def test_clean_and_orphan_removal_keep_the_delta_log(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "table"))
    first = commit(table, [1, 2])
    commit(table, [3], "b")
    commit(table, [4], removed=[first.added[0].path])  # a removed file for clean
    DeltaTable(table.url).create_checkpoint()  # a Delta checkpoint: a Parquet file a directory walk finds
    stray = Path(table.storage.path(first.added[0].path)).parent / "part-stray-00000.parquet"
    shutil.copyfile(table.storage.path(table.snapshot().files[0].path), stray)  # an orphan for orphan removal
    before = log_files(table.url)
    assert any(name.endswith(".checkpoint.parquet") for name in before) and delta_log.LAST_CHECKPOINT.split("/")[-1] \
        in before
    old = time.time() - 10 * 86400  # every file ten days old: nothing is kept for its age
    for directory, _, names in os.walk(table.url):
        for name in names:
            os.utime(os.path.join(directory, name), (old, old))

    assert table.clean(retain_hours=0, force=True) is not None
    assert not os.path.exists(table.storage.path(first.added[0].path))
    orphans = table.remove_orphan_files(older_than_hours=0, force=True)
    assert orphans.deleted and not stray.exists()
    assert not [p for p in orphans.orphans if p.startswith(delta_log.DELTA_LOG)]

    after = log_files(table.url)
    assert {name: data for name, data in after.items() if name in before} == before
    assert set(after) - set(before) == {f"{seq:020d}.json" for seq in (4, 5)}  # the clean and the orphan removal
    assert delta_rows(table.url) == rows(table) == [(3, "v3", "b"), (4, "v4", "a")]
