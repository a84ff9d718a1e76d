"""A long table log written without Spark, as writers make it (entries and checkpoints; the data files are only
described): the tables of bench_lake_page.py and bench_log_open.py.

Commit `seq` appends one file to one of `DAYS` days; with `clustered`, every `CLUSTER_EVERY`th commit instead
replaces that day's live files by one (an `execute_clustering` completing a plan), so the live file count stays what
a clustered table has. A checkpoint is written every `checkpoint.interval` entries (`LakeTable.after_commit`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.log import COMPLETES, CommitLog, LogEntry
from airflow_lake.lake.table import LakeTable

DAYS = 7
CLUSTER_EVERY = 50


def append_commits(table: LakeTable, commits: int, *, clustered: bool,
                   progress: Callable[[int], None] | None = None) -> dict[str, list[DataFile]]:
    """Write log entries 1..`commits` of `table` (just created); return the live files per day."""
    log = CommitLog(table.storage)
    base = instants.id_millis(log.read(0).instant)
    live: dict[str, list[DataFile]] = {}
    for seq in range(1, commits + 1):
        instant = instants.format_id(base + 2 * seq)
        day = f"2024-01-{seq % DAYS + 1:02d}"
        now = time.time()
        if clustered and seq % CLUSTER_EVERY == 0 and live.get(day):
            old = live[day]
            merged = DataFile(f"dt={day}/part-{instant}-00000-00000.parquet", {"dt": day}, sum(f.rows for f in old),
                              sum(f.bytes for f in old), instant=instant)
            live[day] = [merged]
            entry = LogEntry(seq=seq, instant=instant, action="replace", operation="execute_clustering",
                             started_at=now, completed_at=now, base_seq=seq - 1, added=(merged,),
                             removed=tuple(f.path for f in old),
                             metadata={COMPLETES: instants.format_id(base + 2 * seq - 1)},
                             metrics={"files_added": 1, "files_removed": len(old)})
        else:
            added = DataFile(f"dt={day}/part-{instant}-00000-00000.parquet", {"dt": day}, 1000, 100_000 + seq,
                             instant=instant)
            live.setdefault(day, []).append(added)
            entry = LogEntry(seq=seq, instant=instant, action="commit", operation="write", started_at=now,
                             completed_at=now, base_seq=seq - 1, added=(added,),
                             metrics={"files_added": 1, "rows_added": 1000, "bytes_added": added.bytes})
        if not log.try_append(entry):
            raise RuntimeError(f"log entry {seq} exists already")
        table.after_commit(entry)  # a checkpoint every `checkpoint.interval` entries, as a writer makes
        if progress is not None:
            progress(seq)
    return live
